"""The DDP split is portable: galleyd's shards equal those of an independent
Python implementation of its definition (split_reference.py), itself checked
against the published outputs of SplitMix64 and xoshiro256**. And the
loader's node-layout arguments: shard_seed=, local_world_size= and torchrun's
environment."""

import pytest

import galley
from galley import transforms as T

import split_reference as ref
from conftest import write_folder

FIXED = T.Compose([T.Resize([8, 8])])


def test_the_reference_generator_gives_the_published_outputs():
    # SplitMix64 from state 0 (Steele, Lea, Flood 2014; the first outputs
    # every implementation of it is checked against).
    state, outputs = 0, []
    for _ in range(3):
        outputs.append(ref.splitmix64(state))
        state = (state + ref.GOLDEN_GAMMA) & ref.MASK
    assert outputs == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    # xoshiro256** from the state {1, 2, 3, 4}, as Blackman and Vigna's
    # reference C code prints it.
    g = ref.Xoshiro256StarStar(state=[1, 2, 3, 4])
    assert [g.next() for _ in range(4)] == [11520, 0, 1509978240, 1215971899390074240]


@pytest.fixture(scope="module")
def split_folder(workdir):
    """25 tiny JPEGs (ids 0..24): 25 does not divide by 2, 3, 4 or 6, so
    every world size pads (or drops)."""
    root = workdir / "split25"
    write_folder(root, classes=5, per_class=5, sizes=(8, 10), seed=25)
    return root


def delivered(loader, epoch):
    loader.set_epoch(epoch)
    return [i for _images, _labels, ids in loader.iter_with_ids() for i in ids.tolist()]


# (seed, shard_seed, world_size, local_world_size, shard drop_last)
CASES = [
    (0, None, 2, None, False),
    (7, None, 3, None, False),
    (7, None, 4, 2, False),     # 2 nodes x 2: node-major slots
    (5, 1234, 6, 3, False),     # 2 nodes x 3, the split from shard_seed
    (99, 1234, 6, 2, True),     # 3 nodes x 2, cut to the floor
    (2**64 - 1, None, 4, 4, True),
]


@pytest.mark.parametrize("seed,shard_seed,world,local,drop", CASES)
def test_galleyds_shards_are_the_reference_split(daemon, split_folder, seed, shard_seed, world,
                                                 local, drop):
    n = 25
    for rank in range(world):
        loader = galley.DataLoader(str(split_folder), batch_size=4, shuffle=True, seed=seed,
                                   shard_seed=shard_seed, rank=rank, world_size=world,
                                   local_world_size=local, drop_last=drop, transform=FIXED,
                                   socket=daemon.socket)
        try:
            stats = loader.stats()["job"]
            split_seed = seed if shard_seed is None else shard_seed
            assert stats["shard_seed"] == split_seed
            assert stats["nodes"] == (world // local if local else 1)
            assert stats["node_rank"] == (rank // local if local else 0)
            for epoch in (0, 3):
                expected = ref.shard(range(n), split_seed, epoch, rank, world, local or 0,
                                     drop_last=drop)
                got = delivered(loader, epoch)
                if drop:  # drop_last also leaves out the incomplete last batch
                    got_set = set(got)
                    assert got_set <= set(expected) and len(got) == len(expected) // 4 * 4
                else:
                    assert sorted(got) == sorted(expected), (rank, epoch)
        finally:
            loader.close()


def test_shard_seed_decouples_the_split_from_the_seed(daemon, split_folder):
    def shard_of(**kw):
        loader = galley.DataLoader(str(split_folder), batch_size=5, shuffle=True, rank=1,
                                   world_size=3, transform=FIXED, socket=daemon.socket, **kw)
        try:
            return sorted(delivered(loader, 2))
        finally:
            loader.close()
    same = shard_of(seed=1, shard_seed=77)
    assert shard_of(seed=2, shard_seed=77) == same
    assert shard_of(seed=77) == same  # unset: the seed is the split's seed
    assert shard_of(seed=1) != same


def test_the_node_layout_comes_from_torchrun(daemon, split_folder, monkeypatch):
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
           "GROUP_RANK": "1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    loader = galley.DataLoader(str(split_folder), batch_size=4, shuffle=True, seed=3, rank=3,
                               world_size=4, transform=FIXED, socket=daemon.socket)
    try:
        assert loader.local_world_size == 2
        job = loader.stats()["job"]
        assert (job["nodes"], job["node_rank"]) == (2, 1)
        assert sorted(delivered(loader, 1)) == sorted(ref.shard(range(25), 3, 1, 3, 4, 2))
    finally:
        loader.close()
    # A loader that is not the launched rank (another world) ignores it.
    other = galley.DataLoader(str(split_folder), batch_size=4, rank=0, world_size=2,
                              transform=FIXED, socket=daemon.socket)
    assert other.local_world_size == 0
    # A layout the launcher contradicts is refused, saying why.
    with pytest.raises(ValueError, match="node by node"):
        galley.DataLoader(str(split_folder), batch_size=4, rank=3, world_size=4,
                          local_world_size=4, transform=FIXED, socket=daemon.socket)


@pytest.mark.compat
def test_bad_layouts_and_seeds_are_refused(split_folder):
    with pytest.raises(ValueError, match="must divide world_size"):
        galley.DataLoader(str(split_folder), batch_size=4, rank=0, world_size=6,
                          local_world_size=4, transform=FIXED, socket="/nonexistent")
    # A layout that is not a positive count is refused even where there is
    # nothing to split.
    for bad in (0, -2, "2", 1.5, True):
        for world_size in (1, 4):
            with pytest.raises(ValueError, match="local_world_size must be a positive int"):
                galley.DataLoader(str(split_folder), batch_size=4, rank=0,
                                  world_size=world_size, local_world_size=bad,
                                  transform=FIXED, socket="/nonexistent")
    with pytest.raises(ValueError, match="shard_seed"):
        galley.DataLoader(str(split_folder), batch_size=4, rank=0, world_size=2,
                          shard_seed=-1, transform=FIXED, socket="/nonexistent")
    from torch.utils.data import DistributedSampler
    sampler = DistributedSampler(list(range(25)), num_replicas=2, rank=0, seed=3)
    with pytest.raises(ValueError, match="DistributedSampler's seed"):
        galley.DataLoader(str(split_folder), batch_size=4, sampler=sampler, shard_seed=3,
                          transform=FIXED, socket="/nonexistent")


@pytest.mark.compat
def test_without_shuffle_the_shards_are_distributed_samplers_on_any_layout(daemon, split_folder):
    # Evaluation code puts the ranks' outputs back in order by
    # DistributedSampler(shuffle=False)'s rule, so a known layout changes
    # nothing there: rank r gets positions r, r + 4, ... in that order.
    from torch.utils.data import DistributedSampler
    for rank in range(4):
        loader = galley.DataLoader(str(split_folder), batch_size=4, shuffle=False, rank=rank,
                                   world_size=4, local_world_size=2, transform=FIXED,
                                   socket=daemon.socket)
        try:
            torch_order = list(DistributedSampler(range(25), num_replicas=4, rank=rank,
                                                  shuffle=False))
            assert delivered(loader, 0) == torch_order
            assert torch_order == ref.shard(range(25), 0, 0, rank, 4, 2, shuffle=False)
        finally:
            loader.close()
