"""A job that finds no daemon starts one for its user (docs/autostart.md).

Each test runs jobs as separate processes with their own XDG_RUNTIME_DIR (or
TMPDIR), so the daemons they start are theirs alone and stopped at the end."""

import json
import os
import pathlib
import signal
import socket as socketlib
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

# A job: python -c JOB DATASET AUTOSTART [MEETING_FOLDER JOBS]. With a
# meeting folder, the JOBS jobs wait for each other twice (through files
# there, a deadline bounding a hang only): before the first finds or starts a
# daemon, so that they all ask at once; and once each has its job open, so
# that no job ends, and no daemon exits for idleness, before every job has
# opened its own.
JOB = textwrap.dedent("""
    import json, os, pathlib, sys, time, galley
    from galley import transforms as T

    def meet(step):
        if len(sys.argv) < 5:
            return
        folder, jobs = pathlib.Path(sys.argv[3]), int(sys.argv[4])
        (folder / f"{step}.{os.getpid()}").touch()
        deadline = time.monotonic() + 90  # within the test's 120 s wait
        while len(list(folder.glob(step + ".*"))) < jobs:
            if time.monotonic() > deadline:
                sys.exit(f"the other jobs never reached {step!r}")
            time.sleep(0.01)

    loader = galley.DataLoader(sys.argv[1], batch_size=8, epochs=1,
                               transform=T.Compose([T.Resize(24), T.CenterCrop(24)]),
                               autostart=None if sys.argv[2] == "default" else sys.argv[2] == "on")
    meet("ready")
    len(loader)  # finds or starts galleyd, and opens the job
    meet("opened")
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


def test_four_jobs_at_once_start_exactly_one_daemon(home, data, tmp_path):
    env, folder = home
    env = dict(env, GALLEY_IDLE_EXIT="2")
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    jobs = [subprocess.Popen([sys.executable, "-c", JOB, str(data), "default", str(meeting), "4"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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


def test_a_log_an_earlier_galley_left_group_writable_is_made_private_and_kept(home, data):
    # galleyd refuses a log file group or others may write; a user's umask of
    # 002 made galley's earlier logs 0664.
    env, folder = home
    folder.mkdir(mode=0o700)
    log = folder / "galleyd.log"
    log.write_text("an earlier daemon's line\n")
    log.chmod(0o664)
    job = subprocess.run([sys.executable, "-c", JOB, str(data), "default"], env=env,
                         capture_output=True, text=True, timeout=120,
                         preexec_fn=lambda: os.umask(0o002))
    assert job.returncode == 0, job.stderr
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o644
    text = log.read_text()
    assert text.startswith("an earlier daemon's line\n") and " listening on " in text, text


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


def test_a_daemon_started_by_hand_as_galley_suggests_is_used(home, data):
    env, folder = home
    socket = folder / "galleyd.sock"
    # The command the "no galleyd answers" error suggests, with no folder yet.
    subprocess.run([GALLEYD, "--socket", str(socket), "--owner-only", "--detach",
                    "--cache-bytes", "0"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    job = run_job(env, data, "off")
    assert job.returncode == 0, job.stderr
    assert json.loads(job.stdout)["socket"] == str(socket)


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
    # Speaks galley's protocol but reports another release, and whatever pid
    # it is told to report (a bystander's, or none): the client must never
    # signal it. It stops when asked to drain; a signal would kill it.
    import json, os, socket, struct, sys
    path, jobs, reported_pid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(8)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            while True:
                header = conn.recv(16, socket.MSG_WAITALL)
                if len(header) < 16:
                    break
                magic, version, kind, length, rid = struct.unpack("<IHHII", header)
                body = json.loads(conn.recv(length, socket.MSG_WAITALL) or b"{}")
                status = {"version": "0.0.1", "jobs": jobs, "uid": os.getuid(), "socket": path}
                if reported_pid != "absent":
                    status["pid"] = int(reported_pid)
                drain = kind != 1 and body.get("what") == "drain"
                if kind == 1:
                    reply = (2, {"protocol_version": version})
                else:
                    reply = (12, {"draining": True, "jobs": 0} if drain else status)
                body = json.dumps(reply[1]).encode()
                conn.sendall(struct.pack("<IHHII", magic, version, reply[0], len(body), rid) + body)
                if drain:
                    os.unlink(path)
                    os._exit(0)
""")


@pytest.mark.parametrize("reported_pid", ["bystander", "absent"])
@pytest.mark.parametrize("busy", [False, True])
def test_own_daemon_of_another_release_is_replaced_when_idle_reported_when_busy(
        home, data, busy, reported_pid):
    env, folder = home
    folder.mkdir(mode=0o700)
    socket = folder / "galleyd.sock"
    # A process of the job's own user that the fake daemon claims to be.
    bystander = subprocess.Popen(["sleep", "600"])
    fake = subprocess.Popen([sys.executable, "-c", FAKE, str(socket), "1" if busy else "0",
                             str(bystander.pid) if reported_pid == "bystander" else "absent"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout.readline().strip() == "ready"
        # In a process group of its own: a signal to pid 0 would end the job.
        job = subprocess.run([sys.executable, "-c", JOB, str(data), "default"], env=env,
                             capture_output=True, text=True, timeout=120, start_new_session=True)
        if busy:
            assert job.returncode == 1, job.stderr
            message = job.stderr.strip().splitlines()[-1]
            assert "galley.ProtocolError" in message and "galley 0.0.1" in message
            assert galley.__version__ in message and "galleyctl stop" in message
            assert f"(pid {fake.pid}," in message  # the kernel's pid, not the reply's
            assert fake.poll() is None  # left alone
        else:
            assert job.returncode == 0, job.stderr
            assert sorted(json.loads(job.stdout)["ids"]) == list(range(20))
            assert fake.wait(timeout=30) == 0  # it stopped when asked; a signal kills it
            assert len(daemons_serving(socket)) == 1
        assert bystander.poll() is None  # never signalled
    finally:
        for process in (fake, bystander):
            if process.poll() is None:
                process.kill()
                process.wait()


# Other users: a squatter (nobody), its victim, and a node service's user.
SQUATTER_UID, VICTIM_UID, SERVICE_UID = 65534, 65533, 65532

SQUATTER = textwrap.dedent("""
    # Another user's stand-in for galleyd where a victim will connect: it
    # makes the socket's folder (mode 0755) if asked, answers every request
    # as an idle galleyd of another release, run by the victim, with the pid
    # it is told to report, and prints how many bytes each connection
    # brought. A connection that brings the one byte Z ends it.
    import json, os, socket, struct, sys
    path, victim_uid, reported_pid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if sys.argv[4] == "make-folder":
        os.mkdir(os.path.dirname(path), 0o755)
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    os.chmod(path, 0o666)
    server.listen(8)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        received = 0
        with conn:
            while True:
                header = conn.recv(16, socket.MSG_WAITALL)
                if header == b"Z":
                    sys.exit(0)
                received += len(header)
                if len(header) < 16:
                    break
                magic, version, kind, length, rid = struct.unpack("<IHHII", header)
                body = conn.recv(length, socket.MSG_WAITALL)
                received += len(body)
                status = {"version": "0.0.1", "jobs": 0, "uid": victim_uid, "socket": path}
                if reported_pid != "absent":
                    status["pid"] = int(reported_pid)
                reply = (2, {"protocol_version": version}) if kind == 1 else (12, status)
                body = json.dumps(reply[1]).encode()
                conn.sendall(struct.pack("<IHHII", magic, version, reply[0], len(body), rid) + body)
        print(received, flush=True)
""")

VICTIM = textwrap.dedent("""
    import json, sys, galley
    from galley import transforms as T
    try:
        loader = galley.DataLoader(sys.argv[1], batch_size=8, epochs=1, socket=sys.argv[2] or None,
                                   transform=T.Compose([T.Resize(24), T.CenterCrop(24)]))
        ids = [i for _, _, batch in loader.iter_with_ids() for i in batch.tolist()]
        print(json.dumps({"ids": ids}))
    except galley.GalleyError as error:
        print(json.dumps({"error": type(error).__name__, "message": str(error)}))
""")


def as_user(uid):
    """The command prefix that runs a command as uid (and its gid), or as
    this process where uid is root."""
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if uid else []


def require_galley_for(uid, env):
    """Skips where uid cannot run this interpreter with this galley (a venv
    in a home folder other users cannot enter); the in-place run covers it."""
    probe = subprocess.run(as_user(uid) + [sys.executable, "-c", "import galley"], env=env,
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"uid {uid} cannot import galley with {sys.executable} here: "
                    + (probe.stderr.strip().splitlines() or ["?"])[-1])


@pytest.fixture
def shared():
    """A folder like /tmp (sticky, writable by every user), with a dataset
    every user may read; whatever galleyd was started in it is stopped."""
    import shutil
    import tempfile
    root = pathlib.Path(tempfile.mkdtemp(prefix="galley-trust-", dir="/tmp"))
    root.chmod(0o1777)
    write_folder(root / "data", classes=2, per_class=10, sizes=(24, 40), seed=3)
    unset = ("GALLEY_SOCKET", "GALLEY_AUTOSTART", "XDG_RUNTIME_DIR", "GALLEY_SERVICE_USER")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(TMPDIR=str(root), XDG_CONFIG_HOME=str(root / "no-config"), GALLEYD=GALLEYD,
               GALLEY_IDLE_EXIT="30")
    yield root, env
    for pid in daemons_serving(root / "data"):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(root)


@pytest.mark.in_place
@pytest.mark.parametrize("victim", [VICTIM_UID, 0], ids=["user", "root"])
@pytest.mark.parametrize("where", ["own-socket", "named-socket"])
def test_another_users_folder_or_daemon_is_refused_told_nothing_and_never_signalled(
        shared, victim, where):
    root, env = shared
    require_galley_for(victim, env)
    if where == "own-socket":
        # Made first by another user in the shared temp folder: the path
        # galley uses for the victim's own daemon where XDG_RUNTIME_DIR is unset.
        socket = root / f"galley-{victim}" / "galleyd.sock"
    else:
        socket = root / "theirs" / "galleyd.sock"  # named with socket=
    # A process of the victim's own user, which the fake daemon claims to be.
    bystander = subprocess.Popen(as_user(victim) + ["sleep", "600"])
    squatter = subprocess.Popen(
        as_user(SQUATTER_UID) + ["/usr/bin/python3", "-c", SQUATTER, str(socket), str(victim),
                                 str(bystander.pid), "make-folder"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert squatter.stdout.readline().strip() == "ready"
        job = subprocess.run(
            as_user(victim) + [sys.executable, "-c", VICTIM, str(root / "data"),
                               str(socket) if where == "named-socket" else ""],
            env=env, capture_output=True, text=True, timeout=120, start_new_session=True)
        assert job.returncode == 0, job.stderr  # not signalled, and the error was a GalleyError
        # Every connection made so far is recorded before this last one.
        with socketlib.socket(socketlib.AF_UNIX) as finish:
            finish.connect(str(socket))
            finish.sendall(b"Z")
        out, _ = squatter.communicate(timeout=30)
        received = [int(line) for line in out.split()]
        # The own socket's folder is refused before connecting; a named
        # socket is connected to, checked, and told nothing.
        assert received == ([] if where == "own-socket" else [0])
        assert bystander.poll() is None
        assert not daemons_serving(socket)
        result = json.loads(job.stdout)
        assert result.get("error") == "AccessDenied", result
        if where == "own-socket":
            assert (f"{socket.parent} belongs to uid {SQUATTER_UID} (nobody), not to you "
                    f"(uid {victim})") in result["message"]
            assert "TMPDIR" in result["message"]
        else:
            assert (f"galleyd at {socket} runs as uid {SQUATTER_UID} (nobody) "
                    f"(pid {squatter.pid})") in result["message"], result["message"]
            assert "sent it nothing" in result["message"]
    finally:
        for process in (squatter, bystander):
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.in_place
def test_the_node_service_run_by_its_own_user_is_used_where_that_user_is_the_service(shared):
    root, env = shared
    require_galley_for(VICTIM_UID, env)
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs a mount namespace of its own (root with CAP_SYS_ADMIN)")
    data = root / "data"
    galleyctl = pathlib.Path(GALLEYD).with_name("galleyctl")
    # Another user made the victim's own socket folder first: that must not
    # keep the victim from the node's service.
    squatted = root / f"galley-{VICTIM_UID}"
    squatted.mkdir(mode=0o755)
    (squatted / "galleyd.sock").touch()
    os.chown(squatted / "galleyd.sock", SQUATTER_UID, SQUATTER_UID)
    os.chown(squatted, SQUATTER_UID, SQUATTER_UID)
    # A private mount namespace whose /run is a fresh tmpfs that only root may
    # write to, as on a node: the service's folder there is made by root and
    # given to the service's user, who runs galleyd.
    script = textwrap.dedent(f"""
        set -e
        python="$0" victim="$1"
        mount -t tmpfs -o mode=0755 tmpfs /run
        mkdir -m 0755 /run/galley
        chown {SERVICE_UID}:{SERVICE_UID} /run/galley
        {" ".join(as_user(SERVICE_UID))} {GALLEYD} --socket /run/galley/galleyd.sock \\
            --socket-mode 0666 --detach --cache-bytes 0 --allowed-root {data} >/dev/null 2>&1
        job() {{ env "$@" {" ".join(as_user(VICTIM_UID))} "$python" -c "$victim" {data} ""; }}
        job
        chown root:root /run/galley
        job
        job GALLEY_SERVICE_USER={SERVICE_UID}
        {galleyctl} --socket /run/galley/galleyd.sock stop
    """)
    run = subprocess.run(["unshare", "--mount", "sh", "-c", script, sys.executable, VICTIM],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    served, refused, named, stopped = run.stdout.strip().splitlines()
    # The folder only root could make belongs to the service's user: trusted.
    assert sorted(json.loads(served)["ids"]) == list(range(20))
    assert ("galley: using the node's galleyd at /run/galley/galleyd.sock; "
            f"{squatted} belongs to uid {SQUATTER_UID} (nobody)") in run.stderr
    # The folder is root's: uid 65532 is nobody the client knows to trust.
    refused = json.loads(refused)
    assert refused["error"] == "AccessDenied"
    assert (f"galleyd at /run/galley/galleyd.sock runs as uid {SERVICE_UID}"
            in refused["message"]), refused["message"]
    assert "GALLEY_SERVICE_USER" in refused["message"]
    # Named by the user's environment: trusted again.
    assert sorted(json.loads(named)["ids"]) == list(range(20))
    # galleyctl stops it by the kernel's word on who serves the socket.
    assert stopped.startswith("stopped galleyd (pid ")
    assert "started galleyd" not in run.stderr
    assert os.listdir(squatted) == ["galleyd.sock"]  # nothing of the victim's went there


def test_cache_budget_follows_available_memory():
    meminfo = pathlib.Path("/proc/meminfo").read_text()
    available = int(next(line.split()[1] for line in meminfo.splitlines()
                         if line.startswith("MemAvailable:"))) * 1024
    budget = _autostart.default_cache_bytes()
    assert 0 < budget <= _autostart.CACHE_SHARE * available * 1.05


@pytest.mark.in_place
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
