"""Tar shards: galley against the webdataset library's loaders.

On the same JPEGs stored as an ImageFolder and as tar shards, in one run:
galley over the folder, galley over the shards, webdataset's streaming
loader and its indexed `wids` reader (each with torch.utils.data.DataLoader,
num_workers=2, PIL decode + torchvision RandomResizedCrop(224) + flip), for
1 and 4 concurrent jobs: images/s over one epoch. Also each loader's order
quality (Pearson correlation between an item's position in the shards and in
the epoch, pooled over jobs; the smallest per-job chi-square p-value of the
8x8 table of shard-position bin by epoch-position bin), and galleyd's index time per shard
and members/s on a 100,000-member shard.

Peer settings (as their docs recommend; every one printed in the table):
  webdataset 1.0: WebDataset(urls, shardshuffle=len(urls) (the shard order
    shuffled each epoch through a buffer holding every shard), nodesplitter=None) .shuffle(1000) (the documented default
    buffer) .decode("pil"), batched by the DataLoader.
  wids 0.1.11: ShardListDataset over a JSON-like shard list with each
    shard's sample count, the shards read in place (local paths; wids opens
    local files directly, no copy), lru_size=10 open shards (its default),
    sampler ChunkedSampler(shuffle=True, chunksize=1000) (its documented
    choice for random access with locality).

Run with the venv that holds webdataset and wids (scripts/setup_venv.sh and
`pip install wids`):
  PYTHONPATH=python ~/.cache/galley/venv-torch2.14/bin/python bench/shards_bench.py [--images 2000]

--fields measures the cost of the field path instead: CLIP-style shards
(jpg + txt caption + json metadata per sample), one galleyd, one process
alternating epochs of images alone (fields=None) and images + captions +
metadata (fields=("jpg", "txt", "json"), decoded and collated in the job),
RandomResizedCrop(224) in galleyd, each first in every other round;
milliseconds per batch of each (median over rounds), after a warm-up epoch
of each (the cache then holds both sets' items), and the difference per
batch and per sample.

--clip compares image-text loading with webdataset's own loader on the same
CLIP-style shards, 1 and 4 jobs: galley with fields=("__key__", "jpg",
"txt", "json") and RandomResizedCrop(224) + flip in galleyd; webdataset with
.to_tuple("__key__", "jpg", "txt", "json") and the torchvision transforms in
a DataLoader with num_workers=2; on both sides a tokenizer-like Python op on
each caption (hashed lower-case words, padded to 77), in the job (galley:
its main process; webdataset: its workers). Images/s over one epoch.
"""

import argparse
import io
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(ROOT / "bench"))

from shard_sets import (BATCH, key_to_id, tv_transform, webdataset_loader,  # noqa: E402
                        write_tar_shards)


def caption_members(i):
    import json
    text = f"a photo of sample {i}, one of the things of kind {i % 10}"
    return (("txt", text.encode()),
            ("json", json.dumps({"caption": text, "width": 320, "height": 240,
                                 "similarity": 0.31, "url": f"https://example.com/{i}.jpg"})
             .encode()))


def make_corpus(directory, images, shards, captions=False):
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(0)
    folder = directory / "folder"
    samples = []
    for i in range(images):
        label = i % 10
        d = folder / f"c{label}"
        d.mkdir(parents=True, exist_ok=True)
        h, w = rng.integers(240, 400, size=2)
        small = rng.integers(0, 256, size=(h // 8, w // 8, 3), dtype=np.uint8)
        path = d / f"{i:06d}.jpg"
        Image.fromarray(small).resize((int(w), int(h)), Image.BICUBIC).save(path, quality=90)
    for label in range(10):
        for f in sorted((folder / f"c{label}").iterdir()):
            samples.append((f.read_bytes(), label))
    paths = write_tar_shards(samples, directory / "shards", shards,
                             caption_members if captions else None)
    return folder, [str(p) for p in paths], len(samples)


def run_galley(kind, dataset, socket, seed, out):
    import galley
    from galley import transforms as T
    loader = galley.DataLoader(dataset, batch_size=BATCH, shuffle=True, seed=seed, socket=socket,
                               transform=T.Compose([T.RandomResizedCrop(224),
                                                    T.RandomHorizontalFlip()]))
    start, order = time.time(), []
    for _images, _labels, ids in loader.iter_with_ids():
        order.extend(ids.tolist())
    out.put((kind, seed, time.time() - start, order))


def tokenize(text):
    """A stand-in for a CLIP tokenizer: 77 ids of hashed lower-case words."""
    import zlib
    ids = [zlib.crc32(w.encode()) % 49408 for w in text.lower().split()][:77]
    return ids + [0] * (77 - len(ids))


def run_galley_clip(urls, socket, seed, out):
    import galley
    import torch
    from galley import transforms as T
    loader = galley.DataLoader(urls, batch_size=BATCH, shuffle=True, seed=seed, socket=socket,
                               transform=T.Compose([T.RandomResizedCrop(224),
                                                    T.RandomHorizontalFlip()]),
                               fields=("__key__", "jpg", "txt", "json"))
    start, order = time.time(), []
    for keys, _images, captions, _meta in loader:
        _tokens = torch.tensor([tokenize(t) for t in captions])
        order.extend(key_to_id(k) for k in keys)
    out.put(("galley-clip", seed, time.time() - start, order))


def tokens_tensor(text):
    import torch
    return torch.tensor(tokenize(text))


def same(value):
    return value


def run_webdataset_clip(urls, seed, out):
    import torch
    import webdataset as wds
    dataset = (wds.WebDataset(urls, shardshuffle=len(urls), nodesplitter=None, seed=seed)
               .shuffle(1000).decode("pil").to_tuple("__key__", "jpg", "txt", "json")
               .map_tuple(key_to_id, tv_transform(), tokens_tensor, same))
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=2)
    start, order = time.time(), []
    for ids, _images, _tokens, _meta in loader:
        order.extend(ids.tolist())
    out.put(("webdataset-clip", seed, time.time() - start, order))


def run_webdataset(urls, seed, out):
    loader = webdataset_loader(urls, seed)
    start, order = time.time(), []
    for ids, _images, _labels in loader:
        order.extend(ids.tolist())
    out.put(("webdataset", seed, time.time() - start, order))


class WidsItems:
    """wids' ShardListDataset yielding (index, tensor, label); picklable for
    the DataLoader's workers (the shard list opens lazily in each)."""

    def __init__(self, shardlist):
        import wids
        self.dataset = wids.ShardListDataset(shardlist, lru_size=10)
        self.transform = tv_transform()

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        sample = self.dataset[i]
        return i, self.transform(sample[".jpg"].convert("RGB")), int(sample[".cls"])


def run_wids(urls, counts, seed, out):
    import torch
    import wids
    items = WidsItems([{"url": u, "nsamples": n} for u, n in zip(urls, counts)])
    sampler = wids.ChunkedSampler(items.dataset, chunksize=1000, shuffle=True, seed=seed)
    loader = torch.utils.data.DataLoader(items, batch_size=BATCH, num_workers=2,
                                         sampler=sampler)
    start, order = time.time(), []
    for ids, _images, _labels in loader:
        order.extend(ids.tolist())
    out.put(("wids", seed, time.time() - start, order))


def order_quality(orders, n):
    """Pearson r between shard position and epoch position, pooled over jobs;
    and the smallest per-job chi-square p-value of the 8x8 table (shard
    position bin by epoch position bin). Per job, because jobs sharing reads
    draw dependent orders by design, which a pooled test would count as
    non-uniformity."""
    import numpy as np
    from stats import chi2_sf
    bins = 8
    xs, ys, p_values = [], [], []
    for order in orders:
        table = np.zeros((bins, bins))
        for position, item in enumerate(order):
            table[item * bins // n, position * bins // len(order)] += 1
            xs.append(item)
            ys.append(position)
        expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
        p_values.append(chi2_sf(float(((table - expected) ** 2 / expected).sum()),
                                (bins - 1) ** 2))
    return float(np.corrcoef(xs, ys)[0, 1]), min(p_values)


def start_daemon(directory, galleyd, *extra):
    socket = str(directory / "galleyd.sock")
    proc = subprocess.Popen([galleyd, "--socket", socket, "--log-level", "warn", *extra])
    for _ in range(200):
        if os.path.exists(socket):
            break
        time.sleep(0.05)
    return socket, proc


def index_figures(directory, galleyd, urls):
    import galley
    from galley import transforms as T
    one = io.BytesIO()
    with tarfile.open(fileobj=one, mode="w") as tar:
        for k in range(50000):
            for ext in ("jpg", "cls"):
                info = tarfile.TarInfo(f"k{k:06d}.{ext}")
                data = b"1" if ext == "cls" else b""
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    big = directory / "big.tar"
    big.write_bytes(one.getvalue())
    figures = {}
    socket, proc = start_daemon(directory / "ix", galleyd, "--allowed-root", str(directory),
                                "--tar-index-dir", "none",
                                "--cache-bytes", "0")
    try:
        for name, dataset in (("64 shards", urls), ("100,000 members", [str(big)])):
            loader = galley.DataLoader(dataset, batch_size=8, socket=socket,
                                       transform=T.Resize([8, 8]))
            len(loader)
            entry, = [d for d in galley.query("datasets", socket=socket)["datasets"]
                      if d["shards"] and d["root"] == os.path.realpath(dataset[0])]
            figures[name] = entry["shards"]["index_seconds"]
            loader.close()
    finally:
        proc.terminate()
        proc.wait()
    return figures


def field_path_figures(directory, galleyd, images, shards, rounds):
    """(ms per batch of images alone, of images + captions + metadata)."""
    import statistics
    import galley
    from galley import transforms as T
    _folder, urls, n = make_corpus(directory, images, shards, captions=True)
    socket, proc = start_daemon(directory, galleyd, "--allowed-root", str(directory))
    try:
        loaders = {
            name: galley.DataLoader(urls, batch_size=BATCH, shuffle=True, socket=socket,
                                    transform=T.RandomResizedCrop(224), fields=fields)
            for name, fields in (("images", None), ("images+fields", ("jpg", "txt", "json")))}
        times = {name: [] for name in loaders}
        for round_ in range(rounds + 1):  # round 0 warms both up
            # Each goes first in every other round, so neither gains from
            # the other's prefetch or from the machine's drift.
            for name, loader in sorted(loaders.items(), reverse=round_ % 2 == 1):
                start, batches = time.perf_counter(), 0
                for batch in loader:
                    batches += 1
                    if name != "images":
                        assert len(batch[1]) == len(batch[0]) and isinstance(batch[2][0], dict)
                if round_ > 0:
                    times[name].append(1000 * (time.perf_counter() - start) / batches)
        for loader in loaders.values():
            loader.close()
    finally:
        proc.terminate()
        proc.wait()
    # The job's own share: decoding and collating one batch's captions and
    # metadata (galley/fields.py), alone.
    import torch
    from galley import fields as galley_fields
    plan, _ = galley_fields.plan(("jpg", "txt", "json"), shards=True, manifest=None,
                                 image_key=None, label_key=None, decode=True, unpickle=False,
                                 batch_transform=None)
    members = [caption_members(i) for i in range(BATCH)]
    columns = [[m[0][1] for m in members], [m[1][1] for m in members]]
    images = torch.zeros(BATCH, 3, 224, 224, dtype=torch.uint8)
    start = time.perf_counter()
    for _ in range(200):
        plan.batch(images, columns, list(range(BATCH)))
    times["decode+collate"] = [1000 * (time.perf_counter() - start) / 200]
    return n, {name: statistics.median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--jobs", default="1,4")
    parser.add_argument("--galleyd", default=str(ROOT / "build/server/daemon/galleyd"))
    parser.add_argument("--fields", action="store_true",
                        help="measure the field path instead (images+captions against images)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clip", action="store_true",
                        help="image-text shards: galley with fields= against webdataset")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="galley_shards_bench_"))
    if args.fields:
        try:
            n, ms = field_path_figures(directory, args.galleyd, args.images, args.shards,
                                       args.rounds)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        extra = ms["images+fields"] - ms["images"]
        print(f"{n} samples (jpg + txt + json), {args.shards} shards, batch {BATCH}, "
              f"RandomResizedCrop(224), median of {args.rounds} epochs each, alternated")
        print("| batch carries | ms per batch |")
        print("|---|---|")
        for name in ("images", "images+fields"):
            print(f"| {name} | {ms[name]:.2f} |")
        print(f"\nfield path: {extra:+.2f} ms per batch ({1000 * extra / BATCH:+.1f} us per sample, "
              f"{100 * extra / ms['images']:+.1f}%); of which the job's decoding and "
              f"collating, alone: {ms['decode+collate']:.2f} ms per batch")
        return
    try:
        (directory / "ix").mkdir()
        folder, urls, n = make_corpus(directory, args.images, args.shards, captions=args.clip)
        counts = []
        for u in urls:
            with tarfile.open(u) as tar:
                counts.append(len(tar.getmembers()) // (4 if args.clip else 2))
        socket, proc = start_daemon(directory, args.galleyd, "--allowed-root", str(directory),
                                    "--tar-index-dir", str(directory / "index"))
        ctx = mp.get_context("spawn")
        rows = []
        try:
            for jobs in [int(j) for j in args.jobs.split(",")]:
                kinds = (("galley-clip", "webdataset-clip") if args.clip else
                         ("galley-folder", "galley-shards", "webdataset", "wids"))
                for kind in kinds:
                    out = ctx.Queue()
                    if kind == "galley-folder":
                        targets = [(run_galley, (kind, str(folder), socket, s, out))
                                   for s in range(jobs)]
                    elif kind == "galley-shards":
                        targets = [(run_galley, (kind, urls, socket, s, out)) for s in range(jobs)]
                    elif kind == "galley-clip":
                        targets = [(run_galley_clip, (urls, socket, s, out)) for s in range(jobs)]
                    elif kind == "webdataset-clip":
                        targets = [(run_webdataset_clip, (urls, s, out)) for s in range(jobs)]
                    elif kind == "webdataset":
                        targets = [(run_webdataset, (urls, s, out)) for s in range(jobs)]
                    else:
                        targets = [(run_wids, (urls, counts, s, out)) for s in range(jobs)]
                    start = time.time()
                    procs = [ctx.Process(target=t, args=a) for t, a in targets]
                    for p in procs:
                        p.start()
                    results = [out.get(timeout=3600) for _ in procs]
                    for p in procs:
                        p.join()
                    wall = time.time() - start
                    orders = [r[3] for r in results]
                    assert all(sorted(o) == list(range(n)) for o in orders), kind
                    r, p_value = order_quality(orders, n)
                    rows.append((kind, jobs, jobs * n / wall, r, p_value))
                    print(f"{kind:14s} jobs={jobs} {jobs * n / wall:8.1f} img/s  "
                          f"r={r:+.3f}  p={p_value:.2e}", flush=True)
        finally:
            proc.terminate()
            proc.wait()
        if args.clip:
            print(f"\n{n} images + captions, {args.shards} shards, batch {BATCH}")
            print("| loader | jobs | images/s (all jobs) |")
            print("|---|---|---|")
            for kind, jobs, rate, _r, _p in rows:
                print(f"| {kind} | {jobs} | {rate:.0f} |")
            return
        figures = index_figures(directory, args.galleyd, urls)
        print()
        print(f"{n} images, {args.shards} shards, batch {BATCH}, one epoch per job")
        print("| loader | jobs | images/s (all jobs) | order r | chi-square p |")
        print("|---|---|---|---|---|")
        for kind, jobs, rate, r, p_value in rows:
            print(f"| {kind} | {jobs} | {rate:.0f} | {r:+.3f} | {p_value:.2g} |")
        per_shard = figures["64 shards"] / args.shards
        print(f"\nindex, {args.shards} shards of {n // args.shards} samples: "
              f"{figures['64 shards']:.3f} s ({1000 * per_shard:.2f} ms per shard)")
        print(f"index, one shard of 100,000 members: {figures['100,000 members']:.3f} s "
              f"({100000 / figures['100,000 members']:,.0f} members/s)")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
