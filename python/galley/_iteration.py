"""One ``iter(loader)``: galleyd's batches for a pass, made into what the
loop yields.

``Batches.iterate`` starts a pass (galley._epoch), takes its batches from
its job (a zero-copy view of each ring slot), decodes ``fields=`` values,
runs the transform's Python part and ``collate_fn`` here or in worker
processes (galley.worker_pool), then pins, applies ``batch_transform`` and
appends the item ids. A batch counts as yielded only when it reaches the
loop, so a state taken then resumes after it. Leaving the loop early, or an
error, abandons the pass: its job closes and galleyd stops preparing for it.

Thread-safety: none; one thread iterates a loader. Persistent workers
(``persistent_workers=True``) are the only thing kept between passes.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Tuple

from . import _galley
from . import _tensors
from . import batch_ops
from . import python_stage
from . import worker_pool
from ._config import LoaderConfig
from ._epoch import EpochPass, Epochs
from ._session import JobSession

if TYPE_CHECKING:  # torch is imported lazily: importing galley must not need it
    import torch

__all__ = ["Batches", "pin_tensors"]

# The daemon's message for an image whose size differs from the first one's
# when there is no transform (JobSpec::native_size).
_NATIVE_SIZE_MISMATCH = _galley.native_size_mismatch


def _raise_native_size_mismatch(error: str) -> None:
    """transform=None met images of several sizes: a mistake in the job's
    arguments, not a bad file, so a ValueError with what to do."""
    detail = error.split("; give a transform")[0].removesuffix("...")
    raise ValueError(f"{detail}; give a transform that resizes (e.g. Resize + CenterCrop)")


def pin_tensors(batch: Any) -> Any:
    """A collated batch with its tensors in page-locked memory."""
    import torch
    if isinstance(batch, torch.Tensor):
        return _tensors.pin(batch)
    if isinstance(batch, (tuple, list)):
        return type(batch)(pin_tensors(part) for part in batch)
    if isinstance(batch, dict):
        return {key: pin_tensors(part) for key, part in batch.items()}
    return batch


class Batches:
    """The loader's passes as the batches they yield (module docstring)."""

    def __init__(self, config: LoaderConfig, session: JobSession, epochs: Epochs) -> None:
        self.config = config
        self.session = session
        self.epochs = epochs
        self.pool: Optional[worker_pool.WorkerPool] = None  # persistent workers, once started

    def close(self) -> None:
        """Stops the persistent workers, if any."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def iterate(self, with_ids: bool) -> Iterator[Any]:
        """The batches of one pass over an epoch; with ``with_ids``, each with
        its item ids appended."""
        epochs = self.epochs
        if epochs.done:
            return
        walk = epochs.start_pass()
        pool = None
        try:
            received = self._received(walk)
            if self.config.runs_in_workers:
                pool = self._worker_pool(walk)
                prepared = pool.run(received, walk.epoch, self._raise_sample_failure)
            else:
                prepared = self._prepared_here(received, walk.epoch)
            for (ids, last), batch in prepared:
                # Counted as yielded only now: with workers, batches received
                # from galleyd are still being prepared.
                if len(ids):
                    walk.count_yielded(ids.tolist())
                if last:
                    epochs.finish_pass(walk)
                if batch is not None:
                    yield self._finish_batch(batch, ids, walk.epoch, with_ids)
                    del batch
                if last:
                    return
        finally:
            if pool is not None and (pool is not self.pool or not pool.alive):
                pool.close()
                if pool is self.pool:
                    self.pool = None
            if not walk.finished:
                epochs.abandon_pass(walk)

    def _received(self, walk: EpochPass) -> Iterator[Tuple[Tuple[Any, bool], Any]]:
        """galleyd's batches for the pass, as ``((ids, last), (images, labels,
        ids, fields))``; images None for a batch without samples (an epoch's
        end); fields the raw field columns of a job with ``fields=``."""
        epochs = self.epochs
        timeout = self.config.timeout
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
                memory, labels, ids, meta = job.next(timeout or 1e6)
            except _galley.Timeout as late:
                # torch's words first: here galleyd is the worker that was late.
                daemon = "galleyd" + (f" (pid {walk.daemon_pid})" if walk.daemon_pid else "")
                message = (
                    f"DataLoader timed out after {timeout:g} seconds: {daemon} prepared no "
                    f"batch for this loop within it (epoch {walk.epoch}, batch {received + 1} "
                    f"of {job.info['batches_per_epoch']}). `galleyctl jobs` shows what galleyd "
                    f"is doing and its log any read that stalls; iterating the loader again "
                    f"opens a new job. If galleyd is only busy, raise timeout= (0 waits as long "
                    f"as galleyd runs)")
                # Dropped without asking galleyd for its final counters: it
                # is not answering.
                epochs.end_pass_job(walk)
                raise _galley.Timeout(message) from late
            except (_galley.ServerUnavailable, _galley.JobCancelled) as lost:
                job = epochs.reopen_after_restart(walk, lost)
                slots = int(job.info["slots"])
                continue
            except _galley.SampleError as failed:
                # galleyd ended the job: this epoch cannot be delivered
                # whole (the dataset changed under it, or failed samples
                # had no substitute). The next loop opens a new job,
                # which lists the dataset as it is then.
                epochs.end_pass_job(walk)
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
                epochs.note_skipped(walk, meta["skipped"], meta["first_error"])
            last = meta["last_in_epoch"]
            ids = _tensors.int64_tensor(ids)
            labels = _tensors.int64_tensor(labels)
            images = None
            fields = meta.get("fields")
            if len(labels):
                walk.held.append(weakref.ref(memory))
                images = _tensors.images_tensor(memory)
                if self.config.fields is not None:
                    images, labels, ids, fields = self._decode_fields(walk, images, labels, ids,
                                                                      fields)
            del memory
            received += 1 if len(labels) else 0
            yield (ids, last), (images, labels, ids, fields)
            del images  # the ring slot goes back to galleyd once the batch is dropped
            if last:
                return

    def _decode_fields(self, walk: EpochPass, images: "torch.Tensor", labels: "torch.Tensor",
                       ids: "torch.Tensor", columns: List[List[bytes]]) -> Tuple[Any, ...]:
        """The batch's field values decoded, here in the loop's process (they
        are small), before any worker. A value that does not decode (a
        pickle that does not unpickle, say: galleyd checks what it can) is a
        bad sample, as a broken image is: under on_error="skip" another
        sample of the batch takes its place, counted in ``skipped`` and
        ``skipped_files`` and warned of; under "raise" SampleError names the
        shard, the member and why."""
        decoded, failed = self.config.fields.decode(columns)
        if not failed:
            return images, labels, ids, decoded
        items = ids.tolist()
        where = {position: self._field_failure(items[position], why)
                 for position, why in sorted(failed.items())}
        good = [p for p in range(len(items)) if p not in failed]
        self.epochs.note_skipped(walk, len(failed), next(iter(where.values())))
        for message in where.values():  # every file, not only the batch's first
            self.epochs.skipped_files.setdefault(message.split(": ", 1)[0])
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
            path = self.session.listing.samples[item][0]
        except Exception:  # the listing is only the message's: never a second error
            return f"item {item}: {why}"
        field, reason = why.split(" cannot be decoded: ", 1)
        name = field.split(" ", 1)[1].strip("'")
        if self.config.shards:
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

    def _run_stage(self, images: "torch.Tensor", labels: "torch.Tensor", ids: "torch.Tensor",
                   epoch: int) -> List[Tuple[Any, Any]]:
        """The Python part on one batch's samples, in this process."""
        try:
            return self.config.stage.run(images, labels.tolist(), ids.tolist(), epoch)
        except python_stage.SampleFailure as failure:
            self._raise_sample_failure(failure)
            raise  # not reached: the failure is raised as the sample's error

    def _prepare(self, images: "torch.Tensor", labels: "torch.Tensor", ids: "torch.Tensor",
                 epoch: int, fields: Optional[List[List[Any]]] = None) -> Any:
        """One batch in this process: galleyd's stacked batch as it is (a
        view of the ring) when the transform ran wholly in galleyd and no
        collate_fn is given, else torch's collation of the samples; with
        fields=, the images beside the decoded fields."""
        config = self.config
        if config.fields is not None:
            if config.stage is not None:
                samples = self._run_stage(images, labels, ids, epoch)
                images = [image for image, _ in samples]
            return config.fields.finish(images, fields, ids.tolist(), config.collate_fn)
        if config.stage is None:
            if config.collate_fn is None:
                return images, labels
            return python_stage.collate(list(zip(images, labels)), config.collate_fn)
        samples = self._run_stage(images, labels, ids, epoch)
        if not config.stage.transforms_images:  # target_transform only
            if config.collate_fn is None:  # the images stay galleyd's stacked view
                return images, python_stage.default_collate([t for _, t in samples])
            samples = [(image, target) for image, (_, target) in zip(images, samples)]
        return python_stage.collate(samples, config.collate_fn)

    def _finish_batch(self, batch: Any, ids: "torch.Tensor", epoch: int, with_ids: bool) -> Any:
        """Pinning, the batch transform and the item ids, in the loop's
        process, on the collated batch."""
        config = self.config
        if config.pin:
            batch = pin_tensors(batch)
        if config.batch_transform is not None:
            batch = tuple(config.batch_transform(
                *batch, rng=batch_ops.batch_rng(config.seed, epoch, ids)))
        if with_ids:
            batch = (tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)) + (ids,)
        return batch

    def _raise_sample_failure(self, failure: python_stage.SampleFailure) -> None:
        """A sample's Python part raised: the error in the loop, naming the
        item's file (or shard member) and with its original traceback."""
        python_stage.raise_failure(failure, self.session.item_path(failure.item),
                                   failure.__cause__)

    def _worker_pool(self, walk: EpochPass) -> worker_pool.WorkerPool:
        """Worker processes for the pass, started in torch's default
        multiprocessing context unless ``multiprocessing_context=`` names
        another: the loader's own for main passes with
        ``persistent_workers``, else new ones for this pass."""
        if walk.main and self.pool is not None:
            return self.pool
        import torch.multiprocessing
        config = self.config
        context = config.multiprocessing_context
        if context is None or isinstance(context, str):
            context = torch.multiprocessing.get_context(context)
        pool = worker_pool.WorkerPool(config.stage, config.collate_fn, config.num_workers,
                                      context, config.worker_init_fn,
                                      config.prefetch_factor * config.num_workers, config.fields,
                                      config.timeout, self.session.item_path)
        if walk.main and config.persistent_workers:
            self.pool = pool
        return pool
