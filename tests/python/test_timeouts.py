"""timeout= as torch's DataLoader has it: a batch not ready within `timeout`
seconds raises RuntimeError("DataLoader timed out after N seconds"), here
with the batch, the worker and the item it was on; no worker process
outlives the pass, its iterator or its process. A batch late from galleyd
(the daemon-side wait) raises the same way; a slow transform within the
timeout delivers everything."""

import multiprocessing
import os
import re
import select
import signal
import threading
import time

import pytest
import torch
from torchvision import transforms as TV

import galley

from conftest import job_context, job_process, start_daemon, stop_daemon, write_folder

# DataLoader arguments, torch's worker info and its wording: also under the oldest torch.
pytestmark = pytest.mark.compat

FIRST = 20  # the loops below start at item 20, so that no id in a message is 0 by chance


def worker_id():
    info = torch.utils.data.get_worker_info()
    return None if info is None else info.id


def item_path(folder, item):
    import torchvision
    return torchvision.datasets.ImageFolder(str(folder)).samples[item][0]


def gone(pid):
    """The process has exited (and been reaped, or is a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_for_exit(pidfds):
    """Waits on each pidfd (readable once its process has exited), with a
    bound that only keeps a broken build from hanging the run."""
    for fd in pidfds:
        readable, _, _ = select.select([fd], [], [], 120)
        assert readable, "a worker process outlived its parent"
        os.close(fd)


def stick(released):
    """Blocks for good unless `released` exists. (Not a multiprocessing
    Event: setting one that a killed process waited on blocks the setter.)"""
    if not released.exists():
        threading.Event().wait()


def pidfd(pid):
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:  # already gone
        return None


@pytest.mark.parametrize("where,persistent", [("transform", False), ("collate_fn", True)])
def test_a_worker_stuck_on_an_item_times_out_naming_it_and_leaves_no_worker(
        daemon, folder, tmp_path, where, persistent):
    """Worker 0 blocks for good on its first batch, in the transform of its
    first item or in collate_fn. The loop raises torch's RuntimeError
    within timeout=2, naming the batch, the worker and what it was on; the
    workers are gone; the next loop runs a whole epoch on new workers."""
    released = tmp_path / "released"  # made after the timeout, for the next loop
    ran_in = tmp_path / "pids"
    ran_in.mkdir()

    def op(image):
        (ran_in / str(os.getpid())).touch()  # the processes that ran it
        if where == "transform" and worker_id() == 0:
            stick(released)
        return image

    def collate(samples):
        if where == "collate_fn" and worker_id() == 0:
            stick(released)
        return torch.utils.data.default_collate(samples)

    loader = galley.DataLoader(folder, batch_size=4, num_workers=2, timeout=2,
                               persistent_workers=persistent, collate_fn=collate,
                               indices=range(FIRST, 60), socket=daemon.socket,
                               transform=[TV.Resize([16, 16]), TV.PILToTensor(), TV.Lambda(op)])
    with pytest.raises(RuntimeError) as raised:
        for _ in loader:
            pass
    message = str(raised.value)
    assert isinstance(raised.value, galley.Timeout)
    path = re.escape(item_path(folder, FIRST))
    doing = (rf"running the transform of item {FIRST} \({path}\)" if where == "transform" else
             rf"collating or sending the batch whose first item is {FIRST} \({path}\)")
    named = re.match(rf"DataLoader timed out after 2 seconds: the batch whose first item is "
                     rf"{FIRST} \({path}\) was not back within it\. Its worker, worker process 0 "
                     rf"\(pid (\d+)\), was {doing}; worker process 1 \(pid (\d+)\) was ",
                     message)
    assert named, message
    assert "iterating the loader again starts a new pass with new workers" in message
    pids = {int(pid) for pid in named.groups()}
    ran = {int(p.name) for p in ran_in.iterdir()}  # worker 0, and worker 1 if it started
    assert len(pids) == 2 and int(named.group(1)) in ran and ran <= pids
    for pid in pids:
        assert gone(pid), f"worker {pid} survived the timeout"
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)

    released.touch()
    ids = [i for _x, _y, batch in loader.iter_with_ids() for i in batch.tolist()]
    assert ids == list(range(FIRST, 60))
    loader.close()


def test_a_slow_transform_within_the_timeout_delivers_every_batch(daemon, folder):
    """timeout bounds each batch, not the epoch: each worker sleeps 4 s in
    all, longer than timeout=3, in steps of 0.4 s, and every item comes."""
    def slow(image):
        time.sleep(0.4)
        return image

    loader = galley.DataLoader(folder, batch_size=1, num_workers=2, timeout=3,
                               indices=range(FIRST, FIRST + 20), socket=daemon.socket,
                               transform=[TV.Resize([16, 16]), TV.PILToTensor(), TV.Lambda(slow)])
    ids = [i for _x, _y, batch in loader.iter_with_ids() for i in batch.tolist()]
    assert ids == list(range(FIRST, FIRST + 20))
    loader.close()


def test_without_workers_the_python_part_is_not_bounded(daemon, folder):
    """num_workers=0: the transform's Python part runs in the loop's own
    process, which torch's timeout never bounds; each batch's part here
    sleeps 2.4 s, longer than timeout=2, and both batches come."""
    def slow(image):
        time.sleep(0.6)
        return image

    loader = galley.DataLoader(folder, batch_size=4, timeout=2, indices=range(FIRST, FIRST + 8),
                               socket=daemon.socket,
                               transform=[TV.Resize([16, 16]), TV.PILToTensor(), TV.Lambda(slow)])
    ids = [i for _x, _y, batch in loader.iter_with_ids() for i in batch.tolist()]
    assert ids == list(range(FIRST, FIRST + 8))
    loader.close()


def identity(image):
    return image


def thread_states(pid):
    """The scheduler state (R, S, D, T...) of each thread of process pid."""
    states = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as stat:
                states.append(stat.read().rsplit(")", 1)[1].split()[0])
        except FileNotFoundError:  # a thread that ended meanwhile
            pass
    return states


def wait_until_stopped(pid):
    """Returns once every thread of pid is stopped (state T); the bound only
    stops a hang."""
    deadline = time.monotonic() + 60
    while any(state != "T" for state in thread_states(pid)):
        assert time.monotonic() < deadline, f"galleyd's threads did not stop: {thread_states(pid)}"
        time.sleep(0.01)


@pytest.mark.parametrize("workers", [0, 2], ids=["galleyd-only", "workers"])
def test_a_stopped_galleyd_times_out_with_torchs_words(tmp_path, workers):
    """The daemon-side wait: galleyd stopped (SIGSTOP) mid-epoch prepares
    nothing more; the loop raises within timeout=2, naming galleyd, and
    once it runs again the next loop opens a new job and gets every item."""
    root = tmp_path / "data"
    write_folder(root, classes=3, per_class=20, sizes=(16, 24), seed=2)
    own = start_daemon(tmp_path)
    transform = ([TV.Resize([8, 8]), TV.PILToTensor(), TV.Lambda(identity)] if workers
                 else [TV.Resize([8, 8])])
    # 15 batches: more than the ring, the staging slots and the batch in
    # hand hold, so the loop must wait on the stopped daemon.
    loader = galley.DataLoader(str(root), batch_size=4, num_workers=workers, timeout=2,
                               prefetch=2, socket=own.socket, transform=transform)
    stopped = False
    try:
        batches = iter(loader)
        next(batches)
        os.kill(own.proc.pid, signal.SIGSTOP)
        stopped = True
        # The stop is done once every thread of galleyd has stopped; a thread
        # that was runnable takes the signal only when it next runs, which on
        # a loaded machine may be later than this loop's first reads.
        wait_until_stopped(own.proc.pid)
        # Counted, so that a loop that ends without the timeout says how far
        # it got (a short epoch would be a lost batch, not a slow daemon).
        received = []
        with pytest.raises(RuntimeError, match=rf"^DataLoader timed out after 2 seconds: galleyd "
                                               rf"\(pid {own.proc.pid}\) prepared no batch for "
                                               rf"this loop within it \(epoch 0, batch \d+ of "
                                               rf"15\)\.") as raised:
            for batch in batches:
                received.append(batch[1].tolist())
            pytest.fail(f"with galleyd stopped the loop ended after {len(received)} more "
                        f"batches ({received}) without timing out; its threads' states "
                        f"{thread_states(own.proc.pid)}")
        assert isinstance(raised.value, galley.Timeout)
        os.kill(own.proc.pid, signal.SIGCONT)
        stopped = False
        ids = sorted(i for _x, _y, batch in loader.iter_with_ids() for i in batch.tolist())
        assert ids == list(range(60))
        loader.close()
    finally:
        if stopped:
            os.kill(own.proc.pid, signal.SIGCONT)
        stop_daemon(own)


def test_a_stuck_worker_does_not_outlive_its_iterator(daemon, folder, tmp_path):
    """timeout=0 waits for ever, as torch's; an iterator closed while a
    worker is stuck still ends every worker."""
    stuck = multiprocessing.Event()
    ran_in = tmp_path / "pids"
    ran_in.mkdir()

    def op(image):
        (ran_in / str(os.getpid())).touch()
        if worker_id() == 1:
            stuck.set()
            threading.Event().wait()
        return image

    loader = galley.DataLoader(folder, batch_size=4, num_workers=2, socket=daemon.socket,
                               transform=[TV.Resize([16, 16]), TV.PILToTensor(), TV.Lambda(op)])
    batches = iter(loader)
    try:
        next(batches)  # worker 0's batch; worker 1 is stuck on the next
        assert stuck.wait(120)
        pids = {int(p.name) for p in ran_in.iterdir()}
        assert len(pids) == 2
        batches.close()
        for pid in pids:
            assert gone(pid), f"worker {pid} survived its iterator"
    finally:
        loader.close()


def run_stuck_job(socket, root, out, go):
    """A job whose workers each send their pid and stick for good on their
    first sample; its loop waits in a thread, and the process ends (returns,
    or is killed) when the test says."""
    def op(image):
        out.put(os.getpid())
        threading.Event().wait()
        return image

    loader = galley.DataLoader(root, batch_size=4, num_workers=2, socket=socket,
                               transform=[TV.Resize([8, 8]), TV.PILToTensor(), TV.Lambda(op)])
    threading.Thread(target=lambda: next(iter(loader)), daemon=True).start()
    go.wait()


@pytest.mark.parametrize("how", ["exits", "killed"])
def test_a_stuck_worker_does_not_outlive_its_process(daemon, folder, how):
    """The job's process exits (its interpreter's exit) or is killed by
    SIGKILL while both workers are stuck in the transform: neither worker
    survives it."""
    ctx = job_context()
    out, go = ctx.Queue(), ctx.Event()
    proc = job_process(run_stuck_job, (daemon.socket, str(folder), out, go))
    proc.start()
    try:
        pids = {out.get(timeout=120), out.get(timeout=120)}
        pidfds = [pidfd(pid) for pid in pids]
        if how == "killed":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            go.set()
        proc.join(120)
        assert proc.exitcode == (-signal.SIGKILL if how == "killed" else 0)
        wait_for_exit([fd for fd in pidfds if fd is not None])
        for pid in pids:
            assert gone(pid)
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()
