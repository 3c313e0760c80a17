"""What a DataLoader was asked for: its arguments checked, once, into an
immutable LoaderConfig.

``LoaderConfig.build`` takes DataLoader's arguments (absent ones take
``ARGUMENT_DEFAULTS``, the defaults of DataLoader's signature) and raises
ValueError or TypeError for any it cannot honour, with a message saying what
to do instead, before any daemon is reached. It gives the values the loader
exposes (``loader.batch_size``...), what runs in the job's own process (the
transform's Python part, ``collate_fn``, ``fields=``) and the OpenJob body
every job of the loader starts from (``spec``; docs/protocol.md §1.4). The
checks that need galleyd's listing or a sampler's list run later, in
galley._session.

The bounds and names galleyd defines come from the extension (galley._galley),
never copied by hand. A LoaderConfig is a frozen value: share it between
threads freely. ``stage`` and ``fields`` are the objects that run the Python
part and decode the fields, which a job's info completes
(``FieldPlan.set_collations``).
"""

from __future__ import annotations

import dataclasses
import numbers
import operator
import os
import types
from typing import (Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional,
                    Tuple)

from . import _galley
from . import _tensors
from . import batch_ops
from . import dataset_objects
from . import fields as _fields
from . import python_stage
from . import s3_access as _s3_access
from . import shards as _shards
from . import transforms as T
from ._warn import warn_once

__all__ = ["LoaderConfig", "ARGUMENT_DEFAULTS", "check_max_resolution"]

# JobSpec::max_resolution's bounds (galley/job_spec.h), checked here so that
# the error comes before any daemon is reached.
MAX_RESOLUTION_RANGE: Tuple[int, int] = tuple(_galley.max_resolution_range)
# How long a request to galleyd (opening a job, which lists its dataset; a
# page of the listing; stats) may take at least. timeout= bounds batches, as
# torch's does, and only lengthens this.
REQUEST_SECONDS = 30.0

# DataLoader's arguments and their defaults, as its signature gives them
# (tests/python/test_loader_config.py checks that the two agree).
ARGUMENT_DEFAULTS: Mapping[str, Any] = types.MappingProxyType({
    "batch_size": 1, "shuffle": None, "sampler": None, "batch_sampler": None,
    "num_workers": 0, "collate_fn": None, "pin_memory": False, "drop_last": False,
    "timeout": 0, "worker_init_fn": None, "multiprocessing_context": None, "generator": None,
    "prefetch_factor": None, "persistent_workers": False, "pin_memory_device": "",
    "in_order": True, "transform": None, "normalize": None, "seed": None, "epochs": None,
    "rank": None, "world_size": None, "shard_seed": None, "local_world_size": None,
    "prefetch": None, "on_error": "skip", "policy": None, "classes": None, "indices": None,
    "layout": "NCHW", "socket": None, "name": None, "ods_fraction": 0.1, "autostart": None,
    "batch_transform": None, "image_key": None, "label_key": "cls", "fields": None,
    "decode_fields": True, "unpickle_fields": False, "max_member_bytes": None,
    "field_batch_bytes": None, "max_resolution": None,
})

# The first bytes of the image formats galleyd decodes (a dataset given as
# one of them is a mistake worth naming).
_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"BM")


@dataclasses.dataclass(frozen=True)
class LoaderConfig:
    """A DataLoader's arguments, checked (module docstring)."""

    dataset: Any            # the object given: a path, shards, a torchvision dataset
    root: str               # the dataset's path (or shard set's name) as galleyd is asked
    shards: Optional[List[str]]  # tar shards, expanded here as the user
    folder: Optional[dataset_objects.FolderDataset]  # a torchvision object's files
    batch_size: int
    num_workers: int
    shuffle: bool
    drop_last: bool
    seed: int
    epochs: Optional[int]
    rank: int
    world_size: int
    shard_seed: int         # the DDP split's seed (seed unless given)
    local_world_size: int   # ranks per node; 0: not known
    prefetch: int
    prefetch_factor: int
    on_error: str
    pin_memory: bool
    pin: bool               # pin_memory and CUDA is there to pin for
    pin_memory_device: str
    collate_fn: Optional[Callable[[List[Any]], Any]]
    timeout: float
    transform: Any
    batch_transform: Any
    transform_split: str    # where each op runs, in words
    stage: Optional[python_stage.SampleStage]  # the Python part, if any
    fields: Optional[_fields.FieldPlan]  # what a batch carries with fields=
    given_sampler: Any      # loader.sampler when one was given
    distributed_sampler: Any  # a DistributedSampler: its list and set_epoch rule each loop
    multiprocessing_context: Any
    worker_init_fn: Optional[Callable[[int], None]]
    persistent_workers: bool
    max_resolution: Optional[int]
    socket: Optional[str]
    autostart: Optional[bool]
    # The OpenJob body every job of the loader starts from; a job adds its
    # epochs, resume point and list (galley._session).
    spec: Mapping[str, Any]

    @property
    def listed(self) -> bool:
        """A DistributedSampler's split is served as it yields it: each loop
        sends the daemon list(sampler) for the epoch, served in its order."""
        return self.distributed_sampler is not None

    @property
    def request_seconds(self) -> float:
        return max(self.timeout, REQUEST_SECONDS)

    @property
    def runs_in_workers(self) -> bool:
        """Whether batches go through worker processes: a Python part to run
        and ``num_workers > 0``."""
        return self.stage is not None and self.stage.runs_in_workers and self.num_workers > 0

    @classmethod
    def build(cls, dataset: Any, **given: Any) -> "LoaderConfig":
        """The config of ``DataLoader(dataset, **given)``; raises for an
        argument galley cannot honour."""
        unknown = sorted(set(given) - set(ARGUMENT_DEFAULTS))
        if unknown:
            raise TypeError(f"DataLoader() got an unexpected keyword argument {unknown[0]!r}")
        return _build(cls, dataset, types.SimpleNamespace(**{**ARGUMENT_DEFAULTS, **given}))


def check_max_resolution(value: Any) -> Optional[int]:
    """max_resolution= as galleyd takes it: None (off) or an int in range."""
    if value is None:
        return None
    low, high = MAX_RESOLUTION_RANGE
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"max_resolution must be an int (the longest side in pixels an image "
                        f"is kept at, {low} to {high}) or None; got {value!r}")
    if not low <= int(value) <= high:
        raise ValueError(f"max_resolution must lie in [{low}, {high}] (the longest side in "
                         f"pixels an image is kept at), or be None for every image at its own "
                         f"size; got {int(value)}")
    return int(value)


def _build(cls: Any, dataset: Any, a: types.SimpleNamespace) -> LoaderConfig:
    """LoaderConfig.build: each step checks its arguments, in the order
    DataLoader has always checked them (the first argument wrong is the one
    named)."""
    max_resolution = _check_values(a)
    seed = a.seed
    if seed is None and a.generator is not None:
        seed = int(a.generator.initial_seed()) % (1 << 64)
    root, shards, folder = _dataset(dataset)
    transform = a.transform
    if transform is None and folder is not None:
        transform = folder.transform
    order = _order(a, seed)
    prefetch = _prefetch(a)
    seed = 0 if order.seed is None else int(order.seed)
    pin = _tensors.pinning_available(bool(a.pin_memory))
    batch_transform = batch_ops.resolve(a.batch_transform)
    split, layout, stage = _python_part(a, transform, folder, seed)
    spec, field_plan = _job_spec(a, root, shards, order, seed, prefetch, max_resolution,
                                 T.build_spec(split.prefix, a.normalize, layout))
    return cls(
        dataset=dataset, root=root, shards=shards, folder=folder,
        batch_size=int(a.batch_size), num_workers=int(a.num_workers), shuffle=order.shuffle,
        drop_last=bool(a.drop_last), seed=seed,
        epochs=None if a.epochs is None else int(a.epochs), rank=order.rank,
        world_size=order.world_size,
        shard_seed=seed if a.shard_seed is None else int(a.shard_seed),
        local_world_size=order.local_world_size, prefetch=prefetch,
        prefetch_factor=2 if a.prefetch_factor is None else int(a.prefetch_factor),
        on_error=a.on_error, pin_memory=bool(a.pin_memory), pin=pin,
        pin_memory_device=a.pin_memory_device, collate_fn=a.collate_fn,
        timeout=float(a.timeout), transform=transform, batch_transform=batch_transform,
        transform_split=split.describe(), stage=stage, fields=field_plan,
        given_sampler=a.sampler, distributed_sampler=order.distributed,
        multiprocessing_context=a.multiprocessing_context, worker_init_fn=a.worker_init_fn,
        persistent_workers=bool(a.persistent_workers), max_resolution=max_resolution,
        socket=a.socket, autostart=a.autostart, spec=types.MappingProxyType(spec))


def _check_values(a: types.SimpleNamespace) -> Optional[int]:
    """The arguments checked on their own; max_resolution as galleyd takes it."""
    if a.on_error not in ("skip", "raise"):
        raise ValueError('on_error must be "skip" or "raise"')
    if a.batch_size is None:
        raise ValueError("batch_size=None (torch's unbatched mode, one sample at a time) is "
                         "not supported: galleyd prepares whole batches. Use batch_size=1 "
                         "and take images[0], labels[0]")
    if int(a.batch_size) < 1:
        raise ValueError("batch_size must be at least 1")
    if not 0.0 <= float(a.ods_fraction) <= 1.0:
        raise ValueError("ods_fraction must lie in [0, 1]")
    max_resolution = check_max_resolution(a.max_resolution)
    if a.epochs is not None and int(a.epochs) < 1:
        raise ValueError("epochs must be None (endless) or at least 1")
    if a.batch_sampler is not None:
        raise ValueError("galley builds batches in the daemon and takes no batch_sampler; "
                         "give batch_size= and drop_last= instead")
    if float(a.timeout) < 0:
        raise ValueError("timeout option should be non-negative")
    if int(a.num_workers) < 0:
        raise ValueError("num_workers option should be non-negative")
    return max_resolution


def _dataset(dataset: Any) -> Tuple[str, Optional[List[str]],
                                    Optional[dataset_objects.FolderDataset]]:
    """The dataset's root (or shard set's name), its tar shards, and what
    galley takes of a torchvision dataset object."""
    # Tar shards (a list, glob, brace pattern or folder of *.tar) are
    # expanded here, as the user; see galley.shards.
    if isinstance(dataset, (str, os.PathLike, list, tuple)):
        shard_name, shards = _shards.resolve_dataset(dataset)
        if shards is not None:
            return shard_name, shards, None
        if _shards.is_object_url(shard_name):
            # A prefix (an ImageFolder) or a manifest object: galleyd lists it.
            return shard_name, None, None
    root, folder = _dataset_root(dataset)
    return root, None, folder


class _Order(NamedTuple):
    """What decides each epoch's items and their order."""
    shuffle: bool
    seed: Optional[int]
    indices: Optional[Iterable[int]]
    rank: int
    world_size: int
    shard_drop_last: bool
    distributed: Any  # a DistributedSampler, whose lists are served
    local_world_size: int
    policy: str


def _order(a: types.SimpleNamespace, seed: Optional[int]) -> _Order:
    """The order's arguments (shuffle, sampler, policy, subset, DDP split)
    checked against each other."""
    shuffle, indices, rank, world_size = a.shuffle, a.indices, a.rank, a.world_size
    shard_drop_last = bool(a.drop_last)
    distributed = None
    if a.sampler is not None:
        if shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        shuffle, seed, indices, rank, world_size, shard_drop_last, distributed = _from_sampler(
            a.sampler, seed, indices, rank, world_size)
    listed = distributed is not None
    policy, classes = a.policy, a.classes
    if listed and policy not in (None, ""):
        raise ValueError(f"a DistributedSampler's items are served in its order; policy= "
                         f"applies to galley's own order (shuffle=True with rank=/world_size= "
                         f"instead of a sampler), got policy={policy!r}")
    if listed and (classes or indices is not None):
        raise ValueError("a DistributedSampler decides the items; build it over the subset "
                         "you want instead of giving classes= or indices=")
    shuffle = bool(shuffle)
    policies = _galley.sampling_policies  # name -> decides a random order
    if policy not in (None, "") and policy not in policies:
        names = ", ".join(name for name, random in policies.items() if random)
        raise ValueError(f"unknown policy={policy!r}; galley's sampling policies are {names}")
    if not shuffle and policy not in (None, "") and policies[policy]:
        raise ValueError(f"policy={policy!r} decides a random order; it needs shuffle=True")
    rank, world_size = _rank_and_world(rank, world_size)
    if a.shard_seed is not None:
        if listed:
            raise ValueError("a DistributedSampler's seed is its split's seed; give "
                             "shard_seed= without a sampler (seed= or shuffle=True), or "
                             "leave shard_seed unset")
        if not 0 <= int(a.shard_seed) < (1 << 64):
            raise ValueError("shard_seed must lie in [0, 2**64)")
    local_world_size = _node_layout(a.local_world_size, rank, world_size)
    return _Order(shuffle, seed, indices, rank, world_size, shard_drop_last, distributed,
                  local_world_size, "" if not shuffle or listed else (policy or ""))


def _prefetch(a: types.SimpleNamespace) -> int:
    """Batches prepared ahead: prefetch=, or torch's prefetch_factor per worker."""
    prefetch = a.prefetch
    if a.prefetch_factor is not None:
        if prefetch is not None:
            raise ValueError("give prefetch= or prefetch_factor=, not both")
        if int(a.prefetch_factor) < 1:
            raise ValueError("prefetch_factor must be at least 1")
        prefetch = int(a.prefetch_factor) * max(1, int(a.num_workers))
    return 4 if prefetch is None else int(prefetch)


def _python_part(a: types.SimpleNamespace, transform: Any,
                 folder: Optional[dataset_objects.FolderDataset],
                 seed: int) -> Tuple[python_stage.Split, str, Optional[python_stage.SampleStage]]:
    """Where the transform runs: galleyd runs it up to its first op it does
    not know, the rest runs in the job (galley.python_stage). The split, the
    layout of galleyd's batches, and the stage that runs the job's part."""
    split = python_stage.split_transform(transform)
    layout = a.layout
    if split.tail:
        if a.normalize is not None:
            raise ValueError(f"normalize= normalises galleyd's output, but the transform "
                             f"goes on in the job ({split.describe()}); put Normalize "
                             f"in the transform where torchvision would run it")
        if layout != "NCHW":
            raise ValueError(f"layout= sets the layout of galleyd's batches; the transform "
                             f"goes on in the job ({split.describe()}), whose output is "
                             f"what the batch holds")
        # A PIL image is made from HWC pixels.
        layout = "NCHW" if split.tensor_input else "NHWC"
    target_transform = folder.target_transform if folder is not None else None
    # As torch runs collate_fn in its workers, so does galley, even when
    # galleyd runs the whole transform.
    collate_in_workers = a.collate_fn is not None and int(a.num_workers) > 0 and not split.tail
    stage = (python_stage.SampleStage(split, target_transform, seed,
                                      keep_images=collate_in_workers)
             if split.tail or target_transform is not None or collate_in_workers else None)
    _warn_meaningless(bool(split.tail or collate_in_workers), a)
    return split, layout, stage


def _job_spec(a: types.SimpleNamespace, root: str, shards: Optional[List[str]], order: _Order,
              seed: int, prefetch: int, max_resolution: Optional[int],
              transform_spec: Dict[str, Any]) -> Tuple[Dict[str, Any],
                                                        Optional[_fields.FieldPlan]]:
    """The OpenJob body every job of the loader starts from, and the plan of
    its fields= (galley/fields.py)."""
    spec: Dict[str, Any] = {
        "dataset": root,
        "batch_size": int(a.batch_size),
        "drop_last": bool(a.drop_last),
        "shard_drop_last": order.shard_drop_last if order.world_size > 1 else False,
        # A DistributedSampler's list is served in its own order.
        "shuffle": order.shuffle and order.distributed is None,
        "transform": transform_spec,
        # No op that sets the size (transform=None, ToTensor, Normalize):
        # images pass at their own size, which must be the same for all.
        "native_size": not transform_spec["ops"],
        "seed": seed,
        "epochs": 0,  # set per job: the epochs it has left to run
        "rank": order.rank,
        "world_size": order.world_size,
        "prefetch": prefetch,
        "on_error": a.on_error,
        "policy": order.policy,
        "ods_fraction": float(a.ods_fraction),
        "name": a.name or f"pid{os.getpid()}",
        "classes": list(a.classes) if a.classes else None,
        "ids": [int(i) for i in order.indices] if order.indices is not None else None,
    }
    # Sent only when set, so that a job that sets neither is the same
    # request to any galleyd of this protocol.
    if a.shard_seed is not None:
        spec["shard_seed"] = int(a.shard_seed)
    if order.local_world_size:
        spec["local_world_size"] = order.local_world_size
    if max_resolution is not None:
        spec["max_resolution"] = max_resolution
    field_plan, field_spec = _fields.plan(
        a.fields, shards=shards is not None, manifest=None if shards is not None else root,
        image_key=a.image_key, label_key=a.label_key, decode=a.decode_fields,
        unpickle=a.unpickle_fields, batch_transform=a.batch_transform)
    for limit, value in (("max_member_bytes", a.max_member_bytes),
                         ("field_batch_bytes", a.field_batch_bytes)):
        if value is not None:
            field_spec[limit] = int(value)
    if shards is not None:
        spec.update(shards=shards, image_key=a.image_key or "", label_key=a.label_key or "")
        if _shards.is_object_url(shards[0]):
            # Shards in object storage: the job's own access, resolved as the
            # AWS CLI resolves it (and again at each job open, _session.py,
            # so refreshed temporary credentials reach galleyd).
            spec["s3"] = _s3_access.resolve(what=shards[0])
    elif _shards.is_object_url(root) or _shards.names_objects(root):
        # Images kept one per object: a prefix, a manifest object, or a local
        # manifest naming objects.
        spec["s3"] = _s3_access.resolve(what=root)
    if field_spec:
        spec.update(field_spec)
    elif shards is None and (a.image_key is not None or a.label_key != "cls"):
        raise ValueError("image_key= and label_key= apply to tar shard datasets only")
    return spec, field_plan


def _rank_and_world(rank: Any, world_size: Any) -> Tuple[int, int]:
    """rank= and world_size=, defaulting to an initialised torch.distributed's."""
    dist_rank, dist_world = _torch_distributed()
    if world_size is None:
        world_size = dist_world if dist_world is not None else 1
    if rank is None:
        if dist_rank is not None and world_size == dist_world:
            rank = dist_rank
        elif int(world_size) == 1:
            rank = 0
        else:
            raise ValueError("world_size > 1 needs rank= (or an initialised "
                             "torch.distributed, or sampler=DistributedSampler(...))")
    if not 0 <= int(rank) < int(world_size):
        raise ValueError(f"rank must lie in [0, world_size), got rank={rank} "
                         f"world_size={world_size}")
    return int(rank), int(world_size)


def _torch_distributed() -> Tuple[Optional[int], Optional[int]]:
    """(rank, world_size) of an initialised torch.distributed, else (None, None)."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None, None
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None, None


def _node_layout(local_world_size: Optional[int], rank: int, world_size: int) -> int:
    """Ranks per node for the DDP split: ``local_world_size=``, else torchrun's
    ``LOCAL_WORLD_SIZE`` when this loader is the launched rank; 0 = not known.

    galley takes ranks as torchrun numbers them, node by node (node rank =
    rank // local_world_size), and refuses a layout the launcher contradicts.
    """
    if local_world_size is not None:
        try:
            given = operator.index(local_world_size)
        except TypeError:
            given = None
        if given is None or isinstance(local_world_size, bool) or given < 1:
            raise ValueError(f"local_world_size must be a positive int (ranks per node), got "
                             f"{local_world_size!r}")
    if world_size == 1:  # nothing to split: every layout is the same
        return 0
    env = os.environ
    launched = (env.get("RANK") == str(rank) and env.get("WORLD_SIZE") == str(world_size))
    from_env = local_world_size is None
    if from_env:
        if not launched or "LOCAL_WORLD_SIZE" not in env:
            return 0
        local_world_size = int(env["LOCAL_WORLD_SIZE"])
    local = int(local_world_size)
    if local < 1 or world_size % local:
        if from_env:  # nodes with different numbers of ranks: no node-major slots
            warn_once("local_world_size", f"galley.DataLoader: LOCAL_WORLD_SIZE={local} does "
                      f"not divide the world size {world_size}; the DDP split does not know "
                      f"the node layout (node-affine shards need as many ranks on every node)")
            return 0
        raise ValueError(f"local_world_size={local} must divide world_size={world_size}: "
                         f"galley's DDP split takes the same number of ranks on every node")
    node = env.get("GROUP_RANK", env.get("NODE_RANK")) if launched else None
    if node is not None and int(node) != rank // local:
        raise ValueError(f"rank {rank} runs on node {node} (GROUP_RANK/NODE_RANK), not on node "
                         f"{rank // local} = rank // local_world_size; galley takes ranks "
                         f"numbered node by node, as torchrun numbers them (give the launcher's "
                         f"ranks per node, or leave local_world_size unset)")
    return local


def _refuse_image_file(path: str) -> None:
    """A single image is not a dataset: say what galley reads instead."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return  # a folder, or unreadable: galleyd's own checks report it
    if head.startswith(_IMAGE_MAGIC) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP"):
        raise ValueError(
            f"{path} is an image file, not a dataset. galley reads a folder of class folders "
            f"(torchvision's ImageFolder layout), a manifest file (one 'relative/path<TAB>label' "
            f"per line) or tar shards (docs/datasets.md); put the image in a folder of its "
            f"class and pass the folder's parent")


def _dataset_root(dataset: Any) -> Tuple[str, Optional[dataset_objects.FolderDataset]]:
    """The dataset's root as an absolute path, and what galley takes of a
    torchvision dataset object (galley.dataset_objects)."""
    if isinstance(dataset, (str, bytes, os.PathLike)):
        path = os.path.abspath(os.fsdecode(os.fspath(dataset)))
        if os.path.isfile(path):
            _refuse_image_file(path)
        return path, None
    folder = dataset_objects.from_object(dataset)
    return folder.root, folder


def _from_sampler(sampler: Any, seed: Any, indices: Any, rank: Any,
                  world_size: Any) -> Tuple[Any, ...]:
    """shuffle, seed, indices, rank, world_size, shard_drop_last from a torch
    sampler, and the sampler itself when it is a DistributedSampler."""
    from torch.utils.data import (DistributedSampler, RandomSampler, SequentialSampler,
                                  SubsetRandomSampler)
    if isinstance(sampler, DistributedSampler):
        for given, taken, what in ((rank, sampler.rank, "rank"),
                                   (world_size, sampler.num_replicas, "world_size")):
            if given is not None and int(given) != int(taken):
                raise ValueError(f"{what}={given} disagrees with the DistributedSampler's "
                                 f"{taken}; give one or the other")
        if seed is not None and int(seed) != int(sampler.seed):
            raise ValueError(f"seed={seed} disagrees with the DistributedSampler's seed "
                             f"{sampler.seed}; give one or the other")
        return (bool(sampler.shuffle), int(sampler.seed), indices, int(sampler.rank),
                int(sampler.num_replicas), bool(sampler.drop_last), sampler)
    if isinstance(sampler, SequentialSampler):
        return False, seed, indices, rank, world_size, False, None
    if isinstance(sampler, SubsetRandomSampler):
        if indices is not None:
            raise ValueError("give indices= or a SubsetRandomSampler, not both")
        return True, seed, list(sampler.indices), rank, world_size, False, None
    if isinstance(sampler, RandomSampler):
        if sampler.replacement or sampler._num_samples is not None:
            raise ValueError("galley serves each item exactly once per epoch; a "
                             "RandomSampler with replacement or num_samples is not supported")
        if seed is None and sampler.generator is not None:
            seed = int(sampler.generator.initial_seed()) % (1 << 64)
        return True, seed, indices, rank, world_size, False, None
    raise ValueError(f"galley decides the order in the daemon and cannot run a "
                     f"{type(sampler).__name__}; use shuffle=, indices= or a "
                     f"DistributedSampler")


def _warn_meaningless(python_part: bool, a: types.SimpleNamespace) -> None:
    """Worker processes run only a transform's Python part or a
    collate_fn: without either their arguments mean nothing, and say so
    once."""
    if not python_part:
        why = ("the whole transform runs in galleyd and there is no collate_fn, so there "
               "are no worker processes (galleyd's threads prepare the batches)")
        if int(a.num_workers):
            warn_once("num_workers", f"galley.DataLoader: num_workers has no effect: {why}")
        if a.worker_init_fn is not None:
            warn_once("worker_init_fn", f"galley.DataLoader: worker_init_fn is never "
                      f"called: {why}")
        if a.multiprocessing_context is not None:
            warn_once("multiprocessing_context", f"galley.DataLoader: "
                      f"multiprocessing_context has no effect: {why}")
        if a.persistent_workers:
            warn_once("persistent_workers", f"galley.DataLoader: persistent_workers has "
                      f"no effect: {why}")
    if not a.in_order:
        warn_once("in_order", "galley.DataLoader: in_order=False has no effect; batches "
                  "always come in order")
