"""`galleyd --detach` behaves like a daemon: the command returns once the
socket is served, and the detached process keeps none of its caller's
descriptors, so a caller that reads the command's output to the end
(`subprocess.run(..., capture_output=True)`, `galleyd --detach | cat`)
returns too. `--log-file` keeps the log."""

import os
import signal
import stat
import subprocess
import time

import pytest

from conftest import GALLEYD


def _daemon_pid(socket):
    import galley
    return int(galley.query("status", socket=socket)["pid"])


def _stop(pid):
    """SIGTERM, then wait on the process's exit (it is not our child)."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60  # bounds a hang only
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(") ")[-1].startswith("Z"):
                break
        time.sleep(0.05)


def _descriptors(pid):
    """fd -> what it points at, for every descriptor of pid."""
    folder = f"/proc/{pid}/fd"
    return {int(fd): os.readlink(os.path.join(folder, fd)) for fd in os.listdir(folder)}


def _start(tmp_path, *extra):
    socket = str(tmp_path / "galleyd.sock")
    # capture_output: the pipes this test reads to their end. The timeout only
    # bounds a hang; without the fix the call never returns.
    done = subprocess.run([GALLEYD, "--socket", socket, "--allowed-root", str(tmp_path),
                           "--idle-exit", "0", "--cache-bytes", "0", "--detach", *extra],
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    return socket, done


def test_detach_under_capture_output_returns_and_keeps_no_caller_descriptor(tmp_path):
    # A descriptor the caller leaves open and inheritable: the daemon must not keep it.
    leaked_r, leaked_w = os.pipe()
    os.set_inheritable(leaked_w, True)
    try:
        socket = str(tmp_path / "galleyd.sock")
        done = subprocess.run([GALLEYD, "--socket", socket, "--allowed-root", str(tmp_path),
                               "--cache-bytes", "0", "--detach"],
                              capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
                              close_fds=False)
    finally:
        os.close(leaked_w)
    assert done.returncode == 0, done.stderr.decode()
    pid = _daemon_pid(socket)
    try:
        held = _descriptors(pid)
        leaked = os.readlink(f"/proc/self/fd/{leaked_r}")
        assert leaked not in held.values(), held
        for fd in (0, 1, 2):
            assert held[fd] == "/dev/null", held
        # With every writer gone, the leaked pipe reads its end at once.
        assert os.read(leaked_r, 1) == b""
    finally:
        os.close(leaked_r)
        _stop(pid)


def test_log_file_takes_the_log_of_a_detached_daemon(tmp_path):
    log = tmp_path / "logs" / "galleyd.log"
    log.parent.mkdir()
    socket, done = _start(tmp_path, "--log-file", str(log), "--log-level", "info")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b""
    pid = _daemon_pid(socket)
    try:
        assert _descriptors(pid)[2] == str(log)
        assert stat.S_IMODE(os.stat(log).st_mode) & 0o007 == 0
        # galleyd reports itself ready to the waiting command, then logs it:
        # wait for the line (the deadline bounds a hang only).
        deadline = time.monotonic() + 60
        while "ready:" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "ready:" in log.read_text(), log.read_text()
    finally:
        _stop(pid)
    assert "stopped" in log.read_text()


def test_a_detached_daemon_that_cannot_start_says_where_its_log_is(tmp_path):
    log = tmp_path / "galleyd.log"
    # A socket path under a regular file: galleyd cannot bind there.
    (tmp_path / "file").write_text("")
    done = subprocess.run([GALLEYD, "--socket", str(tmp_path / "file" / "galleyd.sock"),
                           "--allowed-root", str(tmp_path), "--cache-bytes", "0", "--detach",
                           "--log-file", str(log)],
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert f"its log is {log}" in done.stderr.decode()
    assert "cannot start" in log.read_text()


def test_a_relative_log_file_is_refused_naming_the_key(tmp_path):
    done = subprocess.run([GALLEYD, "--socket", str(tmp_path / "s.sock"), "--log-file",
                           "galleyd.log", "--check-config"], capture_output=True, timeout=60)
    assert done.returncode == 2
    assert "log_file" in done.stderr.decode() and "absolute" in done.stderr.decode()


def test_a_regular_file_as_stdout_stays_the_log_without_log_file(tmp_path):
    socket = str(tmp_path / "galleyd.sock")
    log = tmp_path / "out.log"
    with open(log, "ab") as out:
        done = subprocess.run([GALLEYD, "--socket", socket, "--allowed-root", str(tmp_path),
                               "--cache-bytes", "0", "--detach", "--log-level", "info"],
                              stdout=out, stderr=out, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0
    pid = _daemon_pid(socket)
    try:
        assert _descriptors(pid)[2] == str(log)
        assert "ready:" in log.read_text()
    finally:
        _stop(pid)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
