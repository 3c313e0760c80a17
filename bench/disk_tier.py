#!/usr/bin/python3
"""An epoch from galleyd's disk tier against one from the files, beside the
PyTorch DataLoader, in one run.

Usage:
  bench/disk_tier.py [--dataset DIR | --images 2000] [--batch-size 64]
                     [--cache-bytes 64M] [--storage-bytes-per-s 0]
                     [--max-resolution N] [--galleyd PATH]

Sides, each timing one epoch of RandomResizedCrop(224) + RandomHorizontalFlip
(uint8, batch 64, shuffled) after one untimed batch (job open, first fill),
with the dataset's files, and the disk tier's, dropped from the page cache
first (POSIX_FADV_DONTNEED on every file: the data comes from the disk):
  files    galleyd with a memory cache smaller than the set (--cache-bytes)
           and no disk tier: every item is read from storage.
  disk     the same galleyd with a disk tier (--disk-cache) that one epoch
           filled (timed apart: fill_images_per_s), then restarted: the
           memory tiers are empty and the epoch is the first after a
           restart. It must read no file.
  pytorch  torch.utils.data.DataLoader over torchvision's ImageFolder, two
           workers, the same transform.
With --storage-bytes-per-s R galleyd's storage reads are slowed to R bytes/s
(galleyd's storage_throttle, standing for a network file system); the disk
tier is not. PyTorch reads the local files at the disk's own speed then,
so its figure is the local-disk one. With --max-resolution N the galley
sides ask for max_resolution=N: the disk tier keeps the shrunk pixels
packed, and an entry is unpacked, not decoded.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "bench"))

import compare_pytorch as cp  # noqa: E402  (daemon start and stop, image lists)


def parse_size(text):
    """Bytes of "64M", "8G", "4096"."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = str(text).strip().upper()
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def drop_page_cache(root):
    """Drops every file under `root` from the page cache; returns the bytes."""
    total = 0
    for path in Path(root).rglob("*"):
        if not path.is_file():
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            total += os.fstat(fd).st_size
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return total


def status(socket):
    import galley
    return galley.query("status", socket=socket)


def time_epoch(loader):
    """(images, seconds) of one epoch after its first batch."""
    batches = iter(loader)
    next(batches)
    start = time.monotonic()
    images = 0
    for batch, _labels in batches:
        images += int(batch.shape[0])
    return images, time.monotonic() - start


def galley_loader(args, socket, seed):
    import galley
    from galley import transforms as GT
    return galley.DataLoader(str(args.dataset), batch_size=args.batch_size, shuffle=True,
                             transform=GT.Compose([GT.RandomResizedCrop(224),
                                                   GT.RandomHorizontalFlip()]),
                             seed=seed, socket=socket, max_resolution=args.max_resolution,
                             timeout=300.0)


def start(args, run_dir, disk_dir=None):
    extra = ["--worker-threads", "0"]
    if args.storage_bytes_per_s:
        extra += ["--storage-throttle-bytes-per-s", str(args.storage_bytes_per_s)]
    if disk_dir:
        extra += ["--disk-cache", str(disk_dir), "--disk-cache-bytes", str(args.disk_bytes)]
    return cp.start_daemon(args.galleyd, args.dataset, run_dir, parse_size(args.cache_bytes),
                           extra)


def wait_for(socket, pred, what):
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        disk = status(socket)["pipeline"]["disk"]
        if pred(disk):
            return disk
        time.sleep(0.1)
    raise RuntimeError(f"galleyd's disk tier never got {what}")


def run_galley(args, side, n_images):
    run_dir = tempfile.mkdtemp(prefix="galley-disk-bench-")
    disk_dir = Path(run_dir) / "disk" if side == "disk" else None
    daemon = None
    try:
        daemon, socket = start(args, run_dir, disk_dir)
        fill = None
        if side == "disk":
            # The epoch that fills the disk tier, timed apart: what writing
            # costs a first epoch (its files' pages dropped too).
            drop_page_cache(args.dataset)
            loader = galley_loader(args, socket, seed=1)
            fill_images, fill_seconds = time_epoch(loader)
            fill = fill_images / fill_seconds
            loader.close()
            wait_for(socket, lambda d: d["writes"] >= n_images and d["write_queue_bytes"] == 0,
                     "every item written")
            cp.stop_daemon(daemon)
            cp.CHILDREN.daemons.remove(daemon)
            daemon, socket = start(args, run_dir, disk_dir)
            wait_for(socket, lambda d: d["indexed"], "its index")
        dropped = drop_page_cache(args.dataset) + (drop_page_cache(disk_dir) if disk_dir else 0)
        before = status(socket)["pipeline"]
        loader = galley_loader(args, socket, seed=2)
        images, seconds = time_epoch(loader)
        loader.close()
        after = status(socket)["pipeline"]
        out = {"side": side, "images": images, "seconds": seconds,
               "images_per_s": images / seconds, "dropped_mib": dropped / 2**20,
               "file_reads": after["file_reads"] - before["file_reads"],
               "decodes": after["decodes"] - before["decodes"],
               "unpacks": after["unpacks"] - before["unpacks"]}
        if side == "disk":
            disk = after["disk"]
            out["fill_images_per_s"] = fill
            out.update({"disk_hits": disk["hits"] - before["disk"]["hits"],
                        "disk_entries": disk["entries"], "disk_mib": disk["bytes"] / 2**20,
                        "index_seconds": disk["index_seconds"]})
        return out
    finally:
        if daemon is not None:
            cp.stop_daemon(daemon)
            cp.CHILDREN.daemons.remove(daemon)
        shutil.rmtree(run_dir, ignore_errors=True)


def run_pytorch(args):
    import torch
    import torchvision
    from torchvision import transforms as TT
    torch.set_num_threads(1)
    dataset = torchvision.datasets.ImageFolder(
        str(args.dataset), transform=TT.Compose([TT.RandomResizedCrop(224),
                                                 TT.RandomHorizontalFlip(), TT.PILToTensor()]))
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                                         num_workers=2,
                                         generator=torch.Generator().manual_seed(2))
    dropped = drop_page_cache(args.dataset)
    images, seconds = time_epoch(loader)
    return {"side": "pytorch", "images": images, "seconds": seconds,
            "images_per_s": images / seconds, "dropped_mib": dropped / 2**20}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", type=Path, default=None)
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--cache-bytes", default="64M", help="galleyd's memory cache (below the set)")
    p.add_argument("--disk-bytes", default="8G", help="the disk tier's budget (above the set)")
    p.add_argument("--storage-bytes-per-s", type=float, default=0)
    p.add_argument("--max-resolution", type=int, default=None)
    p.add_argument("--sides", default="files,disk,pytorch")
    p.add_argument("--galleyd", default=str(REPO / "build/server/daemon/galleyd"))
    p.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = p.parse_args()
    if args.dataset is None:
        args.dataset = REPO / ".demo" / f"bench-{args.images}"
        subprocess.run([sys.executable, str(REPO / "scripts/make_demo_dataset.py"),
                        str(args.dataset), "--images", str(args.images), "--classes",
                        str(args.classes)], check=True)
    n_images = len(cp.list_images(args.dataset))
    set_mib = sum(os.path.getsize(f) for f in cp.list_images(args.dataset)) / 2**20
    storage = (f"{args.storage_bytes_per_s / 1e6:.0f} MB/s" if args.storage_bytes_per_s
               else "unthrottled")
    print(f"dataset {args.dataset}: {n_images} images, {set_mib:.0f} MiB; memory cache "
          f"{args.cache_bytes}; galleyd's storage {storage}; max_resolution "
          f"{args.max_resolution}")
    rows = []
    for side in args.sides.split(","):
        row = run_pytorch(args) if side == "pytorch" else run_galley(args, side, n_images)
        row["max_resolution"] = args.max_resolution
        row["storage_bytes_per_s"] = args.storage_bytes_per_s
        rows.append(row)
        extra = ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                          for k, v in row.items()
                          if k not in ("side", "images", "seconds", "images_per_s",
                                       "max_resolution", "storage_bytes_per_s"))
        print(f"{side:8s} {row['images_per_s']:8.1f} images/s ({row['images']} images in "
              f"{row['seconds']:.1f} s; {extra})", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
