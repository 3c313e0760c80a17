"""galley.DataLoader: a drop-in for torch.utils.data.DataLoader backed by galleyd.

The arguments torch's DataLoader takes keep their names, positions and
defaults; those that mean nothing when the node's daemon prepares the batches
are accepted with a one-time warning, and those galley cannot honour are
refused at construction with a message saying what to do instead.
docs/python.md is the migration guide.
"""

from __future__ import annotations

import array
import copy
import hashlib
import numbers
import operator
import os
import time
import warnings
import weakref
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional,
                    Sequence, Tuple)

from . import _autostart
from . import _galley
from . import _tensors
from . import batch_ops
from . import dataset_objects
from . import datasets as _datasets
from . import fields as _fields
from . import python_stage
from . import s3_access as _s3_access
from . import samplers as _samplers
from . import shards as _shards
from . import transforms as T
from . import worker_pool

if TYPE_CHECKING:  # torch is imported lazily: importing galley must not need it
    import torch

__all__ = ["DataLoader"]

# Version 2 names the dataset by its content (a copy under another path
# resumes) and resumes a DistributedSampler's epoch by position; states of
# version 1, which named it by path, still load.
_STATE_VERSION = 2
# The most bytes an OpenJob or SeekEpoch body may take (docs/protocol.md
# §1.1), less room for the rest of the body: an epoch's list must fit in it.
_LIST_BYTES = (16 << 20) - (64 << 10)
# The daemon's message for an image whose size differs from the first one's
# when there is no transform (JobSpec::native_size).
_NATIVE_SIZE_MISMATCH = "transform=None needs every image at the first image's size"
_WARNED: set = set()
# How long a request to galleyd (opening a job, which lists its dataset; a
# page of the listing; stats) may take at least. timeout= bounds batches, as
# torch's does, and only lengthens this.
_REQUEST_SECONDS = 30.0


# JobSpec::max_resolution's bounds (galley/job_spec.h), checked here too so
# the error comes before any daemon is reached.
_MAX_RESOLUTION_RANGE = (16, 65535)


def _check_max_resolution(value: Any) -> Optional[int]:
    """max_resolution= as galleyd takes it: None (off) or an int in range."""
    if value is None:
        return None
    low, high = _MAX_RESOLUTION_RANGE
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"max_resolution must be an int (the longest side in pixels an image "
                        f"is kept at, {low} to {high}) or None; got {value!r}")
    if not low <= int(value) <= high:
        raise ValueError(f"max_resolution must lie in [{low}, {high}] (the longest side in "
                         f"pixels an image is kept at), or be None for every image at its own "
                         f"size; got {int(value)}")
    return int(value)


def _raise_native_size_mismatch(error: str) -> None:
    """transform=None met images of several sizes: a mistake in the job's
    arguments, not a bad file, so a ValueError with what to do."""
    detail = error.split("; give a transform")[0].removesuffix("...")
    raise ValueError(f"{detail}; give a transform that resizes (e.g. Resize + CenterCrop)")


def _warn_once(key: str, message: str) -> None:
    """One warning per argument and process, however many loaders are made."""
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, UserWarning, stacklevel=3)


def _list_digest(items: List[int]) -> str:
    """A short name for an epoch's list of item ids, order included."""
    return hashlib.blake2b(array.array("Q", items).tobytes(), digest_size=16).hexdigest()


def _check_same_list(state: Dict[str, Any], items: List[int], epoch: int) -> None:
    """A state taken inside a listed epoch resumes it by position: the
    sampler must yield the list it yielded then."""
    if state.get("epoch_list") is not None and state["epoch_list"] != _list_digest(items):
        raise ValueError(f"the DistributedSampler yields another list for epoch {epoch} than "
                         f"the one the state was saved in (its seed, num_replicas, rank, "
                         f"shuffle, drop_last or dataset length differ); build it as it was")


def _dataset_difference(saved: Dict[str, Any], now: Dict[str, Any]) -> str:
    """What tells two datasets' listings apart, in words, first things first."""
    if saved["items"] != now["items"]:
        return f"it has {now['items']} items, the state's had {saved['items']}"
    if saved["classes"] != now["classes"]:
        added = [c for c in now["classes"] if c not in saved["classes"]]
        gone = [c for c in saved["classes"] if c not in now["classes"]]
        if added or gone:
            return (f"its classes differ (new: {', '.join(added[:5]) or 'none'}; gone: "
                    f"{', '.join(gone[:5]) or 'none'})")
        return "its classes are in another order"
    if saved["bytes"] != now["bytes"]:
        return (f"its files hold {now['bytes']} bytes, the state's held {saved['bytes']} "
                f"(files rewritten or replaced)")
    return ("the same number of items, classes and bytes, but the files' relative paths, sizes "
            "or labels differ (files renamed, swapped or relabelled)")


def _check_same_dataset(state: Dict[str, Any], now: Dict[str, Any], warn: bool) -> None:
    """Refuses a state saved over another dataset, saying what differs. A
    copy of the dataset under another path is the same dataset; with `warn`,
    a warning says when only its modification times differ. A state of
    version 1 names the dataset by path (as does any state when a galleyd of
    an earlier release sent no content key): another path is taken when the
    item count agrees, with a warning that the content could not be
    compared."""
    saved = state["dataset"]
    # A daemon that sends no resume key leaves the path and count to compare.
    unkeyed = not isinstance(saved, dict) or not saved["content_key"] or not now["content_key"]
    if unkeyed:
        saved = saved["path"] if isinstance(saved, dict) else saved
        if state["dataset_size"] != now["items"]:
            raise ValueError(f"the dataset has {now['items']} items but had "
                             f"{state['dataset_size']} when the state was saved; it cannot be "
                             f"resumed exactly")
        if warn and saved != now["path"]:
            why = (f"this state (version 1) names its dataset by its path, {saved}"
                   if not isinstance(state["dataset"], dict) else
                   f"a galleyd of an earlier release listed {saved} or {now['path']}, without "
                   f"a content key")
            warnings.warn(f"galley.DataLoader: {why}; it resumes over {now['path']}, which has "
                          f"as many items, but their content could not be compared",
                          UserWarning, stacklevel=3)
        return
    if saved["content_key"] != now["content_key"] or saved["items"] != now["items"]:
        raise ValueError(f"the state was saved over another dataset ({saved['path']}; this "
                         f"loader reads {now['path']}): {_dataset_difference(saved, now)}; "
                         f"build the loader over the dataset the state was saved with")
    if warn and saved["mtimes_key"] != now["mtimes_key"]:
        warnings.warn(f"galley.DataLoader: {now['path']} holds the dataset the state was saved "
                      f"over ({saved['path']}: the same relative paths, sizes and labels), but "
                      f"the files' modification times differ (a copy that did not keep them, "
                      f"or files touched since); resuming", UserWarning, stacklevel=3)


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
            _warn_once("local_world_size", f"galley.DataLoader: LOCAL_WORLD_SIZE={local} does "
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


# The first bytes of the image formats galleyd decodes (a dataset given as
# one of them is a mistake worth naming).
_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"BM")


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


def _listing_pages(spec: Dict[str, Any], socket: Optional[str], autostart: Optional[bool],
                   timeout: float) -> Callable[[int, Optional[int]], Dict[str, Any]]:
    """Reads a page of the listing of the dataset `spec` names from galleyd
    (the "listing" request), found as the loader finds its daemon."""
    named = {key: spec[key]
             for key in ("dataset", "shards", "image_key", "label_key", "fields", "s3")
             if spec.get(key) is not None}

    def fetch(begin: int, count: Optional[int]) -> Dict[str, Any]:
        client = _autostart.client(socket, autostart, timeout)
        with _shards.IndexingProgress(lambda: _autostart.client(socket, False, 5.0),
                                      named.get("shards") or named["dataset"]):
            return client.listing(named, begin, count)

    return fetch


class DataLoader:
    """Iterates ``(images, labels)`` batches prepared by the node's galleyd.

    ``images`` is a zero-copy view of the daemon's shared memory:
    ``torch.uint8`` ``[B, 3, H, W]`` (``layout="NHWC"``: ``[B, H, W, 3]``), or
    ``torch.float32`` ``[B, 3, H, W]`` when the transform ends in ``ToTensor``
    or ``Normalize`` or ``normalize=(mean, std)`` is given. ``labels`` is
    ``torch.int64`` ``[B]``. The batch's memory goes back to the daemon when
    the images tensor is freed: the ring has ``prefetch + 1`` slots, so keep at
    most ``prefetch`` batches alive besides the one in hand (``.clone()`` the
    ones you keep); holding all of them raises at once.

    Order and epochs, as torch's ``DataLoader`` + ``DistributedSampler``:

    * ``shuffle=False`` (torch's default): items in id order (ImageFolder
      order), every epoch. ``shuffle=True``: a uniformly random order per
      epoch, a pure function of ``(seed, epoch)`` while no other job on the
      node shares the items (docs/python.md says what coupled jobs share).
    * Jobs running at once share an order, whatever their seeds: under the
      default policy (``dsa``), concurrent jobs over the same items on one
      node receive one order, so that each item is read and decoded once for
      all of them. A seed sweep launched at once therefore gets the same
      data order in every trial (``seed`` still varies the augmentations);
      the job that joins others with a different seed warns once.
      ``policy="independent"`` keeps each job on its own seed's order beside
      the others, sharing work only through the cache tiers; docs/sampling.md
      (section 1.2) measures what that costs in loads and decodes.
    * Each ``for`` loop over the loader is one pass over epoch ``e`` and the
      next loop uses ``e + 1``; ``set_epoch(e)`` (or a ``DistributedSampler``'s
      ``set_epoch``) chooses it. A loop left early (``break``, a peek with
      ``next(iter(loader))``) is not a completed epoch: ``epochs=N`` stops
      after N loops that ran to their end, and galleyd prepares nothing past
      the last one.
    * Every ``iter(loader)`` is a pass of its own, as in torch. One started
      while another runs (a peek inside the loop, ``zip(loader, loader)``)
      is a side pass: its own job in galleyd over the epoch the next loop
      will take (a ``DistributedSampler``'s epoch, with one), which does not
      move the loader's epoch, count in ``completed_epochs`` or enter
      ``state_dict()``. An iterator left early (``break``, garbage
      collected) closes its job, so galleyd stops preparing for it at once.
    * With ``world_size > 1`` every rank gets exactly ``len(loader)``
      batches: the shard is padded by wrapping around (or, with
      ``drop_last=True``, cut to the floor) as ``DistributedSampler`` does.
    * With ``sampler=DistributedSampler(...)`` each loop serves
      ``list(sampler)`` exactly, in its order, as torch does: torch's split,
      padding repeats included, for the epoch ``set_epoch`` chose
      (docs/python.md §3 says what that costs in sharing and prefetch).
    * A file that cannot be read or decoded never shortens a batch: the
      daemon puts a substitute in its place (another item of the rank's shard
      of that epoch, which then appears twice), counts it in ``skipped``,
      lists the file in ``skipped_files`` and warns once per pass over the
      epoch (``UserWarning``, the count and the first file); with
      ``on_error="raise"`` the loop raises ``galley.SampleError`` instead.
    * An epoch is never delivered short or empty. When the dataset changes
      under a running loop (a listed file is deleted, a shard truncated,
      rewritten or deleted) or a failed sample has no substitute, the loop
      raises ``galley.SampleError`` naming how many samples of which batch
      could not be served and the first file, whatever ``on_error`` says;
      the next loop lists the dataset afresh.
    * ``state_dict()`` / ``load_state_dict()`` resume mid-epoch: a loader
      restored from a state taken after k batches of epoch e yields exactly
      the items of e it had not yielded, then epoch e + 1. The state is the
      loop's, whatever side passes run beside it. It names the dataset by
      its content (relative paths, sizes, labels), so a copy under another
      path or on another node resumes (a warning says when only the files'
      modification times differ); another dataset is refused, saying what
      differs.
    * After the last epoch, ``len()``, ``classes``, ``info`` and ``stats()``
      answer from the last job (``stats()`` with its final counters)
      without opening another.

    Attributes, as torch's DataLoader has them: ``dataset`` (the object
    given, or for a path a ``galley.datasets.ListedDataset`` with
    ImageFolder's ``len()``, ``classes``, ``class_to_idx``, ``samples``,
    ``imgs`` and ``targets``, read from galleyd's listing), ``sampler`` (the
    one given, else a ``galley.samplers.EpochSampler``: this rank's items,
    ``set_epoch``), ``batch_sampler`` (``BatchSampler(sampler, batch_size,
    drop_last)``), ``num_workers``, ``batch_size``, ``drop_last``,
    ``pin_memory``, ``timeout``, ``collate_fn``.

    Args (torch's, in torch's order):
        dataset: an ImageFolder root or manifest file path (made absolute
            here), tar shards, or a ``torchvision.datasets.ImageFolder`` /
            ``DatasetFolder``: its root, the files it lists (exactly, after
            its ``extensions=`` / ``is_valid_file=``), its ``transform``
            when ``transform=`` is not given and its ``target_transform``,
            run in the job (galley.dataset_objects says what is refused).
        batch_size: samples per batch.
        shuffle: random order per epoch (True) or id order (False, default).
        sampler: ``DistributedSampler`` or a subclass (each loop serves
            ``list(sampler)``, in its order, for the epoch its ``set_epoch``
            chose; then ``policy=``, ``classes=`` and ``indices=`` are
            refused), ``SequentialSampler``, ``RandomSampler`` (without
            replacement) or ``SubsetRandomSampler`` (its indices; galley's
            order); other samplers are refused.
        batch_sampler: refused (use ``batch_size``/``drop_last``).
        num_workers: processes that run the transform's Python part (the
            ops after the first one galleyd does not know) and
            ``collate_fn``, as torch's workers: 0 runs them in the main
            process. Without a Python part or a ``collate_fn`` there are
            none (a one-time warning if not 0).
        collate_fn: as torch's: called on each batch's list of ``(image,
            target)`` samples, in the workers when ``num_workers > 0``
            (each image its own copy of galleyd's), its result yielded.
            Default: the stacked batch galleyd made (a zero-copy view) when
            galleyd runs the whole transform, else ``default_collate``.
        pin_memory: as torch: where CUDA is available each batch is copied
            into page-locked memory (and its shared-memory slot released at
            once); where it is not, a warning says so.
        drop_last: leave out each epoch's incomplete last batch; with DDP
            (and no ``sampler=``) also cut the shards to the floor.
        timeout: as torch's: seconds one batch may take, from galleyd and
            from the workers; 0 (default) waits as long as it takes (a dead
            daemon is noticed within seconds). A late batch raises
            ``galley.Timeout`` (a RuntimeError), "DataLoader timed out
            after N seconds: ...", naming galleyd, or the worker and the
            item it was on, once every worker is killed. The Python part
            run in the main process (``num_workers=0``) is not bounded.
        worker_init_fn, multiprocessing_context: as torch's, for the
            workers of a Python part (torch's default context unless one is
            named); a one-time warning when there is none.
        persistent_workers: keeps the workers across epochs; a one-time
            warning when there are none.
        in_order: batches always come in order; a one-time warning for False.
        generator: its ``initial_seed()`` is the order's seed unless ``seed=``
            is given.
        prefetch_factor: batches prepared ahead per worker; sets
            ``prefetch = prefetch_factor * max(1, num_workers)``.

    Args (galley's, keyword only):
        transform: a ``galley.transforms`` pipeline (or a torchvision one, see
            docs/transforms.md) run by the daemon, up to its first op the
            daemon does not know (a ``Lambda``, the user's own callable);
            the rest runs in the job (``num_workers``), on the type
            torchvision would pass it, each sample's ``random``, NumPy and
            torch (CPU) generators seeded from (seed, epoch, item id);
            ``loader.transform_split`` says where each op runs. None (or
            only ToTensor/Normalize): the images at their own size, as
            torch; all must share the first image's size, and the first
            batch holding another size raises ValueError naming the file.
        normalize: ``(mean, std)``: float32 normalised output.
        seed: order, DDP split and augmentation randomness (default 0); the
            order only while no concurrent job with another seed shares it,
            unless ``policy="independent"`` (above).
        epochs: completed epochs after which iteration stops (None: endless).
        rank, world_size: the DDP shard; default ``torch.distributed``'s rank
            and world size when it is initialised, else 0 and 1.
        shard_seed: the DDP split's seed when it should not be ``seed``:
            concurrent DDP jobs on the same nodes that give the same
            ``shard_seed`` load the same items on each node, so each node's
            galleyd reads and decodes them once for all (node-affine shards,
            docs/python.md); their own ``seed`` still decides augmentations.
            Default: ``seed`` (a ``DistributedSampler``'s seed).
        local_world_size: ranks per node of the DDP job, ranks numbered node
            by node as torchrun does; default torchrun's ``LOCAL_WORLD_SIZE``
            when this is the launched rank. Lets jobs with different numbers of
            ranks per node share each node's items.
        prefetch: batches prepared ahead of the one in hand (default 4); the
            ring in shared memory has ``prefetch + 1`` slots.
        on_error: ``"skip"`` (substitute and count) or ``"raise"``; a
            dataset that changed under the loop raises either way.
        policy: sampling policy, one of ``galley.sampling_policies``
            (``dsa``, the daemon's default unless its admin chose another:
            concurrent jobs share one order; ``dsa-chain``; ``independent``:
            each job its own seed's order; ``lockstep``; ``ods``;
            docs/sampling.md); only with ``shuffle=True``.
        classes, indices: a subset of the dataset (class names, item ids).
        layout: ``"NCHW"`` or ``"NHWC"`` for uint8 output.
        socket: the galleyd to use (default ``$GALLEY_SOCKET``, then the
            user's own daemon, then the node's service). When none answers
            and none was named, a private galleyd is started for the user and
            reused by later jobs.
        autostart: False (or ``GALLEY_AUTOSTART=0``) raises
            ``ServerUnavailable`` instead of starting a daemon, listing the
            sockets tried.
        name: shown by ``galleyctl jobs``.
        ods_fraction: with ``policy="ods"``, the most of each epoch's draws
            the daemon may replace by cached items (0 to 1).
        batch_transform: ``galley.batch_ops.MixUp`` / ``CutMix`` /
            ``RandomChoice`` (or torchvision v2's), or any function
            ``f(images, labels, rng=)`` of the stacked batch, applied to
            each collated batch in this process, on its ``device``; labels
            become float soft targets ``[B, num_classes]``
            (galley/batch_ops.py says why here).
        fields: what each batch carries, in order, instead of ``(images,
            labels)``: shard member extensions (``"jpg"``, ``"txt"``,
            ``"json"``...), ``"__key__"``, ``"__url__"``, or a header-row
            manifest's column names; the image member takes its place
            (docs/datasets.md, "Every member of a sample"; galley/fields.py).
            With ``collate_fn``, it receives a list of per-sample tuples in
            that order, as torch's would.
        decode_fields: False passes every field value as ``bytes``.
        unpickle_fields: True unpickles ``.pyd``/``.pickle``/``.pth``
            members; never done otherwise.
        max_member_bytes, field_batch_bytes: the largest field value of a
            sample (default 1 MiB) and the field bytes of a batch (default
            max(batch_size * 64 KiB, max_member_bytes)).
        max_resolution: keep the dataset's images at most this many pixels
            on their longer side (16 to 65535; FFCV's name): galleyd shrinks
            a larger image once, on first read, with PIL's ``BOX`` filter,
            and its decoded cache keeps the shrunk pixels, so the transform
            sees the shrunk image and the cache holds more items. Images
            within it pass unchanged. Jobs with different values do not share
            items or cache entries. Default None: every image at its own size
            (torchvision's exact path). docs/datasets.md, "Training
            resolution".
    """

    def __init__(self, dataset: Any, batch_size: int = 1, shuffle: Optional[bool] = None,
                 sampler: Any = None, batch_sampler: Any = None, num_workers: int = 0,
                 collate_fn: Optional[Callable[[List[Any]], Any]] = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Optional[Callable[[int], None]] = None,
                 multiprocessing_context: Any = None, generator: Optional[torch.Generator] = None,
                 *, prefetch_factor: Optional[int] = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True,
                 transform: Any = None, normalize: Optional[Sequence[Sequence[float]]] = None,
                 seed: Optional[int] = None, epochs: Optional[int] = None,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 shard_seed: Optional[int] = None, local_world_size: Optional[int] = None,
                 prefetch: Optional[int] = None, on_error: str = "skip",
                 policy: Optional[str] = None, classes: Optional[Iterable[str]] = None,
                 indices: Optional[Iterable[int]] = None, layout: str = "NCHW",
                 socket: Optional[str] = None, name: Optional[str] = None,
                 ods_fraction: float = 0.1, autostart: Optional[bool] = None,
                 batch_transform: Any = None,
                 image_key: Optional[str] = None, label_key: Optional[str] = "cls",
                 fields: Optional[Sequence[str]] = None, decode_fields: bool = True,
                 unpickle_fields: bool = False, max_member_bytes: Optional[int] = None,
                 field_batch_bytes: Optional[int] = None,
                 max_resolution: Optional[int] = None) -> None:
        if on_error not in ("skip", "raise"):
            raise ValueError('on_error must be "skip" or "raise"')
        if batch_size is None:
            raise ValueError("batch_size=None (torch's unbatched mode, one sample at a time) is "
                             "not supported: galleyd prepares whole batches. Use batch_size=1 "
                             "and take images[0], labels[0]")
        if int(batch_size) < 1:
            raise ValueError("batch_size must be at least 1")
        if not 0.0 <= float(ods_fraction) <= 1.0:
            raise ValueError("ods_fraction must lie in [0, 1]")
        max_resolution = _check_max_resolution(max_resolution)
        if epochs is not None and int(epochs) < 1:
            raise ValueError("epochs must be None (endless) or at least 1")
        if batch_sampler is not None:
            raise ValueError("galley builds batches in the daemon and takes no batch_sampler; "
                             "give batch_size= and drop_last= instead")
        if float(timeout) < 0:
            raise ValueError("timeout option should be non-negative")
        if int(num_workers) < 0:
            raise ValueError("num_workers option should be non-negative")
        if seed is None and generator is not None:
            seed = int(generator.initial_seed()) % (1 << 64)

        # Tar shards (a list, glob, brace pattern or folder of *.tar) are
        # expanded here, as the user; see galley.shards.
        shards = None
        if isinstance(dataset, (str, os.PathLike, list, tuple)):
            shard_name, shards = _shards.resolve_dataset(dataset)
        folder = None  # a torchvision dataset object's files, labels and transforms
        if shards is not None:
            root = shard_name
        else:
            root, folder = _dataset_root(dataset)
        if transform is None and folder is not None:
            transform = folder.transform

        shard_drop_last = bool(drop_last)
        self._sampler = None  # a DistributedSampler: its list and set_epoch rule each loop
        self._given_sampler = sampler
        if sampler is not None:
            if shuffle:
                raise ValueError("sampler option is mutually exclusive with shuffle")
            shuffle, seed, indices, rank, world_size, shard_drop_last = self._from_sampler(
                sampler, seed, indices, rank, world_size)
        # A DistributedSampler's split is served as it yields it: each loop
        # sends the daemon list(sampler) for the epoch, served in its order.
        self._listed = self._sampler is not None
        if self._listed and policy not in (None, ""):
            raise ValueError(f"a DistributedSampler's items are served in its order; policy= "
                             f"applies to galley's own order (shuffle=True with rank=/world_size= "
                             f"instead of a sampler), got policy={policy!r}")
        if self._listed and (classes or indices is not None):
            raise ValueError("a DistributedSampler decides the items; build it over the subset "
                             "you want instead of giving classes= or indices=")
        shuffle = bool(shuffle)
        policies = _galley.sampling_policies  # name -> decides a random order
        if policy not in (None, "") and policy not in policies:
            names = ", ".join(name for name, random in policies.items() if random)
            raise ValueError(f"unknown policy={policy!r}; galley's sampling policies are {names}")
        if not shuffle and policy not in (None, "") and policies[policy]:
            raise ValueError(f"policy={policy!r} decides a random order; it needs shuffle=True")

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
        if shard_seed is not None:
            if self._sampler is not None:  # a DistributedSampler
                raise ValueError("a DistributedSampler's seed is its split's seed; give "
                                 "shard_seed= without a sampler (seed= or shuffle=True), or "
                                 "leave shard_seed unset")
            if not 0 <= int(shard_seed) < (1 << 64):
                raise ValueError("shard_seed must lie in [0, 2**64)")
        local_world_size = _node_layout(local_world_size, int(rank), int(world_size))

        if prefetch_factor is not None:
            if prefetch is not None:
                raise ValueError("give prefetch= or prefetch_factor=, not both")
            if int(prefetch_factor) < 1:
                raise ValueError("prefetch_factor must be at least 1")
            prefetch = int(prefetch_factor) * max(1, int(num_workers))
        prefetch = 4 if prefetch is None else int(prefetch)

        self._root = root  # the dataset's path (or shard set's name) as galleyd is asked for it
        self.batch_size = int(batch_size)
        self.num_workers = int(num_workers)
        self.shuffle = shuffle
        self.drop_last = bool(drop_last)
        self.seed = 0 if seed is None else int(seed)
        self.epochs = None if epochs is None else int(epochs)
        self.rank, self.world_size = int(rank), int(world_size)
        self.prefetch = prefetch
        self.on_error = on_error
        self.pin_memory = bool(pin_memory)
        self._pin = _tensors.pinning_available(self.pin_memory)
        self.pin_memory_device = pin_memory_device
        self.collate_fn = collate_fn
        self.timeout = float(timeout)
        self.transform = transform
        self.batch_transform = batch_ops.resolve(batch_transform)
        # galleyd runs the transform up to its first op it does not know;
        # the rest runs here (galley.python_stage).
        split = python_stage.split_transform(transform)
        self.transform_split = split.describe()
        if split.tail:
            if normalize is not None:
                raise ValueError(f"normalize= normalises galleyd's output, but the transform "
                                 f"goes on in the job ({self.transform_split}); put Normalize "
                                 f"in the transform where torchvision would run it")
            if layout != "NCHW":
                raise ValueError(f"layout= sets the layout of galleyd's batches; the transform "
                                 f"goes on in the job ({self.transform_split}), whose output is "
                                 f"what the batch holds")
            # A PIL image is made from HWC pixels.
            layout = "NCHW" if split.tensor_input else "NHWC"
        target_transform = folder.target_transform if folder is not None else None
        # As torch runs collate_fn in its workers, so does galley, even when
        # galleyd runs the whole transform.
        collate_in_workers = collate_fn is not None and self.num_workers > 0 and not split.tail
        self._stage = (python_stage.SampleStage(split, target_transform, self.seed,
                                                keep_images=collate_in_workers)
                       if split.tail or target_transform is not None or collate_in_workers
                       else None)
        self._folder = folder
        self._subset_resolved = folder is None
        self._pool: Optional[worker_pool.WorkerPool] = None  # persistent workers, once started
        # A dataset object's galleyd item ids by dataset position, when a
        # DistributedSampler's positions are mapped to them.
        self._subset: Optional[List[int]] = None
        self.multiprocessing_context = multiprocessing_context
        self.worker_init_fn = worker_init_fn
        self.persistent_workers = bool(persistent_workers)
        self.prefetch_factor = 2 if prefetch_factor is None else int(prefetch_factor)
        self._warn_meaningless(split.tail or collate_in_workers, worker_init_fn,
                               multiprocessing_context, persistent_workers, in_order)
        transform_spec = T.build_spec(split.prefix, normalize, layout)
        self._spec: Dict[str, Any] = {
            "dataset": self._root,
            "batch_size": self.batch_size,
            "drop_last": self.drop_last,
            "shard_drop_last": shard_drop_last if self.world_size > 1 else False,
            # A DistributedSampler's list is served in its own order.
            "shuffle": self.shuffle and not self._listed,
            "transform": transform_spec,
            # No op that sets the size (transform=None, ToTensor, Normalize):
            # images pass at their own size, which must be the same for all.
            "native_size": not transform_spec["ops"],
            "seed": self.seed,
            "epochs": 0,  # set per job: the epochs it has left to run (_open_job)
            "rank": self.rank,
            "world_size": self.world_size,
            "prefetch": self.prefetch,
            "on_error": on_error,
            "policy": "" if not shuffle or self._listed else (policy or ""),
            "ods_fraction": float(ods_fraction),
            "name": name or f"pid{os.getpid()}",
            "classes": list(classes) if classes else None,
            "ids": [int(i) for i in indices] if indices is not None else None,
        }
        # Sent only when set, so that a job that sets neither is the same
        # request to any galleyd of this protocol.
        if shard_seed is not None:
            self._spec["shard_seed"] = int(shard_seed)
        if local_world_size:
            self._spec["local_world_size"] = local_world_size
        if max_resolution is not None:
            self._spec["max_resolution"] = max_resolution
        self.max_resolution = max_resolution
        self.shard_seed = self.seed if shard_seed is None else int(shard_seed)
        self.local_world_size = local_world_size
        # fields= names what a batch carries (galley/fields.py).
        self._fields, field_spec = _fields.plan(
            fields, shards=shards is not None, manifest=None if shards is not None else root,
            image_key=image_key, label_key=label_key, decode=decode_fields,
            unpickle=unpickle_fields, batch_transform=batch_transform)
        for limit, value in (("max_member_bytes", max_member_bytes),
                             ("field_batch_bytes", field_batch_bytes)):
            if value is not None:
                field_spec[limit] = int(value)
        if shards is not None:
            self._spec.update(shards=shards, image_key=image_key or "", label_key=label_key or "")
        # Shards in object storage: the job's own access, resolved here as
        # the AWS CLI resolves it, and again at each job open (_open_job),
        # so refreshed temporary credentials reach galleyd.
        self._s3 = shards is not None and _shards.is_object_url(shards[0])
        if self._s3:
            self._spec["s3"] = _s3_access.resolve(what=shards[0])
        if field_spec:
            self._spec.update(field_spec)
        elif shards is None and (image_key is not None or label_key != "cls"):
            raise ValueError("image_key= and label_key= apply to tar shard datasets only")
        self._socket = socket
        self._autostart = autostart
        # What loader.dataset is, as torch has it: the object given, or for a
        # path the dataset galleyd lists there (galley.datasets).
        self._listing = _datasets.ListedDataset(
            root, _listing_pages(self._spec, socket, autostart, self._request_seconds()), shards)
        self.dataset = (self._listing if isinstance(dataset, (str, bytes, os.PathLike, list, tuple))
                        else dataset)
        self._sampler_view: Any = None     # loader.sampler, made when first read
        self._batch_sampler_view: Any = None
        self._client: Any = None
        # The loader's own job in galleyd: main passes take their batches from
        # it, one epoch after the other (side passes open their own).
        self._job: Any = None
        self._job_pid: Optional[int] = None  # the galleyd serving it
        self._job_epoch: Optional[int] = None  # the epoch of its next batch
        # The last job's info and, once it is closed, its final counters:
        # len(), classes, info and stats() answer from them without a job.
        self._info: Optional[Dict[str, Any]] = None
        self._final_stats: Optional[Dict[str, Any]] = None
        self._dataset_size: Optional[int] = None  # as the last job opened saw it
        # The dataset's resume key and figures, as the last job opened saw it.
        self._dataset_seen: Optional[Dict[str, Any]] = None
        # A listed loader's job: the epoch whose list it was last given, and
        # that list (a listed epoch is served only once its list is sent).
        self._job_listed_epoch: Optional[int] = None
        self._job_listed: Optional[List[int]] = None
        self._epoch = 0             # the epoch the next loop yields (set_epoch)
        self._completed = 0         # main passes that ran to the end of their epoch
        self._skipped = 0
        self._skipped_files: Dict[str, None] = {}  # in the order they failed
        self._left_out_warned = False  # shard samples the listing left out: warned once
        self._resume: Optional[Dict[str, Any]] = None  # a loaded state not yet resumed
        self._main: Optional[_Pass] = None  # the main pass under way
        # The pass state_dict() records: the main pass under way, or one whose
        # daemon went away and did not come back.
        self._recorded: Optional[_Pass] = None

    # -- torch argument mapping ----------------------------------------------------

    def _warn_meaningless(self, python_part, worker_init_fn, multiprocessing_context,
                          persistent_workers, in_order) -> None:
        """Worker processes run only a transform's Python part or a
        collate_fn: without either their arguments mean nothing, and say so
        once."""
        if not python_part:
            why = ("the whole transform runs in galleyd and there is no collate_fn, so there "
                   "are no worker processes (galleyd's threads prepare the batches)")
            if self.num_workers:
                _warn_once("num_workers", f"galley.DataLoader: num_workers has no effect: {why}")
            if worker_init_fn is not None:
                _warn_once("worker_init_fn", f"galley.DataLoader: worker_init_fn is never "
                           f"called: {why}")
            if multiprocessing_context is not None:
                _warn_once("multiprocessing_context", f"galley.DataLoader: "
                           f"multiprocessing_context has no effect: {why}")
            if persistent_workers:
                _warn_once("persistent_workers", f"galley.DataLoader: persistent_workers has "
                           f"no effect: {why}")
        if not in_order:
            _warn_once("in_order", "galley.DataLoader: in_order=False has no effect; batches "
                       "always come in order")

    def _from_sampler(self, sampler, seed, indices, rank, world_size):
        """shuffle, seed, indices, rank, world_size, shard_drop_last from a torch sampler."""
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
            self._sampler = sampler  # its set_epoch() chooses each loop's epoch
            return (bool(sampler.shuffle), int(sampler.seed), indices, int(sampler.rank),
                    int(sampler.num_replicas), bool(sampler.drop_last))
        if isinstance(sampler, SequentialSampler):
            return False, seed, indices, rank, world_size, False
        if isinstance(sampler, SubsetRandomSampler):
            if indices is not None:
                raise ValueError("give indices= or a SubsetRandomSampler, not both")
            return True, seed, list(sampler.indices), rank, world_size, False
        if isinstance(sampler, RandomSampler):
            if sampler.replacement or sampler._num_samples is not None:
                raise ValueError("galley serves each item exactly once per epoch; a "
                                 "RandomSampler with replacement or num_samples is not supported")
            if seed is None and sampler.generator is not None:
                seed = int(sampler.generator.initial_seed()) % (1 << 64)
            return True, seed, indices, rank, world_size, False
        raise ValueError(f"galley decides the order in the daemon and cannot run a "
                         f"{type(sampler).__name__}; use shuffle=, indices= or a "
                         f"DistributedSampler")

    # -- torch.utils.data.DataLoader look-alikes ---------------------------------

    @property
    def sampler(self) -> Any:
        """The sampler given, else a galley.samplers.EpochSampler: galleyd's
        order for this rank, with DistributedSampler's attributes."""
        if self._given_sampler is not None:
            return self._given_sampler
        if self._sampler_view is None:
            self._sampler_view = _samplers.EpochSampler(self)
        return self._sampler_view

    @property
    def batch_sampler(self) -> Any:
        """torch's ``BatchSampler(loader.sampler, batch_size, drop_last)``, as
        torch's DataLoader has it: ``len()`` is ``len(loader)``."""
        if self._batch_sampler_view is None:
            from torch.utils.data import BatchSampler
            self._batch_sampler_view = BatchSampler(self.sampler, self.batch_size, self.drop_last)
        return self._batch_sampler_view

    def __len__(self) -> int:
        """Batches per epoch; the same on every rank, and exact."""
        return int(self._job_info()["batches_per_epoch"])

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next loop yields, as DistributedSampler.set_epoch."""
        self._epoch = int(epoch)

    @property
    def classes(self) -> List[str]:
        return list(self._job_info()["classes"])

    @property
    def info(self) -> Dict[str, Any]:
        """What galleyd said of the loader's job (the last one, once it ended)."""
        return dict(self._job_info())

    @property
    def skipped(self) -> int:
        """Samples that could not be read or decoded so far (each was substituted)."""
        return self._skipped

    @property
    def skipped_files(self) -> List[str]:
        """The files galleyd could not read or decode so far, each once, in
        the order they failed. galleyd names the first failure of each batch:
        a batch with several names one of them, so this list may be shorter
        than ``skipped`` (which counts every substituted sample)."""
        return list(self._skipped_files)

    @property
    def left_out(self) -> int:
        """Tar shards: how many samples the listing left out (never served):
        a member ``fields=`` names, the image or the label missing or
        unusable, a member twice. 0 for other datasets."""
        return int(self._job_info().get("left_out", 0))

    @property
    def left_out_samples(self) -> List[str]:
        """The first (at most 1,000) samples ``left_out`` counts, as
        ``"shard: key (why)"``, in item order."""
        return list(self._job_info().get("left_out_samples", []))

    @property
    def completed_epochs(self) -> int:
        """Loops that ran to the end of their epoch (main passes only: an
        iterator started while another runs is not counted)."""
        return self._completed

    def stats(self) -> Dict[str, Any]:
        """The daemon's counters for the loader's job and its sampler group;
        once that job has ended (after the last epoch, a loop left early,
        ``close()``), its final counters, without opening another."""
        if self._job is None and self._final_stats is not None:
            return copy.deepcopy(self._final_stats)
        return self._open().stats()

    def __iter__(self) -> Iterator[Any]:
        return self._epoch_batches(with_ids=False)

    def iter_with_ids(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Like iterating the loader, but yields (images, labels, item_ids):
        galleyd's item ids appended to the batch (to ``collate_fn``'s result
        when one is given)."""
        return self._epoch_batches(with_ids=True)

    # -- resume (torchdata StatefulDataLoader style) ------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """Where the loader stands: save it with the model's checkpoint.

        Taken inside a loop after k batches of epoch e, a loader given it by
        ``load_state_dict`` yields exactly the items of e not yielded yet, then
        e + 1. Taken between loops, it resumes at the next loop's epoch. Side
        passes (iterators started while the loop runs) are not recorded. Each
        DDP rank saves its own.
        """
        if self._resume is not None:  # loaded, not iterated yet: pass it on unchanged
            return dict(self._resume["state"])
        epoch_list = None
        if self._recorded is not None:
            epoch, batches = self._recorded.epoch, self._recorded.batches
            consumed = bytes(self._recorded.consumed)
            if self._recorded.items is not None:
                epoch_list = _list_digest(self._recorded.items)
        else:
            epoch, batches, consumed = self._epoch, 0, b""
        if self._dataset_seen is None:
            self._open()
        dataset = dict(self._dataset_seen)
        return {
            "version": _STATE_VERSION, "epoch": epoch, "batches_yielded": batches,
            "consumed": consumed, "completed_epochs": self._completed, "skipped": self._skipped,
            # Named by content, so that a copy under another path resumes; the
            # path is only shown in messages.
            "dataset": dataset, "batch_size": self.batch_size, "shuffle": self.shuffle,
            "seed": self.seed, "rank": self.rank, "world_size": self.world_size,
            "shard_seed": self.shard_seed, "local_world_size": self.local_world_size,
            "drop_last": self.drop_last, "shard_drop_last": self._spec["shard_drop_last"],
            "subset": [self._spec["classes"], self._spec["ids"]],
            # Item ids are positions in the dataset: a dataset that changed since
            # the checkpoint cannot be resumed exactly.
            "dataset_size": dataset["items"],
            # Whose split: galley's, or a DistributedSampler's lists, which
            # resume by position in the epoch's list (epoch_list: its digest).
            "split": "sampler" if self._listed else "galley", "epoch_list": epoch_list,
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume from ``state_dict()``: the next loop continues its epoch."""
        if state.get("version") not in (1, _STATE_VERSION):
            raise ValueError(f"unknown galley.DataLoader state version {state.get('version')!r}")
        mine = self.state_dict() if self._resume is None else self._resume["state"]
        # States saved before shard_seed and local_world_size existed split as
        # seed and an unknown layout do; those of version 1 by galley's split.
        state = {"shard_seed": state.get("seed"), "local_world_size": 0, "split": "galley",
                 "epoch_list": None, **state}
        for key in ("batch_size", "shuffle", "seed", "rank", "world_size", "shard_seed",
                    "local_world_size", "drop_last", "shard_drop_last", "subset", "split"):
            if state[key] != mine[key]:
                raise ValueError(f"the state was saved by a loader with {key}={state[key]!r}, "
                                 f"this one has {mine[key]!r}; build the loader as it was")
        _check_same_dataset(state, mine["dataset"], warn=True)
        # The OpenJob form of the consumed items: the same bitmap, as hex.
        consumed = bytes(state["consumed"]).hex()
        self.close()
        self._epoch = int(state["epoch"])
        self._completed = int(state["completed_epochs"])
        self._skipped = int(state["skipped"])
        self._recorded = None
        self._resume = {"state": dict(state), "batches": int(state["batches_yielded"]),
                        "consumed": consumed}

    # -- iteration -----------------------------------------------------------------

    def _epoch_batches(self, with_ids: bool) -> Iterator[Any]:
        if self.epochs is not None and self._completed >= self.epochs:
            return
        # The first iterator to run is the loader's main pass; one started
        # while it runs is a side pass over its own job, so neither ever sees
        # the other's batches.
        walk = self._start_main_pass() if self._main is None else self._start_side_pass()
        pool = None
        try:
            received = self._received_batches(walk)
            if self._stage is not None and self._stage.runs_in_workers and self.num_workers:
                pool = self._worker_pool(walk)
                prepared = pool.run(received, walk.epoch, self._raise_sample_failure)
            else:
                prepared = self._prepared_here(received, walk.epoch)
            for (ids, last), batch in prepared:
                # Counted as yielded only now: with workers, batches received
                # from galleyd are still being prepared.
                if len(ids):
                    for item in ids.tolist():
                        walk.consumed[item >> 3] |= 1 << (item & 7)
                    walk.batches += 1
                if last:
                    self._finish_pass(walk)
                if batch is not None:
                    yield self._finish_batch(batch, ids, walk.epoch, with_ids)
                    del batch
                if last:
                    return
        finally:
            if pool is not None and (pool is not self._pool or not pool.alive):
                pool.close()
                if pool is self._pool:
                    self._pool = None
            if not walk.finished:
                self._abandon_pass(walk)

    def _received_batches(self, walk: "_Pass") -> Iterator[Tuple[Tuple[Any, bool], Any]]:
        """galleyd's batches for the pass, as ``((ids, last), (images, labels,
        ids, fields))``; images None for a batch without samples (an epoch's
        end); fields the raw field columns of a job with ``fields=``."""
        job = walk.job
        slots = int(job.info["slots"])
        received = walk.batches  # of the epoch, those of a resumed state included
        while True:
            walk.held = [ref for ref in walk.held if ref() is not None]
            if len(walk.held) >= slots:
                raise RuntimeError(
                    f"all {slots} batch slots are held by batches still alive, so no new "
                    f"batch can be prepared: .clone() the batches you keep (or raise "
                    f"prefetch=)")
            try:
                memory, labels, ids, meta = job.next(self.timeout or 1e6)
            except _galley.Timeout as late:
                # torch's words first: here galleyd is the worker that was late.
                daemon = "galleyd" + (f" (pid {walk.daemon_pid})" if walk.daemon_pid else "")
                message = (
                    f"DataLoader timed out after {self.timeout:g} seconds: {daemon} prepared no "
                    f"batch for this loop within it (epoch {walk.epoch}, batch {received + 1} "
                    f"of {job.info['batches_per_epoch']}). `galleyctl jobs` shows what galleyd "
                    f"is doing and its log any read that stalls; iterating the loader again "
                    f"opens a new job. If galleyd is only busy, raise timeout= (0 waits as long "
                    f"as galleyd runs)")
                # Dropped without asking galleyd for its final counters: it
                # is not answering.
                self._end_pass_job(walk)
                raise _galley.Timeout(message) from late
            except (_galley.ServerUnavailable, _galley.JobCancelled) as lost:
                job = self._reopen_after_restart(walk, lost)
                slots = int(job.info["slots"])
                continue
            except _galley.SampleError as failed:
                # galleyd ended the job: this epoch cannot be delivered
                # whole (the dataset changed under it, or failed samples
                # had no substitute). The next loop opens a new job,
                # which lists the dataset as it is then.
                self._end_pass_job(walk)
                if _NATIVE_SIZE_MISMATCH in str(failed):
                    _raise_native_size_mismatch(str(failed).split(" First: ")[-1])
                raise
            if meta["epoch"] != walk.epoch:
                # Each pass's job is opened at its epoch and never sought.
                raise _galley.ProtocolError(
                    f"galleyd sent a batch of epoch {meta['epoch']} to a loop over epoch "
                    f"{walk.epoch}")
            if _NATIVE_SIZE_MISMATCH in meta["first_error"]:
                _raise_native_size_mismatch(meta["first_error"])
            if meta["skipped"]:
                self._note_skipped(walk, meta["skipped"], meta["first_error"])
            last = meta["last_in_epoch"]
            ids = _tensors.int64_tensor(ids)
            labels = _tensors.int64_tensor(labels)
            images = None
            fields = meta.get("fields")
            if len(labels):
                walk.held.append(weakref.ref(memory))
                images = _tensors.images_tensor(memory)
                if self._fields is not None:
                    images, labels, ids, fields = self._decode_fields(walk, images, labels, ids,
                                                                      fields)
            del memory
            received += 1 if len(labels) else 0
            yield (ids, last), (images, labels, ids, fields)
            del images  # the ring slot goes back to galleyd once the batch is dropped
            if last:
                return

    def _decode_fields(self, walk: "_Pass", images: "torch.Tensor", labels: "torch.Tensor",
                       ids: "torch.Tensor", columns: List[List[bytes]]) -> Tuple[Any, ...]:
        """The batch's field values decoded, here in the loop's process (they
        are small), before any worker. A value that does not decode (a
        pickle that does not unpickle, say: galleyd checks what it can) is a
        bad sample, as a broken image is: under on_error="skip" another
        sample of the batch takes its place, counted in ``skipped`` and
        ``skipped_files`` and warned of; under "raise" SampleError names the
        shard, the member and why."""
        decoded, failed = self._fields.decode(columns)
        if not failed:
            return images, labels, ids, decoded
        items = ids.tolist()
        where = {position: self._field_failure(items[position], why)
                 for position, why in sorted(failed.items())}
        good = [p for p in range(len(items)) if p not in failed]
        self._note_skipped(walk, len(failed), next(iter(where.values())))
        for message in where.values():  # every file, not only the batch's first
            self._skipped_files.setdefault(message.split(": ", 1)[0])
        if not good:
            raise _galley.SampleError(
                f"no sample of a batch of epoch {walk.epoch} could be decoded; the first: "
                f"{next(iter(where.values()))}")
        # Each failed position takes the next good sample of the batch.
        take = [p if p not in failed else next((g for g in good if g > p), good[0])
                for p in range(len(items))]
        import torch
        index = torch.tensor(take, dtype=torch.int64)
        decoded = [[column[p] for p in take] for column in decoded]
        return images.index_select(0, index), labels[index], ids[index], decoded

    def _field_failure(self, item: int, why: str) -> str:
        """"<file>: <what> <why>" for a field of ``item`` that did not decode,
        naming the shard and member (or the manifest's image and column)."""
        try:
            path = self._listing.samples[item][0]
        except Exception:  # the listing is only the message's: never a second error
            return f"item {item}: {why}"
        field, reason = why.split(" cannot be decoded: ", 1)
        name = field.split(" ", 1)[1].strip("'")
        if self._spec.get("shards"):
            shard, member = path.rsplit(":", 1)
            slash = member.rfind("/") + 1
            key = member[:member.find(".", slash)] if "." in member[slash:] else member
            return f"{path}: member {key}.{name} cannot be decoded: {reason}"
        return f"{path}: manifest column {name!r} cannot be decoded: {reason}"

    def _prepared_here(self, received: Iterator[Tuple[Any, Any]],
                       epoch: int) -> Iterator[Tuple[Any, Any]]:
        """The received batches prepared in this process (no workers)."""
        for meta, (images, labels, ids, fields) in received:
            batch = None if images is None else self._prepare(images, labels, ids, epoch, fields)
            del images  # only the batch may keep the ring slot
            yield meta, batch
            del batch

    def _prepare(self, images: "torch.Tensor", labels: "torch.Tensor", ids: "torch.Tensor",
                 epoch: int, fields: Optional[List[List[Any]]] = None) -> Any:
        """One batch in this process: galleyd's stacked batch as it is (a
        view of the ring) when the transform ran wholly in galleyd and no
        collate_fn is given, else torch's collation of the samples; with
        fields=, the images beside the decoded fields."""
        if self._fields is not None:
            if self._stage is not None:
                try:
                    samples = self._stage.run(images, labels.tolist(), ids.tolist(), epoch)
                except python_stage.SampleFailure as failure:
                    self._raise_sample_failure(failure)
                images = [image for image, _ in samples]
            return self._fields.finish(images, fields, ids.tolist(), self.collate_fn)
        if self._stage is None:
            if self.collate_fn is None:
                return images, labels
            return python_stage.collate(list(zip(images, labels)), self.collate_fn)
        try:
            samples = self._stage.run(images, labels.tolist(), ids.tolist(), epoch)
        except python_stage.SampleFailure as failure:
            self._raise_sample_failure(failure)
        if not self._stage.transforms_images:  # target_transform only
            if self.collate_fn is None:  # the images stay galleyd's stacked view
                return images, python_stage.default_collate([t for _, t in samples])
            samples = [(image, target) for image, (_, target) in zip(images, samples)]
        return python_stage.collate(samples, self.collate_fn)

    def _finish_batch(self, batch: Any, ids: "torch.Tensor", epoch: int, with_ids: bool) -> Any:
        """Pinning, the batch transform and the item ids, in the loop's
        process, on the collated batch."""
        if self._pin:
            batch = _pin_tensors(batch)
        if self.batch_transform is not None:
            batch = tuple(self.batch_transform(
                *batch, rng=batch_ops.batch_rng(self.seed, epoch, ids)))
        if with_ids:
            batch = (tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)) + (ids,)
        return batch

    def _raise_sample_failure(self, failure: python_stage.SampleFailure) -> None:
        """A sample's Python part raised: the error in the loop, naming the
        item's file (or shard member) and with its original traceback."""
        python_stage.raise_failure(failure, self._item_path(failure.item), failure.__cause__)

    def _item_path(self, item: int) -> str:
        """An item's file (or shard member), for a message."""
        try:
            return self._listing.samples[item][0]
        except Exception:  # the listing is only the message's: never a second error
            return "path unknown"

    def _worker_pool(self, walk: "_Pass") -> worker_pool.WorkerPool:
        """Worker processes for the pass, started in torch's default
        multiprocessing context unless ``multiprocessing_context=`` names
        another: the loader's own for main passes with
        ``persistent_workers``, else new ones for this pass."""
        if walk.main and self._pool is not None:
            return self._pool
        import torch.multiprocessing
        context = self.multiprocessing_context
        if context is None or isinstance(context, str):
            context = torch.multiprocessing.get_context(context)
        pool = worker_pool.WorkerPool(self._stage, self.collate_fn, self.num_workers, context,
                                      self.worker_init_fn,
                                      self.prefetch_factor * self.num_workers, self._fields,
                                      self.timeout, self._item_path)
        if walk.main and self.persistent_workers:
            self._pool = pool
        return pool

    def _start_main_pass(self) -> "_Pass":
        """The loop that takes the loader's next epoch, from its own job."""
        resume = self._resume
        if self._sampler is not None:
            sampler_epoch = int(getattr(self._sampler, "epoch", self._epoch))
            if resume is not None and sampler_epoch != self._epoch:
                raise ValueError(f"the loader resumes epoch {self._epoch} but its "
                                 f"DistributedSampler is at epoch {sampler_epoch}; call "
                                 f"sampler.set_epoch({self._epoch}) first")
            self._epoch = sampler_epoch
        epoch = self._epoch
        listed = self._sampler_items() if self._listed else None
        if resume is not None and listed is not None:
            _check_same_list(resume["state"], listed, epoch)
        if resume is not None or self._job_epoch != epoch:
            # Reopened at this epoch (and resume point) rather than sought:
            # a seek would drop what galleyd prepared for the other epoch.
            self._close_job()
        job = self._open(listed)
        if resume is not None:
            _check_same_dataset(resume["state"], self._dataset_seen, warn=False)
        self._resume = None
        self._epoch = epoch + 1  # the next loop is the next epoch, finished or not
        walk = _Pass(epoch, main=True, job=job, daemon_pid=self._job_pid, items=listed)
        if resume:
            walk.batches = resume["batches"]
            walk.consumed[:] = bytes(resume["state"]["consumed"]).ljust(
                len(walk.consumed), b"\0")[:len(walk.consumed)]
        self._main = self._recorded = walk
        if listed is not None and (self._job_listed_epoch != epoch or self._job_listed != listed):
            # The job serves a listed epoch only once it has its list; it
            # waits for it, so this seek drops nothing prepared.
            try:
                job.seek_epoch(epoch, listed)
                self._job_listed_epoch, self._job_listed = epoch, listed
            except (_galley.ServerUnavailable, _galley.JobCancelled) as lost:
                try:
                    self._reopen_after_restart(walk, lost)  # opened with the list
                except BaseException:
                    self._abandon_pass(walk)
                    raise
        return walk

    def _start_side_pass(self) -> "_Pass":
        """An iterator started while the main pass runs: the epoch the next
        loop will take (a DistributedSampler's epoch, with one), over a job of
        its own that ends with that epoch."""
        epoch = self._epoch
        if self._sampler is not None:
            epoch = int(getattr(self._sampler, "epoch", epoch))
        listed = self._sampler_items() if self._listed else None
        job, pid = self._open_job(epoch, epochs=1, items=listed)
        return _Pass(epoch, main=False, job=job, daemon_pid=pid, items=listed)

    def _finish_pass(self, walk: "_Pass") -> None:
        """The pass has its epoch's last batch: it no longer holds the loader's
        job, which goes on with the next epoch unless that was the last."""
        walk.finished = True
        self._warn_skipped(walk)
        if not walk.main:
            walk.job.close()  # its only epoch is over
            return
        self._main = None
        self._recorded = None  # a state taken now resumes at the next epoch
        self._completed += 1
        self._job_epoch = walk.epoch + 1
        if self.epochs is not None and self._completed >= self.epochs:
            self._close_job()  # galleyd prepared nothing past this epoch

    def _abandon_pass(self, walk: "_Pass") -> None:
        """An iterator left before the end of its epoch (``break``, garbage
        collected, an error): its job is closed, so galleyd stops preparing
        for it at once; the next loop opens a new one at its own epoch."""
        walk.finished = True
        self._warn_skipped(walk)
        if not walk.main:
            walk.job.close()
            return
        self._main = None
        # A state taken now resumes the next loop's epoch; unless the daemon
        # went away, when it keeps this pass.
        self._recorded = walk if walk.daemon_lost else None
        self._close_job()

    def _end_pass_job(self, walk: "_Pass") -> None:
        """galleyd ended the pass's job: drop it without asking for more."""
        if walk.main:
            self._close_job(final_stats=False)
        else:
            walk.job.close()

    def _note_skipped(self, walk: "_Pass", count: int, first_error: str) -> None:
        self._skipped += count
        walk.skipped += count
        if not walk.first_skipped:
            walk.first_skipped = first_error
        # galleyd's message is "<path>: <reason>".
        self._skipped_files.setdefault(first_error.split(": ", 1)[0])
        if self.on_error == "raise":
            raise _galley.SampleError(
                f"{count} sample(s) of epoch {walk.epoch} failed: {first_error}")

    def _warn_skipped(self, walk: "_Pass") -> None:
        """One warning per pass over an epoch that substituted samples."""
        if walk.skipped and self.on_error == "skip":
            warnings.warn(
                f"galley: {walk.skipped} sample(s) of epoch {walk.epoch} could not be read or "
                f"decoded and were replaced by other items of the epoch (on_error='skip'); "
                f"first: {walk.first_skipped}. loader.skipped_files lists the files; "
                f"on_error='raise' raises instead", UserWarning, stacklevel=4)

    def close(self) -> None:
        """Ends the loader's job in the daemon and frees its shared memory.
        An iterator started alongside the loop keeps its own job until it
        ends or is dropped."""
        self._close_job()
        self._client = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> "DataLoader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._close_job(final_stats=False)  # no request to a daemon from a finalizer
            if self._pool is not None:
                self._pool.close()
        except Exception:
            pass

    # -- internals -----------------------------------------------------------------

    def _job_info(self) -> Dict[str, Any]:
        """The loader's job's info, or the last one's: no job is opened for it
        once one has been."""
        if self._job is not None:
            return self._job.info
        if self._info is not None:
            return self._info
        return self._open().info

    def _close_job(self, final_stats: bool = True) -> None:
        """Ends the loader's job, keeping its final counters for stats()."""
        if self._job is not None:
            if final_stats:
                try:
                    self._final_stats = self._job.stats()
                except _galley.GalleyError:
                    pass  # ended by galleyd: the counters before stay
            self._job.close()
            self._job = None
        self._job_epoch = None
        self._job_listed_epoch = self._job_listed = None

    def _daemon_pid(self, client: Any) -> Optional[int]:
        try:
            return int(client.query("status")["pid"])
        except _galley.GalleyError:
            return None

    def _reopen_after_restart(self, walk: "_Pass", lost: Exception) -> Any:
        """The pass's daemon went away mid-epoch. If a new galleyd answers on
        the same socket within the loader's timeout (30 s by default), the
        pass's job is opened there and the epoch goes on from where it was:
        the items already yielded are left out, as on a resume, so every item
        still comes exactly once. A job cancelled by a daemon that is still
        up (``galleyctl cancel``) is not reopened: ``lost`` is raised."""
        old_pid = walk.daemon_pid
        try:
            walk.job.close()
        except _galley.GalleyError:
            pass
        if walk.main:
            self._job = None
            self._job_epoch = None
        deadline = time.monotonic() + (self.timeout or 30.0)
        client = None
        pid = None
        while client is None:
            try:
                candidate = _autostart.client(self._socket, self._autostart, 5.0)
                pid = self._daemon_pid(candidate)
            except _galley.ServerUnavailable:
                candidate, pid = None, None
            if pid is not None and pid == old_pid:
                raise lost  # the daemon that ended the job still runs: a real cancel
            if pid is not None:
                client = candidate
                break
            if time.monotonic() >= deadline:
                walk.daemon_lost = True  # state_dict() resumes this epoch exactly
                raise _galley.ServerUnavailable(
                    f"galleyd went away during epoch {walk.epoch} ({lost}) and none answered "
                    f"again within {self.timeout or 30.0:g} s; loader.state_dict() holds your "
                    f"place: save it, and iterate again (or load_state_dict) once galleyd "
                    f"runs") from lost
            time.sleep(0.2)
        _warn_once("reconnect", f"galley: galleyd restarted (pid {old_pid} -> {pid}); the job "
                                f"continues epoch {walk.epoch} on the new daemon")
        self._client = client
        # OpenJob's resume_consumed form: the same bitmap, as hex.
        resume = {"batches": walk.batches, "consumed": bytes(walk.consumed).hex()}
        job, walk.daemon_pid = self._open_job(walk.epoch, self._epochs_left() if walk.main else 1,
                                              resume, walk.items)
        if int(job.info["dataset_size"]) != walk.dataset_size:
            job.close()
            raise ValueError(f"galleyd restarted during epoch {walk.epoch} and the dataset now "
                             f"has {job.info['dataset_size']} items: the epoch cannot go on "
                             f"exactly; iterate again to start the next one")
        walk.job = job
        if walk.main:
            self._job, self._job_pid, self._job_epoch = job, walk.daemon_pid, walk.epoch
            self._job_listed_epoch, self._job_listed = walk.epoch, walk.items
        return job

    def _request_seconds(self) -> float:
        return max(self.timeout, _REQUEST_SECONDS)

    def _epochs_left(self) -> int:
        """Epochs galleyd prepares for the loader's job: those left to run
        (at least the one about to start), or 0, endless."""
        return 0 if self.epochs is None else max(1, self.epochs - self._completed)

    def _open(self, listed: Optional[List[int]] = None) -> Any:
        """The loader's job, opened at the next loop's epoch (and a loaded
        state's resume point) when none is open. A listed loader's job is
        opened with ``listed``, the epoch's list (default: the sampler's
        list now)."""
        if self._job is None:
            resume = None
            if self._resume is not None:
                resume = {"batches": self._resume["batches"],
                          "consumed": self._resume["consumed"]}
            if self._listed and listed is None:
                listed = self._sampler_items()
            self._job, self._job_pid = self._open_job(self._epoch, self._epochs_left(), resume,
                                                      listed)
            self._job_epoch = self._epoch
            self._job_listed_epoch, self._job_listed = self._epoch, listed
            self._info = dict(self._job.info)
            self._final_stats = None
        return self._job

    def _open_job(self, start_epoch: int, epochs: int,
                  resume: Optional[Dict[str, Any]] = None,
                  items: Optional[List[int]] = None) -> Tuple[Any, Optional[int]]:
        """A job in galleyd from ``start_epoch`` for ``epochs`` epochs (0:
        endless), and the pid of the galleyd serving it. ``resume`` leaves out
        the first epoch's items yielded before (``batches``, and the
        ``consumed`` bitmap as hex). A listed loader's job takes ``items``,
        the first epoch's whole list; on a resume it goes on from the
        position the state stopped at (the list's items up to there were
        yielded, repeats included)."""
        if self._client is None:
            self._client = _autostart.client(self._socket, self._autostart,
                                             self._request_seconds())
        self._resolve_subset()
        # The OpenJob body (docs/protocol.md), where an absent field takes
        # its default.
        spec = {key: value for key, value in self._spec.items() if value is not None}
        if self._s3:
            spec["s3"] = _s3_access.resolve(what=spec["shards"][0])
        spec["start_epoch"] = start_epoch
        spec["epochs"] = epochs
        if resume is not None:
            spec["start_batch"] = resume["batches"]
            if items is None:  # a listed epoch leaves them out of its list
                spec["resume_consumed"] = resume["consumed"]
        if items is not None:
            spec["epoch_items"] = (items if resume is None
                                   else items[resume["batches"] * self.batch_size:])
        try:
            with _shards.IndexingProgress(
                    lambda: _autostart.client(self._socket, False, 5.0),
                    spec.get("shards") or spec["dataset"]):
                job = self._client.open_job(spec)
        except (_galley.ServerUnavailable, _galley.JobCancelled):
            # A daemon galley chose may have been exiting for idleness:
            # find (or start) one again, once.
            if not _autostart.may_retry(self._socket):
                raise
            self._client = _autostart.client(self._socket, self._autostart,
                                             self._request_seconds())
            job = self._client.open_job(spec)
        info = job.info
        self._dataset_size = int(info["dataset_size"])
        self._dataset_seen = {
            "path": self._root, "content_key": info["content_key"],
            "mtimes_key": info["mtimes_key"], "items": self._dataset_size,
            "bytes": int(info["dataset_bytes"]), "classes": list(info["classes"])}
        self._notice_shared_order(job)
        self._notice_left_out(info)
        if self._fields is not None:
            self._fields.set_collations(info.get("field_collations", []))
        return job, self._daemon_pid(self._client)

    def _notice_left_out(self, info: Dict[str, Any]) -> None:
        """Shard samples the listing left out are never served: one warning
        per loader naming how many and the first ones."""
        count = int(info.get("left_out", 0))
        if not count or self._left_out_warned:
            return
        self._left_out_warned = True
        named = list(info.get("left_out_samples", []))
        more = f" and {count - 3} more" if count > 3 else ""
        warnings.warn(f"galley: {count} sample(s) of the shards are left out and never served "
                      f"(a member fields= names, the image or the label is missing or unusable, "
                      f"or a member is there twice): "
                      f"{'; '.join(named[:3])}{more}. loader.left_out_samples lists them; "
                      f"on_error='raise' refuses the dataset instead", UserWarning, stacklevel=5)

    def _resolve_subset(self) -> None:
        """A torchvision dataset object's files (its ``extensions=`` and
        ``is_valid_file=`` applied by torchvision, in the user's process) as
        galleyd's item ids, once, before the first job: the job is served
        exactly the files torch's DataLoader would read."""
        if self._subset_resolved:
            return
        ids = dataset_objects.subset_ids(self._folder, self._listing.samples)
        self._subset_resolved = True
        if ids is None:
            return
        if self._spec["ids"] is not None or self._spec["classes"]:
            raise ValueError(f"the {type(self.dataset).__name__} given holds {len(ids)} of the "
                             f"{len(self._listing)} files galleyd lists (its extensions= or "
                             f"is_valid_file=); give either it or classes=/indices=, not both")
        if self._listed:
            self._subset = ids  # a DistributedSampler yields positions in the dataset
        else:
            self._spec["ids"] = ids

    def _sampler_items(self) -> List[int]:
        """list(sampler) for its current epoch, checked: ids of this dataset,
        in a list that fits one message."""
        self._resolve_subset()
        items = [operator.index(i) for i in self._sampler]
        # Checked here once a job told the dataset's size; else galleyd
        # refuses an id out of range, naming it.
        size = self._dataset_size
        if self._subset is not None:  # positions in the dataset object given
            size = len(self._subset)
            if items and not 0 <= min(items) <= max(items) < size:
                bad = next(i for i in items if not 0 <= i < size)
                raise ValueError(f"the DistributedSampler yields item {bad} but the dataset has "
                                 f"{size} items; build the sampler over loader.dataset")
            items = [self._subset[i] for i in items]
            size = self._dataset_size
        if items and size is not None and not 0 <= min(items) <= max(items) < size:
            bad = next(i for i in items if not 0 <= i < size)
            raise ValueError(f"the DistributedSampler yields item {bad} but the dataset has "
                             f"{size} items; build the sampler over loader.dataset (or a "
                             f"dataset of the same length)")
        if not items:
            raise ValueError("the DistributedSampler yields no items for this rank")
        # A decimal id and its comma per item: the list must fit one frame.
        if len(items) * (len(str(max(items))) + 1) > _LIST_BYTES:
            raise ValueError(f"the DistributedSampler yields {len(items)} items per epoch, more "
                             f"than one protocol message carries (each epoch's list travels in "
                             f"one of at most 16 MiB); give rank= and world_size= (galley's own "
                             f"split) instead of the sampler")
        return items

    def _notice_shared_order(self, job: Any) -> None:
        """Warns once per process when the job just opened joined jobs with
        other seeds under a policy that gives them one order (galleyd's
        sampler group: ``job_seeds``, ``orders_follow_seeds``)."""
        if not self.shuffle:
            return
        try:
            stats = job.stats()
        except _galley.GalleyError:
            return  # only a notice: never a reason to fail the job
        policy = stats.get("job", {}).get("policy")
        for group in stats.get("samplers", []):
            if (group.get("policy") == policy and group.get("jobs", 0) > 1
                    and group.get("job_seeds", 0) > 1
                    and group.get("orders_follow_seeds") is False):
                _warn_once("shared_order", (
                    f"galley.DataLoader: this job (seed={self.seed}) runs beside "
                    f"{group['jobs'] - 1} other job(s) on {self._root} with other seeds, and "
                    f"policy {policy!r} gives jobs on the same items one shared order whatever "
                    f"their seeds: that is how each item is read and decoded once for all of "
                    f"them. seed= still decides this job's augmentations, not its order. For an "
                    f"order of its own per seed (a seed sweep that should vary the data order), "
                    f"pass policy=\"independent\"; the jobs then share only through the "
                    f"cache (docs/sampling.md, section 1.2, gives the cost)"))
                return


def _pin_tensors(batch: Any) -> Any:
    """A collated batch with its tensors in page-locked memory."""
    import torch
    if isinstance(batch, torch.Tensor):
        return _tensors.pin(batch)
    if isinstance(batch, (tuple, list)):
        return type(batch)(_pin_tensors(part) for part in batch)
    if isinstance(batch, dict):
        return {key: _pin_tensors(part) for key, part in batch.items()}
    return batch


class _Pass:
    """One iterator's walk over one epoch.

    The loader's main pass takes the loader's next epoch from the loader's
    job, counts in ``completed_epochs`` and is what ``state_dict()`` records;
    a side pass (an iterator started while the main pass runs) has a job of
    its own. Used by the thread that iterates.
    """

    def __init__(self, epoch: int, main: bool, job: Any, daemon_pid: Optional[int],
                 items: Optional[List[int]] = None) -> None:
        self.epoch = epoch
        self.main = main
        self.job = job
        self.daemon_pid = daemon_pid  # the galleyd serving the job
        self.dataset_size = int(job.info["dataset_size"])
        self.batches = 0  # batches yielded
        self.consumed = bytearray((self.dataset_size + 7) // 8)  # bitmap of item ids yielded
        self.held: List[weakref.ref] = []  # its batches' shared memory still alive
        self.skipped = 0  # samples substituted in this pass
        self.first_skipped = ""  # galleyd's message for the first of them
        self.finished = False  # its last batch came, or it was abandoned
        self.daemon_lost = False  # its daemon went away and none came back
        self.items = items  # a listed epoch's whole list (a DistributedSampler's)
