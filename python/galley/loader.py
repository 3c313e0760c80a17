"""galley.DataLoader: a drop-in for torch.utils.data.DataLoader backed by galleyd.

The arguments torch's DataLoader takes keep their names, positions and
defaults; those that mean nothing when the node's daemon prepares the batches
are accepted with a one-time warning, and those galley cannot honour are
refused at construction with a message saying what to do instead.
docs/python.md is the migration guide.

DataLoader holds its parts, each a module of its own that can be tested
alone (docs/python.md, "Inside the package"): its arguments checked into an
immutable config (galley._config), its session with galleyd (galley._session),
its epochs and passes (galley._epoch) and the batches a pass yields
(galley._iteration). Used by one thread at a time, as torch's is.
"""

from __future__ import annotations

import os
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional,
                    Sequence, Tuple)

from . import samplers as _samplers
from ._config import LoaderConfig
from ._epoch import Epochs
from ._iteration import Batches
from ._session import JobSession
from ._warn import WARNED as _WARNED  # noqa: F401 (one warning per process, per key)

if TYPE_CHECKING:  # torch is imported lazily: importing galley must not need it
    import torch

__all__ = ["DataLoader"]


class FixedAttributeError(AttributeError, ValueError):
    """Raised on assigning an argument attribute of a built DataLoader. A
    ValueError as well, as torch's DataLoader raises for `batch_size`,
    `sampler`, `drop_last` and the others it fixes."""


class _Fixed:
    """A DataLoader attribute of its arguments, read from its config. It is
    fixed once the loader is built: assigning it raises, saying to build
    another loader (galleyd's jobs were opened with the value)."""

    def __set_name__(self, owner: Any, name: str) -> None:
        self.name = name

    def __get__(self, loader: Any, owner: Any = None) -> Any:
        return self if loader is None else getattr(loader._config, self.name)

    def __set__(self, loader: Any, value: Any) -> None:
        _refuse_assignment(self.name, value)


def _refuse_assignment(name: str, value: Any) -> None:
    raise FixedAttributeError(f"galley.DataLoader.{name} is fixed when the loader is built; "
                              f"build another DataLoader with {name}={value!r}")


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
    ``pin_memory``, ``timeout``, ``collate_fn``. Those named after an
    argument are fixed once the loader is built: assigning one raises
    ``AttributeError`` (build another loader).

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
            manifest's column names (a local file or an ``s3://`` object,
            whose header galleyd checks them against when the job opens);
            the image member takes its place (docs/datasets.md, "Every
            member of a sample"; galley/fields.py).
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
        # The arguments as given, before anything else is bound here: the
        # config checks them all (galley._config, which holds their defaults).
        arguments = dict(locals())
        del arguments["self"], arguments["dataset"]
        self._config = LoaderConfig.build(dataset, **arguments)
        self._session = JobSession(self._config)
        self._epochs = Epochs(self._config, self._session)
        self._batches = Batches(self._config, self._session, self._epochs)
        self._sampler_view: Any = None     # loader.sampler, made when first read
        self._batch_sampler_view: Any = None

    # -- torch.utils.data.DataLoader look-alikes ---------------------------------

    batch_size = _Fixed()
    num_workers = _Fixed()
    shuffle = _Fixed()
    drop_last = _Fixed()
    seed = _Fixed()
    epochs = _Fixed()
    rank = _Fixed()
    world_size = _Fixed()
    shard_seed = _Fixed()
    local_world_size = _Fixed()
    prefetch = _Fixed()
    prefetch_factor = _Fixed()
    on_error = _Fixed()
    pin_memory = _Fixed()
    pin_memory_device = _Fixed()
    collate_fn = _Fixed()
    timeout = _Fixed()
    transform = _Fixed()
    transform_split = _Fixed()
    batch_transform = _Fixed()
    multiprocessing_context = _Fixed()
    worker_init_fn = _Fixed()
    persistent_workers = _Fixed()
    max_resolution = _Fixed()

    @property
    def dataset(self) -> Any:
        """The dataset given, or for a path the dataset galleyd lists there
        (a ``galley.datasets.ListedDataset``)."""
        given = self._config.dataset
        if isinstance(given, (str, bytes, os.PathLike, list, tuple)):
            return self._session.listing
        return given

    @property
    def sampler(self) -> Any:
        """The sampler given, else a galley.samplers.EpochSampler: galleyd's
        order for this rank, with DistributedSampler's attributes."""
        if self._config.given_sampler is not None:
            return self._config.given_sampler
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
        return int(self._epochs.job_info()["batches_per_epoch"])

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next loop yields, as DistributedSampler.set_epoch."""
        self._epochs.epoch = int(epoch)

    @property
    def classes(self) -> List[str]:
        return list(self._epochs.job_info()["classes"])

    @property
    def info(self) -> Dict[str, Any]:
        """What galleyd said of the loader's job (the last one, once it ended)."""
        return dict(self._epochs.job_info())

    @property
    def skipped(self) -> int:
        """Samples that could not be read or decoded so far (each was substituted)."""
        return self._epochs.skipped

    @property
    def skipped_files(self) -> List[str]:
        """The files galleyd could not read or decode so far, each once, in
        the order they failed. galleyd names the first failure of each batch:
        a batch with several names one of them, so this list may be shorter
        than ``skipped`` (which counts every substituted sample)."""
        return list(self._epochs.skipped_files)

    @property
    def left_out(self) -> int:
        """Tar shards: how many samples the listing left out (never served):
        a member ``fields=`` names, the image or the label missing or
        unusable, a member twice. 0 for other datasets."""
        return int(self._epochs.job_info().get("left_out", 0))

    @property
    def left_out_samples(self) -> List[str]:
        """The first (at most 1,000) samples ``left_out`` counts, as
        ``"shard: key (why)"``, in item order."""
        return list(self._epochs.job_info().get("left_out_samples", []))

    @property
    def completed_epochs(self) -> int:
        """Loops that ran to the end of their epoch (main passes only: an
        iterator started while another runs is not counted)."""
        return self._epochs.completed

    def stats(self) -> Dict[str, Any]:
        """The daemon's counters for the loader's job and its sampler group;
        once that job has ended (after the last epoch, a loop left early,
        ``close()``), its final counters, without opening another."""
        return self._epochs.stats()

    def __iter__(self) -> Iterator[Any]:
        return self._iterate(with_ids=False)

    def iter_with_ids(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Like iterating the loader, but yields (images, labels, item_ids):
        galleyd's item ids appended to the batch (to ``collate_fn``'s result
        when one is given)."""
        return self._iterate(with_ids=True)

    def _iterate(self, with_ids: bool) -> Iterator[Any]:
        # The iterator holds the loader, as torch's does: a loader dropped
        # while its iterator runs (`for batch in DataLoader(...)`) would
        # otherwise be finalized, closing the job the loop takes from.
        yield from self._batches.iterate(with_ids)

    # -- resume (torchdata StatefulDataLoader style) ------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """Where the loader stands: save it with the model's checkpoint.

        Taken inside a loop after k batches of epoch e, a loader given it by
        ``load_state_dict`` yields exactly the items of e not yielded yet, then
        e + 1. Taken between loops, it resumes at the next loop's epoch. Side
        passes (iterators started while the loop runs) are not recorded. Each
        DDP rank saves its own.
        """
        return self._epochs.state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume from ``state_dict()``: the next loop continues its epoch."""
        state = self._epochs.checked_state(state)
        self.close()
        self._epochs.resume_from(state)

    # -- lifetime ------------------------------------------------------------------

    def close(self) -> None:
        """Ends the loader's job in the daemon and frees its shared memory.
        An iterator started alongside the loop keeps its own job until it
        ends or is dropped."""
        self._session.close()
        self._batches.close()

    def __enter__(self) -> "DataLoader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._session.close_job(final_stats=False)  # no request to a daemon from a finalizer
            self._batches.close()
        except Exception:
            pass

    # -- what other galley modules read -----------------------------------------------

    @property
    def _spec(self) -> Dict[str, Any]:
        """The OpenJob body the loader's jobs start from."""
        return self._session.spec


# The argument attributes read from the job (the dataset, the sampler) are
# fixed as the others are.
for _name in ("dataset", "sampler", "batch_sampler"):
    setattr(DataLoader, _name, getattr(DataLoader, _name).setter(
        lambda loader, value, _name=_name: _refuse_assignment(_name, value)))
del _name
