"""Worker processes that run a job's Python part (``num_workers > 0``).

As torch's DataLoader does, each worker makes whole batches: it runs the
transform's tail (galley.python_stage) on every sample of a batch, collates
them, and sends the batch back through a ``torch.multiprocessing`` queue,
whose pickler moves its tensors to shared memory. Batches go to the
workers round-robin and come out in order.

How a worker gets galleyd's output: the main process copies each batch it
receives from the job's ring into a *staging* slot, one of a few torch
shared-memory tensors made before the workers start (a forked worker
inherits their mapping, a spawned one is given them once), and hands the
slot's index to a worker. The ring slot goes back to galleyd as soon as the
copy is made, so the daemon keeps preparing while the workers run the
Python part; a staging slot is free again once its batch's result is in.
One memcpy per batch costs far less than the Python part it feeds
(bench/compare_pytorch.py's ``recipe_py`` scenarios measure both); a worker
that mapped the ring itself would hold ring slots for the whole of the
Python part, starving galleyd of slots.

A worker that dies (killed, or a crash in native code) is noticed within
half a second of the main process waiting for a batch: the loop raises
naming its pid and exit status, never hangs. A worker whose parent died
exits within a second.

Used by the thread that iterates the loader.
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
from multiprocessing.reduction import ForkingPickler
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple

from . import python_stage

if TYPE_CHECKING:
    from .fields import FieldPlan

__all__ = ["WorkerPool", "WorkerDied"]

_POLL_SECONDS = 0.5  # how often a waiting main process checks its workers


class WorkerDied(RuntimeError):
    """A worker process exited while the loop waited on it."""


def _act_as_torch_worker(index: int, num_workers: int, seed: int) -> None:
    """Makes ``torch.utils.data.get_worker_info()`` answer in the worker as
    in torch's: the user's code may ask it, and ``default_collate`` then
    builds the batch in shared memory at once, so that sending it to the
    main process copies nothing more."""
    try:
        from torch.utils.data._utils import worker as torch_worker
        torch_worker._worker_info = torch_worker.WorkerInfo(
            id=index, num_workers=num_workers, seed=seed + index, dataset=None)
    except Exception:  # a torch without it: only the copy is lost
        pass


def _worker_loop(index: int, num_workers: int, stage: python_stage.SampleStage,
                 collate_fn: Optional[Callable[[List[Any]], Any]], staging: Any,
                 tasks: Any, results: Any, worker_init_fn: Optional[Callable[[int], None]],
                 parent: int, field_plan: "Optional[FieldPlan]" = None) -> None:
    """One worker: batches from ``tasks`` until told to stop (None) or its
    parent is gone."""
    import torch
    torch.set_num_threads(1)  # as torch's workers: the cores are the workers'
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    _act_as_torch_worker(index, num_workers, stage.seed)
    if worker_init_fn is not None:
        worker_init_fn(index)
    where = f"in worker process {index} (pid {os.getpid()})"
    while True:
        try:
            task = tasks.get(timeout=1.0)
        except queue.Empty:
            if os.getppid() != parent:
                return
            continue
        if task is None:
            return
        sequence, slot, count, labels, ids, epoch, fields = task
        try:
            samples = stage.run(staging[slot][:count], labels, ids, epoch, where)
            if field_plan is None:
                batch = python_stage.collate(samples, collate_fn)
            else:
                batch = field_plan.finish([image for image, _ in samples], fields, ids,
                                          collate_fn)
            # Pickled here, not in the queue's feeder thread, where a failure
            # (a result that cannot be pickled, a tensor whose memory cannot
            # be shared) would only be printed and the loop would wait on.
            results.put(bytes(ForkingPickler.dumps((sequence, slot, batch, None))))
        except python_stage.SampleFailure as failure:
            results.put(bytes(ForkingPickler.dumps((sequence, slot, None, _portable(failure)))))
        except Exception as error:  # collate_fn, or a batch that cannot be sent
            import traceback
            failure = python_stage.SampleFailure(
                int(ids[0]) if ids else -1, type(error), str(error), traceback.format_exc(),
                where, whole_batch=True)
            results.put(bytes(ForkingPickler.dumps((sequence, slot, None, _portable(failure)))))


def _portable(failure: python_stage.SampleFailure) -> python_stage.SampleFailure:
    """The failure with an exception type the main process can unpickle
    (a class defined where it cannot be found becomes RuntimeError)."""
    try:
        pickle.loads(pickle.dumps(failure.error_type))
        return failure
    except Exception:
        return python_stage.SampleFailure(failure.item, RuntimeError, failure.message,
                                          failure.formatted, failure.where,
                                          failure.whole_batch)


class WorkerPool:
    """``num_workers`` processes and their staging slots, for one pass over
    an epoch (or, with persistent workers, for the loader's life).

    ``context`` is a multiprocessing context (torch's default unless the
    loader was given ``multiprocessing_context=``); ``depth`` batches are
    in flight at most (torch's ``prefetch_factor * num_workers``).
    """

    def __init__(self, stage: python_stage.SampleStage,
                 collate_fn: Optional[Callable[[List[Any]], Any]], num_workers: int,
                 context: Any, worker_init_fn: Optional[Callable[[int], None]],
                 depth: int, field_plan: "Optional[FieldPlan]" = None) -> None:
        self._stage = stage
        self._field_plan = field_plan  # a job's fields=, decoded with its images
        self._collate_fn = collate_fn
        self._num_workers = int(num_workers)
        self._context = context
        self._worker_init_fn = worker_init_fn
        self._depth = max(int(depth), self._num_workers)
        self._staging: Any = None  # [depth, *batch shape], made at the first batch
        self._workers: List[Any] = []
        self._tasks: List[Any] = []
        self._results: Any = None
        self._sequence = 0  # batches handed out, ever: a result's key
        self._closed = False

    def _start(self, images: Any) -> None:
        """Starts the workers, with staging slots of the first batch's
        shape (galleyd's output has one shape for the job's life)."""
        import torch
        self._staging = torch.empty((self._depth,) + tuple(images.shape),
                                    dtype=images.dtype).share_memory_()
        self._results = self._context.Queue()
        for index in range(self._num_workers):
            tasks = self._context.Queue()
            worker = self._context.Process(
                target=_worker_loop, daemon=True,
                args=(index, self._num_workers, self._stage, self._collate_fn, self._staging, tasks,
                      self._results, self._worker_init_fn, os.getpid(), self._field_plan))
            worker.start()
            self._workers.append(worker)
            self._tasks.append(tasks)

    @property
    def pids(self) -> List[int]:
        return [worker.pid for worker in self._workers]

    @property
    def alive(self) -> bool:
        """Not closed, and no worker has exited."""
        return not self._closed and all(w.exitcode is None for w in self._workers)

    def run(self, received: Iterator[Tuple[Any, Any]], epoch: int,
            on_failure: Callable[[python_stage.SampleFailure], None]) -> Iterator[Tuple[Any, Any]]:
        """``(tag, batch)`` for each ``(tag, (images, labels, ids, fields))`` of
        ``received``, in order; a batch without samples (``images`` None)
        passes through as ``(tag, None)``. ``on_failure`` raises a worker's
        SampleFailure in the loop when its batch is due."""
        # A pass left early leaves its batches' results behind: they are
        # older than this pass's first sequence and dropped.
        first = self._sequence
        pending: Dict[int, Tuple[Any, Optional[int]]] = {}  # sequence -> (tag, slot)
        order: List[int] = []  # sequences not yet yielded, oldest first
        done: Dict[int, Tuple[Any, Any]] = {}  # (batch, failure) in before their turn
        free = list(range(self._depth))
        source = iter(received)
        exhausted = False
        while True:
            while not exhausted and free:
                try:
                    tag, (images, labels, ids, fields) = next(source)
                except StopIteration:
                    exhausted = True
                    break
                sequence = self._sequence
                self._sequence += 1
                order.append(sequence)
                if images is None:
                    pending[sequence] = (tag, None)
                    done[sequence] = (None, None)
                    continue
                if self._staging is None:
                    self._start(images)
                slot = free.pop()
                count = images.shape[0]
                self._staging[slot][:count].copy_(images)
                del images  # the ring slot goes back to galleyd now
                pending[sequence] = (tag, slot)
                self._tasks[sequence % self._num_workers].put(
                    (sequence, slot, count, labels.tolist(), ids.tolist(), epoch, fields))
            if not order:
                return
            head = order[0]
            while head not in done:
                sequence, slot, batch, failure = self._next_result()
                if sequence >= first:
                    done[sequence] = (batch, failure)
            order.pop(0)
            tag, slot = pending.pop(head)
            if slot is not None:
                free.append(slot)
            batch, failure = done.pop(head)
            if failure is not None:  # raised in its turn, as torch does
                on_failure(failure)
            yield tag, batch

    def _next_result(self) -> Tuple[int, int, Any, Any]:
        """The next result from any worker; raises WorkerDied when a worker
        exited instead of answering."""
        while True:
            try:
                return pickle.loads(self._results.get(timeout=_POLL_SECONDS))
            except queue.Empty:
                pass
            for index, worker in enumerate(self._workers):
                if worker.exitcode is not None:
                    code = worker.exitcode
                    how = (f"killed by signal {signal.Signals(-code).name}" if code < 0
                           else f"exit code {code}")
                    self.close()
                    raise WorkerDied(
                        f"galley.DataLoader worker process {index} (pid {worker.pid}) exited "
                        f"unexpectedly ({how}) while preparing a batch; the epoch cannot go "
                        f"on. If it ran out of memory, lower num_workers or batch_size")

    def close(self) -> None:
        """Stops the workers (at once for those that do not stop when told)."""
        self._closed = True
        for tasks in self._tasks:
            try:
                tasks.put(None)
            except Exception:
                pass
        for worker in self._workers:
            worker.join(timeout=5.0)
            if worker.exitcode is None:
                worker.kill()
                worker.join()
        for q in self._tasks + ([self._results] if self._results is not None else []):
            q.cancel_join_thread()
            q.close()
        self._workers, self._tasks, self._results = [], [], None
        self._staging = None
