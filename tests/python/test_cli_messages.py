"""What galleyctl says when nothing answers: where a galleyd comes from and
how to start one, not only the socket error."""

import os
import subprocess

from conftest import GALLEYD

GALLEYCTL = os.path.join(os.path.dirname(GALLEYD), "galleyctl")


def test_galleyctl_status_with_no_daemon_says_how_to_start_one(tmp_path):
    socket = str(tmp_path / "none.sock")
    done = subprocess.run([GALLEYCTL, "--socket", socket, "status"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    assert f"no galleyd serves {socket}" in done.stderr
    assert "galley.DataLoader) starts a personal galleyd" in done.stderr
    assert "galleyd --socket" in done.stderr and "--owner-only --detach" in done.stderr
    assert "docs/install.md" in done.stderr
