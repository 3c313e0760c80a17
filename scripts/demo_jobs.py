#!/usr/bin/python3
"""The jobs of scripts/run.sh: N concurrent training-style jobs through galley,
then the same jobs through PyTorch's DataLoader, and what the numbers mean.

Each job is its own process over the same dataset, with
RandomResizedCrop(224) + RandomHorizontalFlip into uint8 batches, as N users
of one node would run them: on the galley side a galley.DataLoader served by
the running galleyd, on the PyTorch side a torch.utils.data.DataLoader over
torchvision's ImageFolder with the same transforms and 2 worker processes
per job (bench/compare_pytorch.py's jobs, which this reuses). Prints each
side's images/s, the ratio, galleyd's loads per request in words, and writes
a plot of each job's images/s over time, galley beside PyTorch.
"""

import argparse
import atexit
import math
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import compare_pytorch as cp  # noqa: E402


def job_specs(side, args, batches):
    return [{"side": side, "scenario": "run", "index": k, "dataset": args.dataset,
             "batch_size": args.batch_size, "batches": batches, "indices": None, "seed": k,
             "delay": 0.0, "untimed_epochs": 0, "torch_workers": args.torch_workers,
             "batch_timeout": 300.0, "socket": args.socket, "daemon_pid": args.daemon_pid}
            for k in range(args.jobs)]


def run_side(side, args, epochs, images):
    """Every job for `epochs` epochs (its first batch untimed: process start,
    worker spawn, job open). Returns (rows, summary)."""
    batches = epochs * math.ceil(images / args.batch_size)
    rows, _lifetime_cpu = cp.run_jobs(side, "run", job_specs(side, args, batches), args)
    summary = cp.summarize(rows)
    cpu = summary["jobs_cpu_s"]
    if side == "galley":
        cpu += (summary["last"]["snapshot_end"]["daemon_cpu"] -
                summary["first"]["snapshot_begin"]["daemon_cpu"])
    summary["cpu_ms_per_image"] = 1e3 * cpu / summary["images"]
    return rows, summary


def rates_over_time(row, zero, span, points=80):
    """A job's images/s at `points` times over `span` seconds since `zero`,
    each over the window of a tenth of the span (at least a second) before
    it: a batch is dozens of images, so a shorter window would show the
    batches rather than the rate."""
    window = max(1.0, span / 10)
    arrivals = [(when - zero, images) for when, images in row["batch_times"]]
    times = [span * (i + 1) / points for i in range(points)]
    rates = [sum(n for t, n in arrivals if now - window < t <= now) / min(window, now)
             for now in times]
    return times, rates


def write_plot(path, sides, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(sides), figsize=(6 * len(sides), 4.2), sharey=True,
                             squeeze=False)
    for ax, (label, rows, summary) in zip(axes[0], sides):
        zero = min(r["t_begin"] for r in rows)
        span = max(r["t_end"] for r in rows) - zero
        for r in rows:
            t, rate = rates_over_time(r, zero, span)
            ax.plot(t, rate, label=f"job {r['index']}")
        ax.set_title(f"{label}: {summary['images_per_s']:.0f} images/s for all jobs")
        ax.set_xlabel("seconds since the jobs started")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("images/s per job")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True, help="the running galleyd's socket")
    parser.add_argument("--daemon-pid", type=int, required=True,
                        help="its pid (its CPU time counts in galley's CPU per image)")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--torch-epochs", type=int, default=1,
                        help="PyTorch's run, shorter because it is slower (default 1; 0: "
                             "galley alone)")
    parser.add_argument("--torch-workers", type=int, default=2)
    parser.add_argument("--plot", default=str(REPO / "results" / "run.png"))
    parser.add_argument("--job-timeout", type=float, default=1800.0)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    atexit.register(cp.CHILDREN.kill_all)  # whatever ends this, the jobs end with it

    files = cp.list_images(args.dataset)
    cp.warm_page_cache(files)
    what = (f"{args.jobs} concurrent jobs over {len(files)} images, batch {args.batch_size}, "
            f"RandomResizedCrop(224) + RandomHorizontalFlip, uint8 NCHW")
    print(what)
    print(f"galley: {args.epochs} epoch(s) per job ...", flush=True)
    g_rows, g = run_side("galley", args, args.epochs, len(files))
    cost = cp.cost_model(g["first"]["snapshot_begin"]["status"],
                         g["last"]["snapshot_end"]["status"], len(os.sched_getaffinity(0)))
    sides = [("galley", g_rows, g)]
    if args.torch_epochs > 0:
        print(f"PyTorch DataLoader, {args.torch_workers} workers per job: {args.torch_epochs} "
              f"epoch(s) per job ...", flush=True)
        sides.append((f"PyTorch ({args.torch_workers} workers/job)",
                      *run_side("pytorch", args, args.torch_epochs, len(files))))

    print()
    print(f"{'job':>4}" + "".join(f" {label.split()[0] + ' images/s':>17}"
                                  for label, _rows, _s in sides))
    for k in range(args.jobs):
        print(f"{k:>4}" + "".join(
            f" {rows[k]['images'] / (rows[k]['t_end'] - rows[k]['t_begin']):>17.1f}"
            for _label, rows, _s in sides))
    print()
    for label, _rows, s in sides:
        print(f"{label:<26} {s['images_per_s']:8.1f} images/s for all jobs "
              f"({s['images']} images in {s['wall_s']:.1f} s), "
              f"{s['cpu_ms_per_image']:.2f} CPU ms per image")
    if len(sides) > 1:
        t = sides[1][2]
        print(f"galley / PyTorch: {g['images_per_s'] / t['images_per_s']:.2f}x the images per "
              f"second, on the same {len(os.sched_getaffinity(0))} cores, the same files and "
              f"the same transforms")
    lpr = cost["loads_per_request"]
    reads, decodes = cost["file_reads_per_request"], cost["decodes_per_request"]
    print()
    print(f"Loads per request: {lpr:.2f}. A request is one image handed to one job; a load is "
          f"one image prepared for them:")
    print(f"read from disk and decoded, or taken decoded from galleyd's cache. {lpr:.2f} means "
          f"each image galleyd prepared went to {1 / lpr:.1f} of the")
    print(f"{args.jobs} jobs on average, which received it in the same round, so the {args.jobs} "
          f"jobs cost about what {args.jobs * lpr:.1f} job(s) would cost alone; and")
    from_cache = " (the rest came from the cache)" if reads < lpr - 0.005 else ""
    print(f"only {reads:.2f} file reads and {decodes:.2f} decodes per request were "
          f"needed{from_cache}. PyTorch's loaders share")
    print("nothing: every job reads and decodes every image itself, 1.00 load per request.")
    print(f"The jobs were given different seeds, as different users' jobs would be: under "
          f"galley's default policy, jobs")
    print("running together receive one shared order of the images whatever their seeds (that "
          "is how each image is loaded once);")
    print('policy="independent" gives each seed its own order, at the cost measured in '
          'docs/sampling.md, section 1.2.')
    try:
        write_plot(args.plot, sides, f"{what}; {time.strftime('%Y-%m-%d %H:%M')}")
        print(f"\nplot: {args.plot} (images/s per job over time"
              f"{', galley beside PyTorch' if len(sides) > 1 else ''})")
    except Exception as e:  # no matplotlib: the numbers above still stand
        print(f"\nno plot ({type(e).__name__}: {e})", file=sys.stderr)


if __name__ == "__main__":
    main()
