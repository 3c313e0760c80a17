#!/usr/bin/python3
"""What max_resolution=N changes: cache capacity, crop pixels, throughput.

Usage:
  bench/max_resolution.py [--images 2000] [--max-resolution 256] [--cache-bytes B]
                          [--parts capacity,pixels,throughput]
                          [--galleyd PATH] [--results DIR]

On the demo ImageFolder (scripts/make_demo_dataset.py: 300-600 px JPEGs,
into .demo/bench-<N>):

1. capacity: a galleyd whose decoded tier holds everything runs one epoch
   exact and one with max_resolution=N; the tier's own counters give the
   bytes per item of each, hence items per GiB, and the arithmetic for
   ImageNet-1k (1,281,167 items, a mean size of 400x350 or 469x387 px
   assumed, each kept at its shrunk size) on 256 GiB and 1 TiB nodes.
2. pixels: RandomResizedCrop(224) (no flip) with the same seed, hence the
   same draws, exact and with max_resolution=N, every item's sample: mean
   absolute difference and PSNR of the shrunk path's crops against the exact
   path's; the same for the evaluation transform Resize(256)+CenterCrop(224).
3. throughput: bench/compare_pytorch.py's jobs (RandomResizedCrop(224) +
   flip, uint8, batch 64), cold (1job, 4same) and warm (warm, warm4: timed
   after one untimed epoch), galley exact, galley max_resolution=N and
   torch's DataLoader (2 workers per job) in the same run, with one cache
   size for every galley run: by default the geometric mean of the shrunk
   and the full-resolution decoded set, so below the full set and above the
   shrunk one.

Writes DIR/max_resolution.csv (the throughput rows) and prints tables.
"""

import argparse
import csv
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "python"))

import compare_pytorch as cp  # noqa: E402

IMAGENET_ITEMS = 1_281_167
# Mean width x height assumed for ImageNet-1k's training images: a round
# 400x350, and 469x387 (the mean usually reported for the set, which makes
# the ~700 GB often quoted for it decoded).
IMAGENET_MEAN_SIZES = ((400, 350), (469, 387))
ENTRY_OVERHEAD = 256  # the decoded tier's charge per entry (docs/cache.md)
GIB = 1 << 30
NODES = (("256 GiB", 256 * GIB), ("1 TiB", 1024 * GIB))


def epoch_by_id(socket, dataset, transform, seed, max_resolution, batch_size=64):
    import galley
    loader = galley.DataLoader(str(dataset), batch_size=batch_size, transform=transform,
                               seed=seed, epochs=1, socket=socket,
                               max_resolution=max_resolution)
    out = {}
    for images, _labels, ids in loader.iter_with_ids():
        for i, image in zip(ids.tolist(), images):
            out[i] = image.clone()
    loader.close()
    return out


def with_daemon(args, dataset, cache_bytes, extra, body):
    run_dir = tempfile.mkdtemp(prefix="galley-maxres-")
    daemon = None
    try:
        daemon, socket = cp.start_daemon(args.galleyd, dataset, run_dir, cache_bytes, extra)
        return body(socket)
    finally:
        if daemon is not None:
            cp.stop_daemon(daemon)
            cp.CHILDREN.daemons.remove(daemon)
        shutil.rmtree(run_dir, ignore_errors=True)


def capacity(args, ctx, sizes):
    """Bytes per item of the decoded tier, measured, exact and shrunk."""
    import galley
    from galley import transforms as T
    full = sum(3 * w * h + ENTRY_OVERHEAD for w, h in sizes)
    cache_bytes = int(full * 1.3)

    def body(socket):
        measured = {}
        for label, limit in (("exact", None), (f"max_resolution={args.max_resolution}",
                                               args.max_resolution)):
            before = galley.query("cache", socket=socket)["tiers"]["decoded"]
            epoch_by_id(socket, ctx["dataset"], T.Compose([T.RandomResizedCrop(224)]), 1, limit)
            after = galley.query("cache", socket=socket)["tiers"]["decoded"]
            measured[label] = (after["entries"] - before["entries"],
                               after["bytes"] - before["bytes"])
        return measured

    measured = with_daemon(args, ctx["dataset"], cache_bytes,
                           ["--cache-split", "0,100,0", "--cache-prefault=false"], body)
    print(f"\n== decoded tier: items per GiB ({len(sizes)} demo JPEGs, 300-600 px) ==")
    print(f"{'':<22} {'items':>6} {'tier bytes':>14} {'bytes/item':>11} {'items/GiB':>10}")
    per_item = {}
    for label, (entries, tier_bytes) in measured.items():
        per_item[label] = tier_bytes / entries if entries else float("nan")
        print(f"{label:<22} {entries:>6} {tier_bytes:>14,} {per_item[label]:>11,.0f} "
              f"{GIB / per_item[label]:>10,.0f}")
    labels = list(per_item)
    ratio = per_item[labels[0]] / per_item[labels[1]]
    print(f"the shrunk tier holds {ratio:.2f}x the items")

    print(f"\n== ImageNet-1k ({IMAGENET_ITEMS:,} items) in a decoded tier of a node's size ==")
    print(f"{'mean size assumed':<18} {'':<20} {'kept at':>8} {'bytes/item':>11} "
          f"{'whole set':>10} " + " ".join(f"{'fits in ' + name:>17}" for name, _ in NODES))
    for w, h in IMAGENET_MEAN_SIZES:
        sw, sh = cp.shrunk_size(w, h, args.max_resolution)
        for label, item_bytes, kept in (("exact", 3 * w * h + ENTRY_OVERHEAD, f"{w}x{h}"),
                                        (labels[1], 3 * sw * sh + ENTRY_OVERHEAD,
                                         f"{sw}x{sh}")):
            total = IMAGENET_ITEMS * item_bytes
            fits = [min(1.0, node / total) for _, node in NODES]
            print(f"{f'{w}x{h}':<18} {label:<20} {kept:>8} {item_bytes:>11,} "
                  f"{total / GIB:>6,.0f} GiB " + " ".join(f"{f * 100:>16.0f}%" for f in fits))
    return measured


def psnr(mse):
    return float("inf") if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


def pixels(args, ctx):
    """The shrunk path's samples against the exact path's, same draws."""
    import torch
    from galley import transforms as T
    transforms = (("RandomResizedCrop(224)", T.Compose([T.RandomResizedCrop(224)])),
                  ("Resize(256)+CenterCrop(224)", T.Compose([T.Resize(256), T.CenterCrop(224)])))
    def body(socket):
        out = []
        for name, transform in transforms:
            exact = epoch_by_id(socket, ctx["dataset"], transform, 7, None)
            shrunk = epoch_by_id(socket, ctx["dataset"], transform, 7, args.max_resolution)
            mae, mse, same = [], [], 0
            for i in exact:
                d = exact[i].double() - shrunk[i].double()
                mae.append(float(d.abs().mean()))
                mse.append(float((d * d).mean()))
                same += int(torch.equal(exact[i], shrunk[i]))
            n = len(mae)
            mae_t, mse_t = torch.tensor(mae), torch.tensor(mse)
            out.append((name, n, float(mae_t.mean()), float(mae_t.median()),
                        psnr(float(mse_t.mean())), float(torch.tensor([psnr(m) for m in mse])
                                                         .median()), same))
        return out

    rows = with_daemon(args, ctx["dataset"], 0, [], body)
    print(f"\n== samples with max_resolution={args.max_resolution} against the exact path "
          f"(same seed, same draws; uint8 levels) ==")
    print(f"{'transform':<28} {'samples':>7} {'MAE mean':>9} {'MAE med':>8} {'PSNR dB':>8} "
          f"{'PSNR med':>9} {'identical':>9}")
    for name, n, mae, mae_med, p, p_med, same in rows:
        print(f"{name:<28} {n:>7} {mae:>9.2f} {mae_med:>8.2f} {p:>8.2f} {p_med:>9.2f} {same:>9}")
    return rows


def throughput(args, ctx, cache_bytes):
    """compare_pytorch's scenarios, galley exact and shrunk beside torch."""
    scenarios = ["1job", "4same", "warm", "warm4"]
    run_args = argparse.Namespace(batch_size=64, batches_per_job=args.images // 64,
                                  torch_workers=2, job_timeout=1800.0, verbose=False,
                                  cache_bytes=cache_bytes, galleyd=args.galleyd,
                                  galleyd_args="--cache-prefault=false",
                                  cores=len(os.sched_getaffinity(0)))
    ctx["warm_cache_bytes"] = cache_bytes
    rows = []
    for name in scenarios:
        for label in ("galley", f"galley@{args.max_resolution}", "pytorch"):
            try:
                result = cp.run_side(label, name, run_args, ctx)
            except Exception as e:  # one failed side is a row, not the end of the run
                result = {"scenario": name, "error": f"{type(e).__name__}: {e}"}
                cp.CHILDREN.kill_all()
            result["side"] = label
            rows.append(result)
            print(f"  {name:<6} {label:<12} " + (
                f"{result['images_per_s']:8.1f} img/s, {result['cpu_s_per_image'] * 1e3:.2f} "
                f"CPU ms/img" if "images_per_s" in result else result.get("error", "")),
                flush=True)
    print(f"\n== throughput (img/s, all jobs together; galley cache {cache_bytes / 2**20:.0f} "
          f"MiB for every galley run) ==")
    labels = ["galley", f"galley@{args.max_resolution}", "pytorch"]
    print(f"{'scenario':<8} " + " ".join(f"{label:>14}" for label in labels) +
          f" {'shrunk/exact':>13} {'shrunk/torch':>13}")
    for name in scenarios:
        by_label = {r["side"]: r.get("images_per_s") for r in rows if r["scenario"] == name}
        values = [by_label.get(label) for label in labels]
        ratio = (lambda a, b: f"{a / b:.2f}x" if a and b else "-")
        print(f"{name:<8} " + " ".join(f"{v:>14.1f}" if v else f"{'-':>14}" for v in values) +
              f" {ratio(values[1], values[0]):>13} {ratio(values[1], values[2]):>13}")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--max-resolution", type=int, default=256)
    p.add_argument("--cache-bytes", type=int, default=None,
                   help="galleyd's cache in the throughput part (default: the geometric mean "
                        "of the shrunk and the full decoded set)")
    p.add_argument("--parts", default="capacity,pixels,throughput")
    p.add_argument("--galleyd", default=str(REPO / "build/server/daemon/galleyd"))
    p.add_argument("--results", default=str(REPO / "results"))
    args = p.parse_args()
    parts = {x.strip() for x in args.parts.split(",") if x.strip()}

    ctx, args.galleyd = cp.prepare_run(args.images, args.classes, args.galleyd, "maxres")
    ctx["galleyd_mtime"] = cp.binary_mtime(args.galleyd)
    sizes = cp.image_sizes(ctx["files"])
    full = sum(3 * w * h + ENTRY_OVERHEAD for w, h in sizes)
    shrunk = sum(3 * sw * sh + ENTRY_OVERHEAD
                 for sw, sh in (cp.shrunk_size(w, h, args.max_resolution) for w, h in sizes))
    cache_bytes = args.cache_bytes or int(math.sqrt(full * shrunk))
    print(f"{len(sizes)} images in {ctx['dataset']}: decoded {full / 2**20:.0f} MiB exact, "
          f"{shrunk / 2**20:.0f} MiB at max_resolution={args.max_resolution}")
    try:
        if "capacity" in parts:
            capacity(args, ctx, sizes)
        if "pixels" in parts:
            pixels(args, ctx)
        if "throughput" in parts:
            rows = throughput(args, ctx, cache_bytes)
            os.makedirs(args.results, exist_ok=True)
            path = os.path.join(args.results, "max_resolution.csv")
            with open(path, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=cp.CSV_FIELDS, extrasaction="ignore")
                writer.writeheader()
                writer.writerows(rows)
            print(f"wrote {path}")
    finally:
        cp.CHILDREN.kill_all()


if __name__ == "__main__":
    main()
