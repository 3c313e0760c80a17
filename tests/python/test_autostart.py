"""A job that finds no daemon starts one for its user (docs/autostart.md).

Each test runs jobs as separate processes with their own XDG_RUNTIME_DIR (or
TMPDIR), so the daemons they start are theirs alone and stopped at the end."""

import json
import os
import pathlib
import signal
import stat
import struct
import subprocess
import sys
import textwrap
import time

import pytest

import galley
from galley import _autostart

from conftest import GALLEYD, write_folder

JOB = textwrap.dedent("""
    import json, sys, galley
    from galley import transforms as T
    loader = galley.DataLoader(sys.argv[1], batch_size=8, epochs=1,
                               transform=T.Compose([T.Resize(24), T.CenterCrop(24)]),
                               autostart=None if sys.argv[2] == "default" else sys.argv[2] == "on")
    ids = [i for _, _, batch in loader.iter_with_ids() for i in batch.tolist()]
    print(json.dumps({"ids": ids, "socket": galley.query("status")["socket"]}))
""")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("autostart") / "data"
    write_folder(root, classes=2, per_class=10, sizes=(24, 40), seed=3)
    return root


@pytest.fixture
def home(tmp_path):
    """An environment with no daemon: its own runtime and config folders."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    config = tmp_path / "config" / "galley"
    config.mkdir(parents=True)
    # A small daemon for tests: no cache, so no node probe at start.
    (config / "galleyd.toml").write_text("cache_bytes = 0\nlog_level = \"info\"\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("GALLEY_SOCKET", "GALLEY_AUTOSTART", "TMPDIR")}
    env.update(XDG_RUNTIME_DIR=str(run), XDG_CONFIG_HOME=str(tmp_path / "config"),
               GALLEYD=GALLEYD, GALLEY_IDLE_EXIT="600")
    yield env, run / "galley"
    for pid in daemons_serving(run / "galley" / "galleyd.sock"):
        os.kill(pid, signal.SIGKILL)


def daemons_serving(socket):
    """pids of galleyd processes started for this socket."""
    pids = []
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"galleyd") and str(socket).encode() in argv:
            pids.append(int(proc.name))
    return pids


def run_job(env, data, autostart="default"):
    return subprocess.run([sys.executable, "-c", JOB, str(data), autostart], env=env,
                          capture_output=True, text=True, timeout=120)


def wait_until(condition, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_four_jobs_at_once_start_exactly_one_daemon(home, data):
    env, folder = home
    env = dict(env, GALLEY_IDLE_EXIT="2")
    jobs = [subprocess.Popen([sys.executable, "-c", JOB, str(data), "default"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(4)]
    outputs = [job.communicate(timeout=120) for job in jobs]
    for job, (out, err) in zip(jobs, outputs):
        assert job.returncode == 0, err
        result = json.loads(out)
        assert sorted(result["ids"]) == list(range(20))  # one epoch, exactly once
        assert result["socket"] == str(folder / "galleyd.sock")
    started = [err for _, err in outputs if "galley: started galleyd" in err]
    assert len(started) == 1, [err for _, err in outputs]
    assert "galleyctl stop" in started[0]
    socket = folder / "galleyd.sock"
    info = os.stat(folder)
    assert info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700
    # Every daemon started for this folder logs there: exactly one did.
    log = (folder / "galleyd.log").read_text()
    assert log.count(" ready: ") == 1
    # No job for 2 s: the daemon exits and takes its socket with it.
    assert wait_until(lambda: not daemons_serving(socket) and not socket.exists())
    assert "exiting (--idle-exit)" in (folder / "galleyd.log").read_text()


def test_stale_socket_of_a_killed_daemon_is_replaced(home, data):
    env, folder = home
    assert run_job(env, data).returncode == 0
    socket = folder / "galleyd.sock"
    first, = daemons_serving(socket)
    os.kill(first, signal.SIGKILL)
    assert wait_until(lambda: not daemons_serving(socket))
    assert socket.exists()  # left behind by the killed daemon
    job = run_job(env, data)
    assert job.returncode == 0, job.stderr
    assert sorted(json.loads(job.stdout)["ids"]) == list(range(20))
    second, = daemons_serving(socket)
    assert second != first


def test_a_mistake_in_the_users_config_is_reported_naming_the_key(home, data):
    env, folder = home
    config = pathlib.Path(env["XDG_CONFIG_HOME"]) / "galley" / "galleyd.toml"
    config.write_text("cache_bytes = 0\nlog_level = \"verbose\"\n")
    job = run_job(env, data)
    assert job.returncode != 0
    message = job.stderr.strip().splitlines()[-1]
    assert message.startswith("galley.ServerUnavailable: could not start galleyd"), message
    assert (f"log_level (config {config} line 2): got 'verbose'; expected one of trace, debug, "
            "info, warn, error, critical, off") in message
    assert not daemons_serving(folder / "galleyd.sock")


def test_autostart_off_lists_the_sockets_tried(home, data):
    env, folder = home
    for job in (run_job(env, data, "off"), run_job(dict(env, GALLEY_AUTOSTART="0"), data)):
        assert job.returncode != 0
        message = job.stderr.strip().splitlines()[-1]
        assert message.startswith("galley.ServerUnavailable: no galleyd answers at")
        assert str(folder / "galleyd.sock") in message and "/run/galley/galleyd.sock" in message
        assert "galleyd --socket" in message and "autostart=True" in message
    assert not daemons_serving(folder / "galleyd.sock")


def test_temp_folder_of_another_user_or_too_open_is_refused(tmp_path, data):
    env = {k: v for k, v in os.environ.items()
           if k not in ("GALLEY_SOCKET", "GALLEY_AUTOSTART", "XDG_RUNTIME_DIR")}
    env.update(TMPDIR=str(tmp_path), GALLEYD=GALLEYD)
    folder = tmp_path / f"galley-{os.getuid()}"
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)  # nobody's
    job = run_job(env, data)
    assert job.returncode != 0
    assert "galley.AccessDenied" in job.stderr and "belongs to uid 65534" in job.stderr
    os.chown(folder, os.getuid(), os.getgid())
    folder.chmod(0o755)
    job = run_job(env, data)
    assert job.returncode != 0
    assert "mode 0755, wider than 0700" in job.stderr
    assert not (folder / "galleyd.sock").exists()


def test_another_user_is_refused_by_a_personal_daemon(tmp_path):
    # The folder is open here so that only the daemon's peer check stands
    # between the other user and the socket.
    shared = pathlib.Path("/tmp") / f"galley-peer-test-{os.getpid()}"
    shared.mkdir(mode=0o755, exist_ok=True)
    socket = shared / "galleyd.sock"
    try:
        subprocess.run([GALLEYD, "--socket", str(socket), "--owner-only", "--detach",
                        "--cache-bytes", "0", "--idle-exit", "30"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.chmod(socket, 0o666)
        probe = textwrap.dedent(f"""
            import json, socket, struct
            s = socket.socket(socket.AF_UNIX)
            s.connect({str(socket)!r})
            body = b'{{"protocol_version": {galley.protocol_version}, "client": "other"}}'
            try:  # the daemon may refuse before it reads the Hello
                s.sendall(struct.pack("<IHHII", 0x594C4C47, {galley.protocol_version}, 1, len(body), 1) + body)
            except BrokenPipeError:
                pass
            header = s.recv(16, socket.MSG_WAITALL)
            _, _, kind, length, _ = struct.unpack("<IHHII", header)
            print(kind, s.recv(length, socket.MSG_WAITALL).decode())
        """)
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              "/usr/bin/python3", "-c", probe],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        kind, body = out.stdout.split(" ", 1)
        assert int(kind) == 3  # Error
        error = json.loads(body)
        assert error["code"] == 3  # PermissionDenied
        assert "personal daemon" in error["message"] and "uid 65534" in error["message"]
        # Its owner is served.
        assert galley.query("status", socket=str(socket))["owner_only"] is True
    finally:
        for pid in daemons_serving(socket):
            os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not daemons_serving(socket))
        socket.unlink(missing_ok=True)
        shared.rmdir()


def test_a_system_daemon_is_used_instead_of_starting_one(home, data):
    env, folder = home
    # A private mount namespace whose /run is a fresh tmpfs holds the node's
    # service socket; the job must use it and start nothing.
    script = textwrap.dedent(f"""
        set -e
        mount -t tmpfs tmpfs /run
        mkdir -p /run/galley
        {GALLEYD} --socket /run/galley/galleyd.sock --detach --cache-bytes 0 \
            --allowed-root {data} >/dev/null 2>&1
        "$0" -c "$1" {data} default
        {pathlib.Path(GALLEYD).with_name("galleyctl")} --socket /run/galley/galleyd.sock stop
    """)
    job = subprocess.run(["unshare", "--map-root-user", "--mount", "sh", "-c", script,
                          sys.executable, JOB], env=env, capture_output=True, text=True,
                         timeout=120)
    assert job.returncode == 0, job.stderr
    result = json.loads(job.stdout.strip().splitlines()[0])
    assert job.stdout.strip().splitlines()[1].startswith("stopped galleyd (pid ")
    assert result["socket"] == "/run/galley/galleyd.sock"
    assert sorted(result["ids"]) == list(range(20))
    assert "started galleyd" not in job.stderr
    assert not (folder / "galleyd.sock").exists()


FAKE = textwrap.dedent("""
    # Speaks galley's protocol but reports another release.
    import json, os, signal, socket, struct, sys
    path, jobs = sys.argv[1], int(sys.argv[2])
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(8)
    def stop(*_):
        os.unlink(path)
        os._exit(0)
    signal.signal(signal.SIGTERM, stop)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            while True:
                header = conn.recv(16, socket.MSG_WAITALL)
                if len(header) < 16:
                    break
                magic, version, kind, length, rid = struct.unpack("<IHHII", header)
                conn.recv(length, socket.MSG_WAITALL)
                status = {"version": "0.0.1", "pid": os.getpid(), "jobs": jobs,
                          "uid": os.getuid(), "socket": path}
                reply = (2, {"protocol_version": version}) if kind == 1 else (12, status)
                body = json.dumps(reply[1]).encode()
                conn.sendall(struct.pack("<IHHII", magic, version, reply[0], len(body), rid) + body)
""")


@pytest.mark.parametrize("busy", [False, True])
def test_own_daemon_of_another_release_is_replaced_when_idle_reported_when_busy(home, data, busy):
    env, folder = home
    folder.mkdir(mode=0o700)
    socket = folder / "galleyd.sock"
    fake = subprocess.Popen([sys.executable, "-c", FAKE, str(socket), "1" if busy else "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout.readline().strip() == "ready"
        job = run_job(env, data)
        if busy:
            assert job.returncode != 0
            message = job.stderr.strip().splitlines()[-1]
            assert "galley.ProtocolError" in message and "galley 0.0.1" in message
            assert galley.__version__ in message and "galleyctl stop" in message
            assert fake.poll() is None  # left alone
        else:
            assert job.returncode == 0, job.stderr
            assert sorted(json.loads(job.stdout)["ids"]) == list(range(20))
            assert fake.wait(timeout=30) == 0  # stopped
            assert len(daemons_serving(socket)) == 1
    finally:
        if fake.poll() is None:
            fake.terminate()
            fake.wait()


def test_cache_budget_follows_available_memory():
    meminfo = pathlib.Path("/proc/meminfo").read_text()
    available = int(next(line.split()[1] for line in meminfo.splitlines()
                         if line.startswith("MemAvailable:"))) * 1024
    budget = _autostart.default_cache_bytes()
    assert 0 < budget <= _autostart.CACHE_SHARE * available * 1.05


def test_the_wheels_own_galleyd_is_started(home, data):
    # Installed from the wheel, galley carries galleyd and starts it when
    # GALLEYD is not set; in place (PYTHONPATH=python) it has none to carry
    # and says how to get one.
    env, folder = home
    env = {k: v for k, v in env.items() if k != "GALLEYD"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not (pathlib.Path(p) / "galleyd").exists())
    bundled = pathlib.Path(galley.__file__).resolve().parent / "bin" / "galleyd"
    job = run_job(env, data)
    if os.environ.get("GALLEY_EXPECT_INSTALLED") == "1":
        assert bundled.exists()
        assert job.returncode == 0, job.stderr
        pid, = daemons_serving(folder / "galleyd.sock")
        assert pathlib.Path(f"/proc/{pid}/exe").resolve() == bundled.resolve()
        console = pathlib.Path(sys.executable).with_name("galleyctl")
        out = subprocess.run([str(console), "--version"], capture_output=True, text=True)
        assert out.stdout.startswith(f"galleyctl {galley.__version__} ")
    else:
        assert not bundled.exists()
        assert job.returncode != 0
        assert "carries no galleyd" in job.stderr and "GALLEYD" in job.stderr
