#!/usr/bin/python3
"""galley against one peer loader at the same time, each on its own half of the cores.

Usage:
  bench/paired_peer.py --peer ffcv|pytorch [--scenario 1job] [--images 2000]
                       [--batches-per-job 40] [--passes 4]

On a machine that other work shares, two sides run one after the other see
different loads, and their ratio measures the load more than the loaders.
Here both sides run the same scenario (compare_pytorch.py's job body,
dataset, transforms and CPU accounting) *simultaneously*: the CPUs this
process may use are split into two halves, galley (galleyd and its job
processes) is pinned to one and the peer to the other, and every pass swaps
the halves, so each side meets the same background on the same cores.
galleyd's default worker count follows its CPU affinity, so it prepares with
as many threads as the peer has cores. Prints each pass and the mean of each
side's images/s and CPU per image over all passes.

The peer runs as in compare_pytorch.py: ffcv needs the torch 2.x venv with
FFCV (bench/README.md); pytorch is torch.utils.data.DataLoader with
--torch-workers workers.
"""

import argparse
import atexit
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402


def run_pinned(side, cpus, args, ctx, out):
    """Runs one side with this thread (and so every process it starts) on `cpus`."""
    os.sched_setaffinity(0, cpus)
    try:
        out[side] = cp.run_side(side, args.scenario, args, ctx)
    except Exception as e:  # reported as a failed pass, the other side goes on
        out[side] = {"error": f"{type(e).__name__}: {e}"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peer", choices=["ffcv", "pytorch"], required=True)
    p.add_argument("--scenario", default="1job", choices=["1job", "4same"])
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--batches-per-job", type=int, default=40)
    p.add_argument("--passes", type=int, default=4, help="even: each side as often on each half")
    p.add_argument("--galleyd", default=str(cp.REPO / "build/server/daemon/galleyd"))
    p.add_argument("--torch-workers", type=int, default=None,
                   help="peer workers (default: the cores of its half)")
    p.add_argument("--job-timeout", type=float, default=600.0)
    args = p.parse_args()
    # What compare_pytorch.run_side reads.
    args.cache_bytes = None
    args.verbose = False
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        p.error("needs at least 2 CPUs to split")
    half = len(cpus) // 2
    args.halves = (set(cpus[:half]), set(cpus[half:2 * half]))
    args.cores = half
    if args.torch_workers is None:
        args.torch_workers = half
    return args


def main():
    args = parse_args()
    mtime = cp.binary_mtime(args.galleyd)
    ctx, args.galleyd = cp.prepare_run(args.images, args.classes, args.galleyd, "paired")
    ctx["galleyd_mtime"] = mtime
    if args.peer == "ffcv":
        ctx["beton"] = cp.write_beton(ctx["dataset"])
    print(f"{args.scenario}: galley against {args.peer}, simultaneously, each on "
          f"{args.cores} of {2 * args.cores} CPUs, halves swapped every pass; "
          f"{args.batches_per_job} batches of {args.batch_size} per job; galleyd built "
          f"{ctx['galleyd_mtime']}; load average {os.getloadavg()[0]:.1f} at start")

    rows = {"galley": [], args.peer: []}
    for k in range(args.passes):
        halves = args.halves if k % 2 == 0 else args.halves[::-1]
        out = {}
        threads = [threading.Thread(target=run_pinned, args=(side, cpus, args, ctx, out))
                   for side, cpus in zip(("galley", args.peer), halves)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        line = []
        for side, cpus in zip(("galley", args.peer), halves):
            r = out[side]
            if "error" in r:
                line.append(f"{side} on {sorted(cpus)}: {r['error']}")
                continue
            rows[side].append(r)
            line.append(f"{side} on {sorted(cpus)}: {r['images_per_s']:.1f} images/s, "
                        f"{1e3 * r['cpu_s_per_image']:.2f} CPU ms/image")
        print(f"pass {k + 1}: " + "; ".join(line), flush=True)

    if not rows["galley"] or not rows[args.peer]:
        sys.exit("no pass completed on both sides")
    g_ips = statistics.mean(r["images_per_s"] for r in rows["galley"])
    p_ips = statistics.mean(r["images_per_s"] for r in rows[args.peer])
    g_cpu = statistics.mean(r["cpu_s_per_image"] for r in rows["galley"])
    p_cpu = statistics.mean(r["cpu_s_per_image"] for r in rows[args.peer])
    print(f"\nmean over {len(rows['galley'])} passes: galley {g_ips:.1f} images/s "
          f"({1e3 * g_cpu:.2f} CPU ms/image), {args.peer} {p_ips:.1f} images/s "
          f"({1e3 * p_cpu:.2f} CPU ms/image); galley/{args.peer} {g_ips / p_ips:.2f}x; "
          f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
