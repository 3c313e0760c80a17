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
from torch.utils.data import DistributedSampler

import galley
from conftest import free_port, write_folder
from galley import transforms as T

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
        # A DistributedSampler's rank gets list(sampler) itself, in its order
        # (drop_last leaves the incomplete last batch out): a broken file's
        # place holds a substitute from the same list.
        for dl in "01":
            run = r[f"sampler-{dl}"]
            for got, listed in zip(run["epochs"], run["lists"]):
                flat = [i for b in got for i in b]
                assert len(flat) == (len(listed) // batch * batch if dl == "1" else len(listed))
                for item, wanted in zip(flat, listed):
                    assert item == wanted or (wanted in BROKEN and item in listed)


class EachTwice(DistributedSampler):
    """Repeated augmentation's sampler: each item of the rank's share twice in
    a row, so one epoch of one rank holds every item twice."""

    def __iter__(self):
        for item in super().__iter__():
            yield item
            yield item

    def __len__(self):
        return 2 * super().__len__()


def loader_ids(loader):
    return [i for _x, _y, ids in loader.iter_with_ids() for i in ids.tolist()]


def test_a_distributed_sampler_is_served_as_it_yields(daemon, folder):
    """Every rank of a DistributedSampler gets exactly list(sampler), in its
    order, for each epoch set_epoch chooses: the padding's repeated items
    (60 items over 7 ranks: 3 twice) and drop_last's cut included."""
    import torchvision
    reference = torchvision.datasets.ImageFolder(str(folder))
    for shuffle, drop_last in ((False, False), (True, False), (True, True)):
        samplers = [DistributedSampler(reference, num_replicas=7, rank=r, shuffle=shuffle,
                                       seed=3, drop_last=drop_last) for r in range(7)]
        loaders = [galley.DataLoader(str(folder), batch_size=4, sampler=s,
                                     transform=T.Resize([8, 8]), socket=daemon.socket)
                   for s in samplers]
        for epoch in (0, 1, 5):
            served = []
            for s, loader in zip(samplers, loaders):
                s.set_epoch(epoch)
                assert loader_ids(loader) == list(s), (shuffle, drop_last, epoch, s.rank)
                assert len(loader) == math.ceil(len(s) / 4)
                served += list(s)
            assert len(served) == (56 if drop_last else 63)
            assert len(set(served)) == (56 if drop_last else 60)  # the padding: 3 items twice
        for loader in loaders:
            loader.close()


def test_a_sampler_epoch_resumes_by_position_with_repeated_items(daemon, folder):
    """A state taken mid-epoch from a loader whose sampler yields items twice
    (and the padding's item) resumes at its position in the list: the two
    loaders together yield list(sampler) exactly, then the next epoch whole."""
    import torchvision
    reference = torchvision.datasets.ImageFolder(str(folder))

    def make():
        sampler = EachTwice(reference, num_replicas=7, rank=6, shuffle=True, seed=8)
        return sampler, galley.DataLoader(str(folder), batch_size=3, sampler=sampler,
                                          transform=T.Resize([8, 8]), socket=daemon.socket)

    sampler, loader = make()
    sampler.set_epoch(4)
    listed = list(sampler)
    assert len(listed) == 18 and len(set(listed)) == 9
    # Rank 6's last position, 62, is past the 60 items: the padding repeats
    # position 2, rank 2's first item.
    rank2 = DistributedSampler(reference, num_replicas=7, rank=2, shuffle=True, seed=8)
    rank2.set_epoch(4)
    assert listed[-1] == list(rank2)[0]
    first = []
    for _x, _y, ids in loader.iter_with_ids():
        first += ids.tolist()
        state = loader.state_dict()
        break  # one batch: positions 0-2; item 1's second copy is position 3
    loader.close()
    assert first == listed[:3] and first[2] == listed[3]
    sampler, loader = make()
    sampler.set_epoch(4)
    loader.load_state_dict(state)
    rest = loader_ids(loader)
    assert first + rest == listed
    sampler.set_epoch(5)
    assert loader_ids(loader) == list(sampler)
    loader.close()
    # A sampler with the same settings that yields another list for the
    # epoch (here: each item once) is not resumed.
    plain = DistributedSampler(reference, num_replicas=7, rank=6, shuffle=True, seed=8)
    changed = galley.DataLoader(str(folder), batch_size=3, sampler=plain,
                                transform=T.Resize([8, 8]), socket=daemon.socket)
    plain.set_epoch(4)
    changed.load_state_dict(state)
    with pytest.raises(ValueError, match="another list for epoch 4 than the one the state"):
        next(iter(changed))
    changed.close()
