"""WebDataset tar shards and the loaders that read them, shared by the
benchmarks that set galley beside webdataset (bench/shards_bench.py over
local shards, bench/object_store.py over S3).

What both sides run, so that a figure of one benchmark means the same as the
other's: one sample is `s<NNNNNN>.jpg` + `.cls` (+ optional members), the
peer's pipeline is webdataset's documented streaming loader with
torchvision's RandomResizedCrop(224) + flip in a DataLoader of 2 workers,
and galley's is the same transform in galleyd.
"""

import io
import tarfile
from pathlib import Path

BATCH = 64


def write_tar_shards(samples, shard_dir, shards, extra_members=None):
    """Writes `samples` (a list of (JPEG bytes, label)) in order into
    `shards` tar files shard_dir/train-000000.tar, ...; sample i is
    s<i:06d>.jpg and s<i:06d>.cls, then what extra_members(i) returns
    ((ext, bytes) pairs). Returns the paths, in order."""
    shard_dir = Path(shard_dir)
    shard_dir.mkdir(parents=True, exist_ok=True)
    per = -(-len(samples) // shards)
    paths = []
    for s in range(shards):
        path = shard_dir / f"train-{s:06d}.tar"
        with tarfile.open(path, "w") as tar:
            for i in range(s * per, min(len(samples), (s + 1) * per)):
                members = (("jpg", samples[i][0]), ("cls", str(samples[i][1]).encode()))
                for ext, data in members + (tuple(extra_members(i)) if extra_members else ()):
                    info = tarfile.TarInfo(f"s{i:06d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        paths.append(path)
    return paths


def key_to_id(key):
    """The sample index of a webdataset key (".../s000123" -> 123)."""
    return int(key.rsplit("/", 1)[-1][1:])


def tv_transform():
    from torchvision import transforms as TV
    return TV.Compose([TV.RandomResizedCrop(224), TV.RandomHorizontalFlip(), TV.PILToTensor()])


def galley_transform():
    from galley import transforms as T
    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()])


def webdataset_loader(urls, seed, batch_size=BATCH, workers=2):
    """webdataset 1.0's streaming loader as its docs recommend: the shard
    order shuffled each epoch (shardshuffle over every shard), a 1,000-sample
    shuffle buffer (its documented default), PIL decode and the torchvision
    transform in a DataLoader of `workers` processes. Yields (ids, images,
    labels). `urls` may be paths or webdataset URLs (`pipe:...`)."""
    import torch
    import webdataset as wds
    dataset = (wds.WebDataset(urls, shardshuffle=len(urls), nodesplitter=None, seed=seed)
               .shuffle(1000).decode("pil").to_tuple("__key__", "jpg", "cls")
               .map_tuple(key_to_id, tv_transform(), int))
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=workers)
