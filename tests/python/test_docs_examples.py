"""Every Python block of README.md and docs/*.md is an example that runs, or
says that it is a fragment.

An example is a ```python block after an `<!-- example -->` marker
(`<!-- example: ddp N -->` runs it as N ranks with torchrun's environment,
gloo on loopback); it runs against a real galleyd, with
/data/imagenet/{train,val} pointing at a small folder of JPEGs and temporary
files (tempfile) in a folder galleyd may read. A block after
`<!-- fragment -->` shows part of a program (arguments left as `...`, a GPU,
data that is not there): it is not run, but it must still parse. A block
with neither marker fails here."""

import ast
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
# A Python block, indented as a list item may indent it, with the last
# non-blank line before it (the marker, if any).
BLOCK = re.compile(r"(?:^(?P<before>[^\n]*\S[^\n]*)\n(?:[ \t]*\n)*)?^(?P<indent>[ \t]*)```python\n"
                   r"(?P<code>.*?)^(?P=indent)```", re.S | re.M)
EXAMPLE = re.compile(r"<!-- example(?::\s*ddp (\d+))? -->")
FRAGMENT = re.compile(r"<!-- fragment -->")


def blocks():
    """(file, line, marker line, dedented code) of every Python block."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for m in BLOCK.finditer(text):
            line = text[:m.start("indent")].count("\n") + 1
            found.append((doc.relative_to(ROOT), line, (m.group("before") or "").strip(),
                          textwrap.dedent(m.group("code"))))
    return found


def examples():
    """(id, ranks, code) of every example."""
    found = []
    for doc, line, before, code in blocks():
        marker = EXAMPLE.fullmatch(before)
        if marker:
            found.append((f"{doc}:{line}", int(marker.group(1) or 1), code))
    assert sum(1 for name, _r, _c in found if name.startswith("docs/python.md")) >= 5, \
        "docs/python.md lost its examples"
    return found


def test_every_python_block_is_an_example_or_a_fragment():
    unmarked = [f"{doc}:{line}" for doc, line, before, _code in blocks()
                if not EXAMPLE.fullmatch(before) and not FRAGMENT.fullmatch(before)]
    assert not unmarked, (f"Python blocks without <!-- example --> or <!-- fragment --> before "
                          f"them: {', '.join(unmarked)}")


FRAGMENTS = [(f"{doc}:{line}", code) for doc, line, before, code in blocks()
             if FRAGMENT.fullmatch(before)]


@pytest.mark.parametrize("name,code", FRAGMENTS, ids=[name for name, _code in FRAGMENTS])
def test_fragment_parses(name, code):
    ast.parse(code, filename=name)


EXAMPLES = examples()


@pytest.mark.compat
@pytest.mark.parametrize("index", range(len(EXAMPLES)), ids=[name for name, _r, _c in EXAMPLES])
def test_example_runs(daemon, folder, workdir, tmp_path, index):
    name, ranks, code = EXAMPLES[index]
    code = code.replace("/data/imagenet/train", str(folder)).replace("/data/imagenet/val",
                                                                     str(folder))
    script = tmp_path / "example.py"
    script.write_text(code)
    # Files an example makes for galleyd to read go where galleyd may read.
    # A short path: torch's worker processes put Unix sockets under TMPDIR.
    scratch = workdir / "examples" / str(index)
    scratch.mkdir(parents=True, exist_ok=True)
    # PYTHONPATH is inherited: the examples import the galley the tests import.
    env = dict(os.environ, GALLEY_SOCKET=daemon.socket, MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), WORLD_SIZE=str(ranks), TMPDIR=str(scratch))
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
            pytest.fail(f"example {name} hung")
    assert all(p.returncode == 0 for p in procs), f"{name}:\n" + "\n".join(outputs)
