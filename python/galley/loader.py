"""galley.DataLoader: a drop-in for torch.utils.data.DataLoader backed by galleyd."""

import json
import os

from . import _autostart
from . import _galley
from . import _tensors
from . import shards as _shards
from . import transforms as T

__all__ = ["DataLoader"]


class DataLoader:
    """Iterates ``(images, labels)`` batches prepared by the node's galleyd.

    ``images`` is a zero-copy view of the daemon's shared memory:
    ``torch.uint8`` ``[B, 3, H, W]`` (``layout="NHWC"``: ``[B, H, W, 3]``), or
    ``torch.float32`` ``[B, 3, H, W]`` when the transform ends in
    ``Normalize`` or ``normalize=(mean, std)`` is given. ``labels`` is
    ``torch.int64`` ``[B]``. The batch's memory goes back to the daemon when
    the images tensor is freed; keep at most ``prefetch`` batches alive.

    ``pin_memory=True`` behaves as in ``torch.utils.data.DataLoader``: where
    CUDA is available each batch is copied into page-locked memory (and its
    shared-memory slot released at once), so ``.to(device,
    non_blocking=True)`` overlaps the transfer with compute; where it is not,
    a warning says so and batches stay unpinned.

    One ``for`` loop is one epoch; every item of the job's subset (its DDP
    shard when ``world_size > 1``) appears exactly once, in a uniformly random
    order. Breaking out of a loop and iterating again starts the next epoch;
    ``set_epoch(e)`` chooses the epoch explicitly, as with
    ``DistributedSampler``.

    ``policy="ods"`` trades that uniformity for cache hits: when the next item
    is not cached the daemon may serve a cached one the epoch still owes
    instead, for at most ``ods_fraction`` (0 to 1) of each epoch's samples;
    every item still appears exactly once per epoch.

    ``socket=`` names the galleyd to use (default ``$GALLEY_SOCKET``, then the
    user's own daemon, then the node's service). When none answers and none
    was named, a private galleyd is started for the user and reused by later
    jobs; ``autostart=False`` (or ``GALLEY_AUTOSTART=0``) raises
    ``ServerUnavailable`` instead, listing the sockets tried.
    """

    def __init__(self, dataset, batch_size=1, shuffle=True, transform=None, normalize=None,
                 seed=0, epochs=None, rank=0, world_size=1, drop_last=False, prefetch=4,
                 on_error="skip", policy=None, classes=None, indices=None, layout="NCHW",
                 socket=None, timeout=60.0, name=None, num_workers=None, pin_memory=False,
                 ods_fraction=0.1, autostart=None, image_key=None, label_key="cls"):
        if not shuffle:
            raise ValueError("galley always serves a uniformly random order; shuffle=False "
                             "is not supported")
        if on_error not in ("skip", "raise"):
            raise ValueError('on_error must be "skip" or "raise"')
        if int(batch_size) < 1:
            raise ValueError("batch_size must be at least 1")
        if not 0.0 <= float(ods_fraction) <= 1.0:
            raise ValueError("ods_fraction must lie in [0, 1]")
        if epochs is not None and int(epochs) < 1:
            raise ValueError("epochs must be None (endless) or at least 1")
        # Tar shards (a list, glob, brace pattern or folder of *.tar) are
        # expanded here, as the user; see galley.shards.
        self.dataset, shards = _shards.resolve_dataset(dataset)
        self.batch_size = int(batch_size)
        self.drop_last = bool(drop_last)
        self.seed = int(seed)
        self.epochs = None if epochs is None else int(epochs)
        self.rank, self.world_size = int(rank), int(world_size)
        self.prefetch = int(prefetch)
        self.on_error = on_error
        self.pin_memory = bool(pin_memory)
        self._pin = _tensors.pinning_available(self.pin_memory)
        self.timeout = float(timeout)
        self.transform = transform
        self._spec = {
            "dataset": self.dataset,
            "batch_size": self.batch_size,
            "drop_last": self.drop_last,
            "transform_json": json.dumps(T.build_spec(transform, normalize, layout)),
            "seed": self.seed,
            "epochs": 0 if self.epochs is None else self.epochs,
            "rank": self.rank,
            "world_size": self.world_size,
            "prefetch": self.prefetch,
            "on_error": on_error,
            "policy": policy or "",
            "ods_fraction": float(ods_fraction),
            "name": name or f"pid{os.getpid()}",
            "classes": list(classes) if classes else None,
            "ids": [int(i) for i in indices] if indices is not None else None,
        }
        if shards is not None:
            self._spec.update(shards=shards, image_key=image_key or "", label_key=label_key)
        elif image_key is not None or label_key != "cls":
            raise ValueError("image_key= and label_key= apply to tar shard datasets only")
        self._socket = socket
        self._autostart = autostart
        self._client = None
        self._job = None
        self._epoch = 0           # the epoch the next iteration yields
        self._daemon_epoch = None  # the epoch the daemon's next batch belongs to
        self._skipped = 0

    # -- torch.utils.data.DataLoader look-alikes ---------------------------------

    def __len__(self):
        return int(self._open().info["batches_per_epoch"])

    def set_epoch(self, epoch):
        self._epoch = int(epoch)

    @property
    def classes(self):
        return list(self._open().info["classes"])

    @property
    def info(self):
        return dict(self._open().info)

    @property
    def skipped(self):
        """Samples skipped so far because they could not be read or decoded."""
        return self._skipped

    def stats(self):
        """The daemon's counters for this job and its sampler group."""
        return self._open().stats()

    def __iter__(self):
        return self._epoch_batches(with_ids=False)

    def iter_with_ids(self):
        """Like iterating the loader, but yields (images, labels, item_ids)."""
        return self._epoch_batches(with_ids=True)

    def _epoch_batches(self, with_ids):
        job = self._open()
        if self.epochs is not None and self._epoch >= self.epochs:
            return
        if self._daemon_epoch != self._epoch:
            job.seek_epoch(self._epoch)
            self._daemon_epoch = self._epoch
        epoch = self._epoch
        self._epoch = epoch + 1  # the next loop is the next epoch, finished or not
        completed = False
        try:
            while True:
                images, labels, ids, meta = job.next(self.timeout)
                if meta["skipped"]:
                    self._skipped += meta["skipped"]
                    if self.on_error == "raise":
                        raise _galley.SampleError(
                            f"{meta['skipped']} sample(s) of epoch {epoch} failed: "
                            f"{meta['first_error']}")
                last = meta["last_in_epoch"]
                if last:
                    completed = True
                    self._daemon_epoch = epoch + 1
                if len(labels):
                    batch = (_tensors.images_tensor(images), _tensors.int64_tensor(labels))
                    if self._pin:
                        batch = tuple(_tensors.pin(t) for t in batch)
                    if with_ids:
                        batch += (_tensors.int64_tensor(ids),)
                    yield batch
                if last:
                    return
        finally:
            if not completed:
                self._daemon_epoch = None  # the daemon is mid-epoch: the next loop seeks

    def close(self):
        if self._job is not None:
            self._job.close()
            self._job = None
        self._client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- internals -----------------------------------------------------------------

    def _open(self):
        if self._job is None:
            if self._client is None:
                self._client = _autostart.client(self._socket, self._autostart, self.timeout)
            spec = dict(self._spec)
            spec["start_epoch"] = self._epoch
            try:
                with _shards.IndexingProgress(
                        lambda: _autostart.client(self._socket, False, 5.0), spec.get("shards")):
                    self._job = self._client.open_job(spec)
            except (_galley.ServerUnavailable, _galley.JobCancelled):
                # A daemon galley chose may have been exiting for idleness:
                # find (or start) one again, once.
                if not _autostart.may_retry(self._socket):
                    raise
                self._client = _autostart.client(self._socket, self._autostart, self.timeout)
                self._job = self._client.open_job(spec)
            self._daemon_epoch = self._epoch
        return self._job
