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
naming its pid and exit status, never hangs. With a ``timeout``, a batch
not back from its worker within it raises ``galley.Timeout`` with torch's
words, naming each worker and what it was on (each records the batch and
item it is working on in an array in shared memory), after the workers are
killed and joined. A worker whose parent died exits within a second, even one
stuck in the user's code.

Used by the thread that iterates the loader.
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
import threading
import time
from multiprocessing.reduction import ForkingPickler
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple

from . import _galley
from . import python_stage

if TYPE_CHECKING:
    from .fields import FieldPlan

__all__ = ["WorkerPool", "WorkerDied"]

_POLL_SECONDS = 0.5  # how often a waiting main process checks its workers
_PARENT_CHECK_SECONDS = 1.0  # how often a worker checks that its parent lives

# What a worker is doing, in its two words of the pool's progress array:
# (sequence of its batch, item id) while a sample's Python part runs, else
# one of these in place of the item id. A ctypes array, not a tensor: a
# store costs 0.1 us, a tensor's 5 us, paid for every sample.
_STARTING = -1  # imports and worker_init_fn, before its first batch
_COLLATING = -2  # collate_fn (or fields=), then sending the batch
_WAITING = -3  # between batches


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


def _exit_with_parent() -> None:
    """Ends the worker within a second of its parent's death, whatever its
    main thread is doing (a transform stuck for good included): a thread
    watches for the worker being reparented. The parent is the one it
    started with: the main process, or the fork server that started it
    (which exits with the main process)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_CHECK_SECONDS)
        os._exit(0)

    threading.Thread(target=watch, name="galley-parent-watch", daemon=True).start()


def _worker_loop(index: int, num_workers: int, stage: python_stage.SampleStage,
                 collate_fn: Optional[Callable[[List[Any]], Any]], staging: Any, progress: Any,
                 tasks: Any, results: Any, worker_init_fn: Optional[Callable[[int], None]],
                 field_plan: "Optional[FieldPlan]" = None) -> None:
    """One worker: batches from ``tasks`` until told to stop (None) or its
    parent is gone. ``progress[2 * index:2 * index + 2]`` records what it
    is on."""
    _exit_with_parent()
    import torch
    torch.set_num_threads(1)  # as torch's workers: the cores are the workers'
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle

    def record(sequence: int, doing: int) -> None:
        progress[2 * index], progress[2 * index + 1] = sequence, doing

    _act_as_torch_worker(index, num_workers, stage.seed)
    if worker_init_fn is not None:
        worker_init_fn(index)
    record(-1, _WAITING)
    where = f"in worker process {index} (pid {os.getpid()})"
    while True:
        task = tasks.get()
        if task is None:
            return
        sequence, slot, count, labels, ids, epoch, fields = task
        try:
            samples = stage.run(staging[slot][:count], labels, ids, epoch, where,
                                on_sample=lambda item: record(sequence, item))
            record(sequence, _COLLATING)
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
        record(sequence, _WAITING)


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
    in flight at most (torch's ``prefetch_factor * num_workers``);
    ``timeout`` (seconds, 0 for none) bounds the wait for each batch's
    result, as torch's DataLoader's does; ``item_path`` names an item's
    file in its message.
    """

    def __init__(self, stage: python_stage.SampleStage,
                 collate_fn: Optional[Callable[[List[Any]], Any]], num_workers: int,
                 context: Any, worker_init_fn: Optional[Callable[[int], None]],
                 depth: int, field_plan: "Optional[FieldPlan]" = None, timeout: float = 0.0,
                 item_path: Optional[Callable[[int], str]] = None) -> None:
        self._stage = stage
        self._field_plan = field_plan  # a job's fields=, decoded with its images
        self._collate_fn = collate_fn
        self._num_workers = int(num_workers)
        self._context = context
        self._worker_init_fn = worker_init_fn
        self._depth = max(int(depth), self._num_workers)
        self._timeout = float(timeout)
        self._item_path = item_path or (lambda item: "path unknown")
        self._staging: Any = None  # [depth, *batch shape], made at the first batch
        self._progress: Any = None  # 2 words per worker: what it is on (_worker_loop)
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
        self._progress = self._context.RawArray("q", [-1, _STARTING] * self._num_workers)
        self._results = self._context.Queue()
        for index in range(self._num_workers):
            tasks = self._context.Queue()
            worker = self._context.Process(
                target=_worker_loop, daemon=True,
                args=(index, self._num_workers, self._stage, self._collate_fn, self._staging,
                      self._progress, tasks, self._results, self._worker_init_fn,
                      self._field_plan))
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
        SampleFailure in the loop when its batch is due. A batch not back
        within the timeout raises galley.Timeout, the workers killed."""
        # A pass left early leaves its batches' results behind: they are
        # older than this pass's first sequence and dropped.
        first = self._sequence
        pending: Dict[int, Tuple[Any, Optional[int]]] = {}  # sequence -> (tag, slot)
        first_items: Dict[int, int] = {}  # sequence -> its batch's first item, for messages
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
                if len(ids):
                    first_items[sequence] = int(ids[0])
                self._tasks[sequence % self._num_workers].put(
                    (sequence, slot, count, labels.tolist(), ids.tolist(), epoch, fields))
            if not order:
                return
            head = order[0]
            # As torch's: the timeout bounds each wait for the batch due.
            deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
            while head not in done:
                result = self._next_result(deadline)
                if result is None:
                    self._time_out(head, first_items)
                sequence, slot, batch, failure = result
                if sequence >= first:
                    done[sequence] = (batch, failure)
            order.pop(0)
            first_items.pop(head, None)
            tag, slot = pending.pop(head)
            if slot is not None:
                free.append(slot)
            batch, failure = done.pop(head)
            if failure is not None:  # raised in its turn, as torch does
                on_failure(failure)
            yield tag, batch

    def _next_result(self, deadline: Optional[float]) -> Optional[Tuple[int, int, Any, Any]]:
        """The next result from any worker, or None once ``deadline`` (a
        ``time.monotonic()`` value; None: none) has passed; raises
        WorkerDied when a worker exited instead of answering."""
        while True:
            wait = _POLL_SECONDS
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            try:
                return pickle.loads(self._results.get(timeout=wait))
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
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def _time_out(self, head: int, first_items: Dict[int, int]) -> None:
        """Raises galley.Timeout for batch ``head``, which did not come back
        in time: torch's words first, then the batch, its worker and what
        each worker was on; the workers are killed and joined first, so
        none outlives the pass (the pool is closed)."""
        workers = [(index, worker.pid) for index, worker in enumerate(self._workers)]
        doing = [tuple(self._progress[2 * index:2 * index + 2])
                 for index in range(self._num_workers)]
        self.close(at_once=True)
        owner, pid = workers[head % self._num_workers]

        def batch(sequence: int) -> str:
            if sequence in first_items:
                item = first_items[sequence]
                return f"the batch whose first item is {item} ({self._item_path(item)})"
            return "a batch of a loop left earlier"

        def activity(sequence: int, item: int) -> str:
            if item == _STARTING:
                return "still starting (imports or worker_init_fn)"
            if item == _WAITING:
                return "waiting for a batch"
            if item == _COLLATING:
                return f"collating or sending {batch(sequence)}"
            return f"running the transform of item {item} ({self._item_path(item)})"

        others = "".join(f"; worker process {index} (pid {worker_pid}) was "
                         f"{activity(*doing[index])}"
                         for index, worker_pid in workers if index != owner)
        raise _galley.Timeout(
            f"DataLoader timed out after {self._timeout:g} seconds: {batch(head)} was not back "
            f"within it. Its worker, worker process {owner} (pid {pid}), was "
            f"{activity(*doing[owner])}{others}. The workers were stopped; iterating the loader "
            f"again starts a new pass with new workers. If the transform is only slow, raise "
            f"timeout= (0 waits as long as it takes)")

    def close(self, at_once: bool = False) -> None:
        """Stops the workers and waits for their end: those that do not stop
        within 5 s of being told are killed, and with ``at_once`` all are
        (their work is dropped)."""
        self._closed = True
        if at_once:
            for worker in self._workers:
                worker.kill()
        else:
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
        self._staging = self._progress = None
