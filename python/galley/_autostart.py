"""Finds the galleyd a job talks to, and starts one for the user when none answers.

Order (docs/autostart.md):

1. ``socket=`` or ``$GALLEY_SOCKET``: that socket and nothing else.
2. The user's own daemon: ``$XDG_RUNTIME_DIR/galley/galleyd.sock``, or, where
   XDG_RUNTIME_DIR is unset, ``${TMPDIR:-/tmp}/galley-<uid>/galleyd.sock``.
3. The node's service: ``/run/galley/galleyd.sock``.
4. None answers: start a private galleyd for this user (unless
   ``autostart=False`` or ``GALLEY_AUTOSTART=0``), detached so that it outlives
   the job and serves the user's next jobs, and exits after
   ``GALLEY_IDLE_EXIT`` seconds (default 600) without a job.

A private daemon serves only its own user (``--owner-only``: the peer's uid
is checked at connect), reads with the user's own rights, and lives in a
folder of mode 0700 that galley refuses to use if another user owns it or its
mode is wider. A file lock in that folder makes concurrent jobs start one
daemon between them.

The client library checks every daemon before it sends anything (the
folder of the user's own socket, then the uid serving the connection:
the user's own, root or the node service's user), so a daemon someone
else put at one of these paths is refused with ``AccessDenied`` and told
nothing. galley never signals a process: an old daemon it replaces is asked
to stop over the protocol.
"""

import fcntl
import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys
import time
import warnings

from . import _galley

DEFAULT_IDLE_EXIT_S = 600.0
# The personal daemon's cache: this share of MemAvailable, and of the cgroup's
# memory limit where one is set (the daemon shares the job's cgroup).
CACHE_SHARE = 0.25
_VERSION_HINT = ("stop it with `galleyctl stop` (from the galley that started it) or `kill {pid}`, "
                 "then run the job again")


def autostart_enabled(autostart):
    if autostart is not None:
        return bool(autostart)
    return os.environ.get("GALLEY_AUTOSTART", "1").strip().lower() not in ("0", "false", "no", "off")


def explicit_socket(socket):
    """The socket the user named (argument, then $GALLEY_SOCKET), or None."""
    if socket:
        return os.fspath(socket)
    return os.environ.get("GALLEY_SOCKET") or None


def client(socket=None, autostart=None, timeout=30.0):
    """A connected ``_galley.Client`` for the daemon the rules above choose."""
    return _galley.Client(resolve(socket, autostart), timeout)


def resolve(socket=None, autostart=None):
    """The socket path of the daemon to use, starting one if the rules say so."""
    named = explicit_socket(socket)
    if named is not None:
        return named
    user, system = _galley.user_socket_path(), _galley.system_socket_path()
    tried = []
    refused = None
    try:
        client, status, error = _probe(user)
    except _galley.AccessDenied as denied:
        # Someone else's folder or daemon at the user's path: never used,
        # but it must not keep the user from the node's service either.
        refused, client, status, error = denied, None, None, "refused"
    if status is not None:
        return _check_own_daemon(user, client, status, autostart)
    tried.append(f"{user} ({error})")
    _, status, error = _probe(system)
    if status is not None:
        if refused is not None:
            warnings.warn(f"galley: using the node's galleyd at {system}; {refused}",
                          stacklevel=3)
        return system
    if refused is not None:
        raise refused
    tried.append(f"{system} ({error})")
    if not autostart_enabled(autostart):
        raise _galley.ServerUnavailable(
            "no galleyd answers at " + "; ".join(tried) + ". Start one for yourself with "
            f"`galleyd --socket {user} --owner-only --detach`, ask your admin for the node's "
            "service (docs/install.md), or let galley start one (autostart=True, "
            "GALLEY_AUTOSTART unset).")
    return start_private_daemon(user)


def _probe(path):
    """(client, status document, None) if a galleyd galley may use answers at
    path, else (None, None, why). AccessDenied (raised) for a daemon or folder
    that is not to be trusted: the client library checks both before it
    sends anything."""
    if not os.path.exists(path):
        return None, None, "no socket"
    try:
        client = _galley.Client(path, 5.0)
        return client, client.query("status"), None
    except _galley.ProtocolError as mismatch:
        owner = _socket_peer(path)
        raise _galley.ProtocolError(
            f"{mismatch}. The galleyd at {path} (pid {owner[0] if owner else '?'}) is from "
            "another galley release; " + _VERSION_HINT.format(pid=owner[0] if owner else "PID"))
    except (_galley.ServerUnavailable, _galley.Timeout) as gone:
        return None, None, f"does not answer: {gone}"


def _check_own_daemon(path, client, status, autostart):
    """The user's own daemon must be of this release; an idle one of another
    release is replaced, a busy one is reported, never silently mixed. Who
    runs it and its pid come from the kernel (``client.daemon_*``), never
    from the daemon's reply."""
    from . import __version__
    if status.get("version") == __version__:
        return path
    pid = client.daemon_pid
    ours = client.daemon_uid == os.getuid()
    if status.get("jobs", 0) or not autostart_enabled(autostart) or not ours:
        raise _galley.ProtocolError(
            f"the galleyd at {path} is galley {status.get('version')} (pid {pid}, "
            f"{status.get('jobs', 0)} job(s) open), this client is galley {__version__}; "
            + _VERSION_HINT.format(pid=pid))
    try:
        _stop(client, path)
    except _galley.GalleyError as refused:
        raise _galley.ProtocolError(
            f"the galleyd at {path} is galley {status.get('version')} (pid {pid}), this client "
            f"is galley {__version__}, and it did not stop when asked ({refused}); "
            + _VERSION_HINT.format(pid=pid)) from refused
    return start_private_daemon(path)


def _socket_peer(path):
    """(pid, uid) of the process serving path, as the kernel reports it. Sends
    nothing: for messages about a daemon the handshake could not talk to."""
    import socket as pysocket
    import struct
    try:
        with pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM) as s:
            s.connect(path)
            pid, uid, _gid = struct.unpack(
                "3i", s.getsockopt(pysocket.SOL_SOCKET, pysocket.SO_PEERCRED, 12))
            return pid, uid
    except OSError:
        return None


def _stop(client, path):
    """Asks the idle daemon behind client to stop (a drain: it takes no new
    job and exits once it has none) and waits until its socket is gone."""
    try:
        client.drain()
    except (_galley.ServerUnavailable, _galley.Timeout):
        return  # already gone
    deadline = time.monotonic() + 30
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)


def private_dir(user_socket):
    """The folder of the user's own daemon, created 0700, refused if unsafe."""
    folder = pathlib.Path(user_socket).parent
    try:
        folder.mkdir(mode=0o700, parents=False)
    except FileExistsError:
        pass
    except FileNotFoundError:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
    _galley.check_socket_folder(user_socket)
    return folder


def galleyd_binary():
    """$GALLEYD, then the galleyd inside this package, then PATH."""
    named = os.environ.get("GALLEYD")
    if named:
        return named
    bundled = pathlib.Path(__file__).resolve().parent / "bin" / "galleyd"
    if bundled.exists():
        return str(bundled)
    found = shutil.which("galleyd")
    if found:
        return found
    raise _galley.ServerUnavailable(
        "no galleyd answers and none can be started: this galley package carries no galleyd "
        "and none is on PATH. Set GALLEYD to a galleyd binary, or install the node service "
        "(docs/install.md).")


def _memory_bytes(path, key=None):
    try:
        text = pathlib.Path(path).read_text()
    except OSError:
        return None
    if key is not None:
        match = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
        return int(match.group(1)) * 1024 if match else None
    text = text.strip()
    return int(text) if text.isdigit() else None


def default_cache_bytes():
    """CACHE_SHARE of MemAvailable, and of the cgroup memory limit if lower."""
    budgets = [_memory_bytes("/proc/meminfo", "MemAvailable")]
    budgets.append(_memory_bytes("/sys/fs/cgroup/memory.max"))  # cgroup v2
    budgets.append(_memory_bytes("/sys/fs/cgroup/memory/memory.limit_in_bytes"))  # v1
    known = [b for b in budgets if b]
    return int(CACHE_SHARE * min(known)) if known else 1 << 30


def user_config():
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    path = os.path.join(base, "galley", "galleyd.toml")
    return path if os.path.isfile(path) else None


def _open_log(log):
    """The private daemon's log, for appending. galleyd accepts only a log no
    one else may write (docs/operations.md, "The log file"), so it is created
    0600 whatever the umask, and a log that an earlier galley created
    group-writable under a umask of 002 loses that bit. The folder is the
    user's own (mode 0700, checked), so no one else can swap the file."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o022:
            os.fchmod(fd, mode & ~0o022)
        return os.fdopen(fd, "ab")
    except BaseException:
        os.close(fd)
        raise


def start_private_daemon(user_socket):
    """Starts the user's own galleyd at user_socket (one, whatever the number
    of jobs calling at once) and returns the socket path."""
    folder = private_dir(user_socket)
    with open(folder / "galleyd.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        client, status, _ = _probe(user_socket)
        if status is not None:  # another job started it while this one waited
            return _check_own_daemon(user_socket, client, status, True)
        if os.path.lexists(user_socket):
            os.unlink(user_socket)  # the stale socket of a daemon that died
        args = [galleyd_binary(), "--socket", user_socket, "--owner-only", "--detach"]
        config = user_config()
        configured = ""
        if config is not None:
            args += ["--config", config]
            configured = pathlib.Path(config).read_text(errors="replace")
        idle = float(os.environ.get("GALLEY_IDLE_EXIT", DEFAULT_IDLE_EXIT_S))
        if not re.search(r"^\s*idle_exit_seconds\s*=", configured, re.M):
            args += ["--idle-exit", f"{idle:g}"]
        if not re.search(r"^\s*cache_bytes\s*=", configured, re.M):
            args += ["--cache-bytes", str(default_cache_bytes())]
        log = folder / "galleyd.log"
        # The log file takes galleyd's log once it runs; what it prints before
        # (a bad config) reaches the same file through stdout and stderr.
        args += ["--log-file", str(log)]
        for attempt in range(2):
            with _open_log(log) as out:
                started = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                         close_fds=True, start_new_session=True, timeout=120)
            if started.returncode == 0:
                break
            # A daemon exiting for idleness may still hold the socket for a moment.
            time.sleep(0.5)
        else:
            tail = log.read_text(errors="replace").splitlines()[-3:]
            raise _galley.ServerUnavailable(
                f"could not start galleyd at {user_socket} (exit {started.returncode}); "
                f"its log {log} ends with: " + " | ".join(tail))
        client = _galley.Client(user_socket, 10.0)
        status = client.query("status")
        sys.stderr.write(
            f"galley: started galleyd {status.get('version')} (pid {client.daemon_pid}) for uid "
            f"{os.getuid()} at {user_socket}; log {log}; it exits after {idle:g} s without a "
            "job, or stop it with `galleyctl stop`\n")
        return user_socket


def may_retry(socket):
    """Whether a failed open may start over: only where galley chose the
    socket itself (a daemon it may have caught exiting for idleness)."""
    return explicit_socket(socket) is None


__all__ = ["resolve", "client", "start_private_daemon", "private_dir", "autostart_enabled"]
