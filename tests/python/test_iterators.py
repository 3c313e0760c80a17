"""Several iterators over one galley.DataLoader, as torch allows them: each
iter() is a pass of its own; an abandoned one stops galleyd's work for it;
nothing galleyd prepares is thrown away unread in a loop; skipped files warn
once per epoch; counters after the last epoch open no job; and a process
whose thread waits in the client when Python exits still exits cleanly.

galleyd's status counts the batches it prepared and those no consumer took
(``batches``: ``prepared``, ``unread``); every test that reads them runs its
own galleyd, so no other test's jobs are counted.
"""

import os
import platform
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import pytest
import torch
import torchvision

import galley
from galley import transforms as T

from conftest import ROOT, start_daemon, stop_daemon, write_folder

FIXED = T.Compose([T.Resize(40), T.CenterCrop(32)])
DEADLINE_S = 30.0  # bounds a hang only; every wait below ends on an event


class IndexedFolder(torch.utils.data.Dataset):
    """torchvision's ImageFolder listing, yielding (index, label): torch's
    side of a comparison of which items each pass yields."""

    def __init__(self, root):
        self.samples = torchvision.datasets.ImageFolder(str(root)).samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        return index, self.samples[index][1]


def wait_for(condition, what):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def open_job_ids(daemon):
    return {job["job_id"] for job in daemon.query("jobs")["jobs"]}


def settled_totals(daemon, root):
    """galleyd's batch totals once every job has closed and every batch it
    was preparing is done: a probe job is served after any wave already
    under way (waves run one after the other). The probes' own batches, two
    each, both taken, are left out of the figures."""
    wait_for(lambda: not open_job_ids(daemon), "every job to close")
    client = galley._galley.Client(daemon.socket, 30.0)
    probe = client.open_job({"dataset": str(root), "batch_size": 1, "prefetch": 1,
                             "transform": T.build_spec(FIXED, None, "NCHW")})
    # Both slots held, for good: galleyd lists a job as closed a moment
    # before its scheduler forgets it, and would fill a slot freed meanwhile.
    daemon.probe_batches = getattr(daemon, "probe_batches", [])
    daemon.probe_batches += [probe.next(DEADLINE_S), probe.next(DEADLINE_S)]
    probe.close()
    wait_for(lambda: not open_job_ids(daemon), "the probe job to close")
    daemon.probes = getattr(daemon, "probes", 0) + 1
    totals = daemon.query("status")["batches"]
    return totals["prepared"] - 2 * daemon.probes, totals["unread"]


@pytest.fixture
def own_daemon(tmp_path):
    root = tmp_path / "data"
    write_folder(root, classes=3, per_class=20, sizes=(40, 60), seed=11)
    daemon = start_daemon(tmp_path)
    yield daemon, root
    stop_daemon(daemon)


def test_a_peek_inside_the_loop_is_a_pass_of_its_own_as_in_torch(own_daemon):
    daemon, root = own_daemon
    reference = torch.utils.data.DataLoader(IndexedFolder(root), batch_size=7)
    torch_outer, torch_peeks = [], []
    for ids, _labels in reference:
        torch_outer.append(ids.tolist())
        peek_ids, peek_labels = next(iter(reference))
        torch_peeks.append(peek_labels.tolist())

    loader = galley.DataLoader(root, batch_size=7, prefetch=2, transform=FIXED,
                               socket=daemon.socket)
    slots = loader.prefetch + 1
    outer, peeks, first = [], [], None
    for images, _labels, ids in loader.iter_with_ids():
        outer.append(ids.tolist())
        peek_images, peek_labels = next(iter(loader))  # logging a few images
        peeks.append(peek_labels.tolist())
        first = images.clone() if first is None else first
        assert torch.equal(peek_images, first), "a peek is the first batch of a fresh pass"
        del peek_images
    assert outer == torch_outer and len(outer) == len(loader) == 9
    assert peeks == torch_peeks
    assert loader.completed_epochs == 1
    loader.close()

    prepared, unread = settled_totals(daemon, root)
    delivered = 2 * len(outer)
    # Every batch galleyd prepared was read, or counted unread: at most a
    # ring's worth for each of the 9 peeks, and for the loop's job (which
    # went on with the next epoch until close()).
    print(f"\npeek in the loop: prepared {prepared}, delivered {delivered}, unread {unread}")
    assert prepared - unread == delivered
    assert unread <= (len(peeks) + 1) * slots


def test_zip_of_a_loader_with_itself_yields_what_torch_does(own_daemon):
    daemon, root = own_daemon
    reference = torch.utils.data.DataLoader(IndexedFolder(root), batch_size=8)
    torch_pairs = [(a.tolist(), b.tolist()) for (a, _), (b, _) in zip(reference, reference)]

    loader = galley.DataLoader(root, batch_size=8, prefetch=2, transform=FIXED,
                               socket=daemon.socket)
    pairs = [(a.tolist(), b.tolist())
             for (_, _, a), (_, _, b) in zip(loader.iter_with_ids(), loader.iter_with_ids())]
    assert pairs == torch_pairs and len(pairs) == len(loader) == 8
    assert loader.completed_epochs == 1  # the second iterator is not the loop's epoch
    # A shuffled zip: two independent passes over different epochs, each
    # every item once.
    shuffled = galley.DataLoader(root, batch_size=8, shuffle=True, seed=4, transform=FIXED,
                                 socket=daemon.socket)
    first, second = [], []
    for (_, _, a), (_, _, b) in zip(shuffled.iter_with_ids(), shuffled.iter_with_ids()):
        first += a.tolist()
        second += b.tolist()
    assert sorted(first) == sorted(second) == list(range(60))
    assert first != second
    loader.close()
    shuffled.close()

    prepared, unread = settled_totals(daemon, root)
    print(f"\nzip: prepared {prepared}, delivered {4 * 8}, unread {unread}")
    assert prepared - unread == 4 * 8
    # What each loop's job had prefetched of its next epoch when it closed.
    assert unread <= (loader.prefetch + 1) + (shuffled.prefetch + 1)


@pytest.mark.parametrize("how", ["break", "del", "close"])
def test_an_abandoned_iterator_stops_galleyds_work_for_it(own_daemon, how):
    daemon, root = own_daemon
    loader = galley.DataLoader(root, batch_size=4, prefetch=3, shuffle=True, transform=FIXED,
                               socket=daemon.socket)
    slots = loader.prefetch + 1
    if how == "break":
        for _images, _labels in loader:
            job_id, = open_job_ids(daemon)
            started = time.monotonic()
            break
    else:
        iterator = iter(loader)
        next(iterator)
        job_id, = open_job_ids(daemon)
        started = time.monotonic()
        if how == "del":
            del iterator  # garbage collected
        else:
            iterator.close()
    wait_for(lambda: job_id not in open_job_ids(daemon), "the abandoned job to close")
    closed_after_ms = (time.monotonic() - started) * 1000
    print(f"\n{how}: galleyd closed the job {closed_after_ms:.1f} ms after the iterator was "
          f"abandoned")
    prepared, unread = settled_totals(daemon, root)
    assert prepared - unread == 1, "only the batch the loop took was read"
    assert unread <= slots
    # Nothing more is prepared for it once it is closed: a second probe finds
    # only itself.
    assert settled_totals(daemon, root) == (prepared, unread)
    # The next loop is a pass of its own, from the next epoch.
    assert sum(1 for _ in loader) == len(loader)
    loader.close()


def test_the_loop_resumes_from_its_own_state_whatever_peeks_ran(own_daemon, tmp_path):
    daemon, root = own_daemon

    def make():
        return galley.DataLoader(root, batch_size=6, shuffle=True, seed=9, transform=FIXED,
                                 socket=daemon.socket)

    loader = make()
    before = []
    for step, (_images, _labels, ids) in enumerate(loader.iter_with_ids()):
        before += ids.tolist()
        next(iter(loader))  # a peek, started and dropped inside the loop
        if step == 3:
            state = loader.state_dict()
            break
    assert state["epoch"] == 0 and state["batches_yielded"] == 4
    loader.close()
    resumed = make()
    resumed.load_state_dict(state)
    after = [i for _x, _y, ids in resumed.iter_with_ids() for i in ids.tolist()]
    assert sorted(before + after) == list(range(60))
    assert resumed.completed_epochs == 1
    resumed.close()


def test_a_skipped_file_warns_once_per_epoch_naming_it(daemon, workdir):
    root = workdir / "one_broken"
    write_folder(root, classes=2, per_class=6, sizes=(40, 60), seed=12)
    broken = root / "class_01" / "broken.jpg"
    broken.write_bytes(b"\xff\xd8\xff\xe0 not a whole JPEG")
    loader = galley.DataLoader(root, batch_size=4, shuffle=True, epochs=2, transform=FIXED,
                               socket=daemon.socket)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            for _batch in loader:
                pass
    ours = [w for w in caught if "could not be read or decoded" in str(w.message)]
    assert [w.category for w in ours] == [UserWarning, UserWarning]
    for epoch, w in enumerate(ours):
        text = str(w.message)
        assert f"1 sample(s) of epoch {epoch}" in text and str(broken) in text, text
        assert w.filename == __file__, "the warning points at the loop"
    assert loader.skipped == 2
    assert loader.skipped_files == [str(broken)]
    loader.close()


def test_stats_after_the_last_epoch_open_no_job_and_keep_the_final_counters(own_daemon):
    daemon, root = own_daemon
    loader = galley.DataLoader(root, batch_size=8, prefetch=4, epochs=1, transform=FIXED,
                               socket=daemon.socket)
    batches = sum(1 for _ in loader)
    wait_for(lambda: not open_job_ids(daemon), "the job to close after its last epoch")
    opened = daemon.query("status")["jobs_opened"]
    job = loader.stats()["job"]
    assert (job["batches"], job["samples"], job["epochs_completed"]) == (batches, 60, 1)
    assert job["batches_unread"] == 0
    assert (len(loader), loader.classes, loader.info["dataset_size"]) == (
        8, ["class_00", "class_01", "class_02"], 60)
    assert sum(1 for _ in loader) == 0  # epochs=1: done
    status = daemon.query("status")
    assert status["jobs_opened"] == opened and status["jobs"] == 0, "no job opened after the end"
    # galleyd prepared exactly the epoch: nothing past its last batch.
    assert status["batches"] == {"prepared": batches, "unread": 0}
    loader.close()
    assert loader.stats()["job"]["batches"] == batches


# x86-64 system call numbers, as /proc/<pid>/task/<tid>/syscall shows them.
POLL = ("7", "271")  # poll, ppoll
SLEEP = ("35", "230")  # nanosleep, clock_nanosleep

CHILD = textwrap.dedent("""
    import sys, threading, time
    import galley
    from galley import transforms as T

    client = galley._galley.Client(sys.argv[1], 30.0)
    job = client.open_job({"dataset": sys.argv[2], "batch_size": 2, "prefetch": 1,
                           "transform": T.build_spec(T.Resize([16, 16]), None, "NCHW")})
    POLL, SLEEP = %r, %r

    def syscall(thread, open=open):  # builtins are gone late in finalization
        with open(f"/proc/self/task/{thread.native_id}/syscall") as f:
            return f.read().split()[0]

    class CloseAtExit:
        # Cleared with the module's globals while Python finalizes: closing
        # the job wakes the thread waiting in job.next, which then comes
        # back for the GIL; this waits until it has come back and waits for
        # the exit (a thread CPython ended instead aborts the process).
        def __init__(self, job, thread):
            self.job, self.thread = job, thread
            # What __del__ needs, kept here: the module's globals and the
            # builtins are cleared before it runs.
            self.syscall, self.sleep, self.stderr = syscall, time.sleep, sys.stderr
            self.sleeping, self.gone = SLEEP, FileNotFoundError

        def __del__(self):
            self.job.close()
            try:
                while self.syscall(self.thread) not in self.sleeping:
                    self.sleep(0.001)
            except self.gone:
                self.stderr.write("the thread was ended\\n")

    print("opened", flush=True)
    sys.stdin.readline()  # galleyd is stopped now: no batch will come
    thread = threading.Thread(target=job.next, args=(3600,), daemon=True)
    thread.start()
    while syscall(thread) not in POLL:  # waiting in job.next, without the GIL
        time.sleep(0.001)
    closer = CloseAtExit(job, thread)
    print("exiting", flush=True)
""" % (POLL, SLEEP))


@pytest.mark.skipif(platform.machine() != "x86_64", reason="reads x86-64 system call numbers")
def test_a_thread_waiting_in_the_client_lets_python_exit_cleanly(tmp_path):
    root = tmp_path / "data"
    write_folder(root, classes=1, per_class=4, sizes=(20, 30))
    daemon = start_daemon(tmp_path)
    try:
        child = subprocess.Popen([sys.executable, "-c", CHILD, daemon.socket, str(root)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
        assert child.stdout.readline() == "opened\n"
        daemon.proc.send_signal(signal.SIGSTOP)
        try:
            out, err = child.communicate("go\n", timeout=DEADLINE_S)
        finally:
            daemon.proc.send_signal(signal.SIGCONT)
        assert out == "exiting\n"
        assert "terminate called" not in err, err
        assert child.returncode == 0 and err == "", err
    finally:
        stop_daemon(daemon)
