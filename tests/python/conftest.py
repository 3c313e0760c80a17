"""pytest fixtures: a real galleyd on a temporary socket and small real JPEG
ImageFolder datasets. The daemon is stopped and everything removed at the end."""

import multiprocessing
import os
import pathlib
import signal
import socket as socketlib
import subprocess
import time

import numpy as np
import pytest
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
# A test that forgets socket= must fail, not start a daemon for the user
# (tests/python/test_autostart.py turns autostart on in its own processes).
os.environ["GALLEY_AUTOSTART"] = "0"
os.environ.pop("GALLEY_SOCKET", None)
GALLEYD = os.environ.get("GALLEYD", str(ROOT / "build" / "server" / "daemon" / "galleyd"))


def write_folder(root, classes, per_class, sizes=(80, 160), seed=0):
    """An ImageFolder of real JPEGs with smooth random content."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for c in range(classes):
        d = root / f"class_{c:02d}"
        d.mkdir(exist_ok=True)
        for i in range(per_class):
            h, w = rng.integers(sizes[0], sizes[1] + 1, size=2)
            small = rng.integers(0, 256, size=(max(2, h // 8), max(2, w // 8), 3), dtype=np.uint8)
            image = Image.fromarray(small).resize((int(w), int(h)), Image.BICUBIC)
            path = d / f"{i:04d}.jpg"
            image.save(path, quality=90)
            paths.append(path)
    return paths


def free_port():
    """A TCP port on loopback that nothing listens on now (for gloo)."""
    with socketlib.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, socket, proc, log):
        self.socket = socket
        self.proc = proc
        self.log = log

    def query(self, what="status"):
        import galley
        return galley.query(what, socket=self.socket)


# What a test's galleyd is given instead of measuring the node for its cache
# planner before it listens and committing its cache's memory ahead of use
# (docs/cache.md): a current core's rates, so that the planner plans as on a
# real node, and memory committed on first use. Each start then spares half a
# second of a core and a gigabyte of page faults on a machine the tests
# share. Tests about the cache itself pass probe_and_prefault=True.
QUICK_START = {"--decode-per-core-per-s": "400", "--augment-per-core-per-s": "4000",
               "--memory-bytes-per-s": "5e9", "--cache-prefault": "false"}


def start_daemon(directory, *extra, probe_and_prefault=False):
    """galleyd on directory/galleyd.sock, serving what is under `directory`,
    with its shard indexes there too (not in the user's own cache)."""
    socket = str(directory / "galleyd.sock")
    log = open(directory / "galleyd.log", "w")
    # GALLEY_TEST_LOG_LEVEL=trace logs every wave's decisions into galleyd.log.
    level = os.environ.get("GALLEY_TEST_LOG_LEVEL", "warn")
    defaults = {"--tar-index-dir": str(directory / "tar-index")}
    if not probe_and_prefault:
        defaults.update(QUICK_START)
    # galleyd refuses a flag given twice: the test's own flags win.
    given = {arg.split("=", 1)[0] for arg in extra}
    added = [arg for flag, value in defaults.items() if flag not in given for arg in (flag, value)]
    proc = subprocess.Popen([GALLEYD, "--socket", socket, "--allowed-root", str(directory),
                             "--log-level", level, *added, *extra],
                            stdout=log, stderr=subprocess.STDOUT)
    # Ready once a connection is accepted: the socket file appears at bind(),
    # before listen(), and a connect in between is refused. The deadline
    # only bounds a hang: a loaded machine may take seconds to start one.
    deadline = time.monotonic() + 60
    while True:
        if os.path.exists(socket):
            with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as probe:
                if probe.connect_ex(socket) == 0:
                    break
        if proc.poll() is not None:
            raise RuntimeError(f"galleyd exited with {proc.returncode}")
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"galleyd did not accept connections on {socket} in 60 s")
        time.sleep(0.01)
    return Daemon(socket, proc, log)


def stop_daemon(daemon):
    daemon.proc.send_signal(signal.SIGTERM)
    try:
        daemon.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        daemon.proc.kill()
        daemon.proc.wait()
    daemon.log.close()


# Tests that run several jobs at once run each in a process of its own, as
# users' jobs are. Those processes come from one fork server that imported
# torch, torchvision and galley once: a spawned process imports them again
# (several CPU seconds each, most of what such a test costs), and, like
# spawn, the fork server copies no thread of the test process.
_JOB_CONTEXT = multiprocessing.get_context("forkserver")
_JOB_CONTEXT.set_forkserver_preload(["torch", "torchvision", "galley"])


def job_context():
    """The multiprocessing context whose Barrier, Queue and Event the jobs
    of job_process() share."""
    return _JOB_CONTEXT


def _as_a_script(target, args):
    # A process from the fork server would start its own children (the
    # job's DataLoader workers) from a fork server too; a user's script
    # starts them the platform's default way.
    multiprocessing.set_start_method(multiprocessing.get_all_start_methods()[0], force=True)
    target(*args)


def job_process(target, args):
    """A job's process (not started): target(*args) with the start method a
    user's script has."""
    return _JOB_CONTEXT.Process(target=_as_a_script, args=(target, args))


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("galley")


@pytest.fixture(scope="session")
def daemon(workdir):
    d = start_daemon(workdir)
    yield d
    stop_daemon(d)
    assert d.proc.returncode == 0, "galleyd did not shut down cleanly"


@pytest.fixture(scope="session")
def folder(workdir):
    """4 classes x 15 JPEGs of 80..160 px."""
    root = workdir / "folder"
    write_folder(root, classes=4, per_class=15)
    return root


@pytest.fixture(scope="session")
def tiny_folder(workdir):
    """12 tiny JPEGs: cheap epochs for statistical tests."""
    root = workdir / "tiny"
    write_folder(root, classes=3, per_class=4, sizes=(8, 12), seed=5)
    return root
