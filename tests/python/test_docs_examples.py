"""Every example of docs/python.md runs, against a real galleyd, with
/data/imagenet/{train,val} pointing at a small folder of JPEGs. An example is
a ```python block after an `<!-- example -->` marker; `<!-- example: ddp N -->`
runs it as N ranks with torchrun's environment (gloo on loopback)."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from conftest import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python.md"
EXAMPLE = re.compile(r"<!-- example(?::\s*ddp (\d+))? -->\s*```python\n(.*?)```", re.S)


def examples():
    found = [(int(m.group(1) or 1), m.group(2)) for m in EXAMPLE.finditer(DOC.read_text())]
    assert len(found) >= 5, "docs/python.md lost its examples"
    return found


@pytest.mark.parametrize("index", range(len(examples())))
def test_example_runs(daemon, folder, tmp_path, index):
    ranks, code = examples()[index]
    code = code.replace("/data/imagenet/train", str(folder)).replace("/data/imagenet/val",
                                                                     str(folder))
    script = tmp_path / "example.py"
    script.write_text(code)
    # PYTHONPATH is inherited: the examples import the galley the tests import.
    env = dict(os.environ, GALLEY_SOCKET=daemon.socket, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(ranks))
    procs = [subprocess.Popen([sys.executable, str(script)], env=dict(env, RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(ranks)]
    outputs = []
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=300)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"example {index} hung")
    assert all(p.returncode == 0 for p in procs), "\n".join(outputs)
