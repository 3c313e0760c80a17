"""DDP as torch's DistributedSampler: 2 and 4 ranks in separate processes,
torch.distributed (gloo on loopback), a dataset that does not divide evenly
and has broken files. Every rank takes the same number of training steps
(DistributedDataParallel's all-reduce would hang otherwise)."""

import json
import math
import pathlib
import subprocess
import sys

import pytest

from conftest import free_port, write_folder

pytestmark = pytest.mark.compat

HERE = pathlib.Path(__file__).resolve().parent
BROKEN = {5, 11, 12}  # class_00/bad.jpg, class_01/empty.jpg, class_01/trunc.jpg


@pytest.fixture(scope="module")
def broken_folder(workdir):
    """13 files (ids in ImageFolder order), 3 of them broken."""
    root = workdir / "ddp13"
    paths = write_folder(root, classes=2, per_class=5, sizes=(10, 16), seed=13)
    (root / "class_00" / "bad.jpg").write_bytes(b"not a jpeg")
    (root / "class_01" / "empty.jpg").write_bytes(b"")
    data = paths[0].read_bytes()
    (root / "class_01" / "trunc.jpg").write_bytes(data[: len(data) // 2])
    return root


def run_ranks(world, daemon, root, tmp_path):
    port = free_port()
    outs = [tmp_path / f"rank{r}.json" for r in range(world)]
    procs = [subprocess.Popen([sys.executable, str(HERE / "ddp_rank.py"), str(r), str(world),
                               str(port), daemon.socket, str(root), str(outs[r])],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a DDP rank hung (unequal batch counts?)")
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)
    return [json.loads(o.read_text()) for o in outs]


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_ranks_take_equal_steps_over_disjoint_shards(daemon, broken_folder, tmp_path, world):
    n, batch = 13, 2
    reports = run_ranks(world, daemon, broken_folder, tmp_path)
    good = set(range(n)) - BROKEN
    for key in ("default-0", "sampler-0", "default-1", "sampler-1"):
        drop_last = key.endswith("1")
        shard = n // world if drop_last else math.ceil(n / world)
        batches = shard // batch if drop_last else math.ceil(shard / batch)
        runs = [r[key] for r in reports]
        assert [r["rank"] for r in runs] == list(range(world))
        assert all(r["world_size"] == world for r in runs)
        # torch's DistributedSampler gives every rank this many samples.
        assert all(r["sampler_len"] == shard for r in runs)
        assert all(r["len"] == batches for r in runs), key
        for epoch in range(2):
            per_rank = [r["epochs"][epoch] for r in runs]
            assert [len(b) for b in per_rank] == [batches] * world, key  # exact, every rank
            for b in per_rank:  # full batches; only a last one may be short, never with drop_last
                sizes = [len(x) for x in b]
                assert sizes[:-1] == [batch] * (batches - 1)
                assert sizes[-1] == (batch if drop_last else shard - batch * (batches - 1))
            sets = [set(i for x in b for i in x) for b in per_rank]
            assert all(s <= good for s in sets), "a broken file was delivered"
            overlap = set()
            for a in range(world):
                for c in range(a + 1, world):
                    overlap |= sets[a] & sets[c]
            padding = 0 if drop_last else shard * world - n
            assert len(overlap) <= padding, f"{key}: shards overlap beyond the padding"
            if not drop_last:
                assert set().union(*sets) == good, f"{key}: the union misses items"
        # The split changes with the epoch, as DistributedSampler.set_epoch does.
        assert [r["epochs"][0] for r in runs] != [r["epochs"][1] for r in runs]
    for r in reports:
        # rank/world_size from torch.distributed and from a DistributedSampler with the
        # same seed give the same shards (without drop_last every item of a shard is
        # delivered; with it, which ones fill the full batches depends on the order).
        for dl in "0":
            for epoch in range(2):
                a = sorted(set(i for x in r[f"default-{dl}"]["epochs"][epoch] for i in x))
                b = sorted(set(i for x in r[f"sampler-{dl}"]["epochs"][epoch] for i in x))
                assert a == b
