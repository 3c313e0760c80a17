"""A short soak (scripts/soak.py): jobs opening, consuming, closing, being
SIGKILLed, flooding and idling for 15 s beside a steady job. The steady job
gets every epoch exactly once, galleyd survives, and once the workers are
gone it holds no more threads, descriptors, rings or shared memory than
before. The long run is `scripts/soak.py --seconds 600` (docs/operations.md)."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_short_soak_leaves_nothing_behind():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [env.get("PYTHONPATH", ""), str(ROOT / "tests" / "python")] if p)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "soak.py"), "--seconds", "15",
                          "--interval", "5", "--workers", "4"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "soak: ok" in out.stdout
    assert ", 0 not exactly-once" in out.stdout
