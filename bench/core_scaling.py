#!/usr/bin/python3
"""How galley and the PyTorch DataLoader scale with cores: compare_pytorch.py's
1-job and 4-job scenarios at 2, 4, 8 and 16 pinned cores.

Usage: core_scaling.py [--cores 2,4,8,16] [--scenarios 1job,4same] [--images N]
                       [--batches-per-job N] [--results DIR] [--galleyd PATH]

For each core count N, bench/compare_pytorch.py runs under `taskset -c 0-(N-1)`:
galleyd, its jobs and the PyTorch DataLoaders and their workers all inherit
that CPU set, so both sides get the same N cores. galleyd runs with
`--worker-threads N`; each DataLoader gets max(2, N / jobs) worker processes,
so the PyTorch side can use every pinned core too. Scenarios run one
compare_pytorch.py invocation each (the worker count depends on the jobs).
Each run's own CSV and plot stay in DIR/cores-N/SCENARIO/; the rows are
gathered into DIR/core_scaling.csv (one row per core count, scenario and
side), and a table of aggregate images/s, the galley/PyTorch ratio and each
side's speed-up over the smallest core count is printed.

The machine needs at least max(--cores) CPUs; a core count above what this
process may use is skipped with a message.
"""
import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIELDS = ["cores", "scenario", "side", "jobs", "torch_workers_per_job", "images_per_s",
          "ratio", "cpu_s_per_image", "daemon_peak_rss_bytes", "loads_per_request",
          "fraction_of_limit", "loadavg_1m", "error"]


def run_one(args, cores, scenario, out_dir):
    jobs = 1 if scenario.startswith("1") else int("".join(c for c in scenario if c.isdigit()))
    torch_workers = max(2, cores // jobs)
    available = sorted(os.sched_getaffinity(0))
    cpu_list = ",".join(str(c) for c in available[:cores])
    command = ["taskset", "-c", cpu_list, sys.executable, str(REPO / "bench/compare_pytorch.py"),
               "--scenarios", scenario, "--images", str(args.images),
               "--batches-per-job", str(args.batches_per_job), "--cores", str(cores),
               "--torch-workers", str(torch_workers), "--galleyd", args.galleyd,
               "--results", str(out_dir), f"--galleyd-args=--worker-threads={cores}"]
    print(f"\n=== {cores} cores, {scenario}: {' '.join(command)}", flush=True)
    done = subprocess.run(command)
    rows = []
    path = out_dir / "compare_pytorch.csv"
    if done.returncode != 0 or not path.exists():
        return [{"cores": cores, "scenario": scenario, "side": side, "jobs": jobs,
                 "torch_workers_per_job": torch_workers,
                 "error": f"compare_pytorch.py exited with {done.returncode}"}
                for side in ("galley", "pytorch")]
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            row.update(cores=cores, torch_workers_per_job=torch_workers)
            rows.append({k: row.get(k, "") for k in FIELDS})
    return rows


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def print_table(rows, core_counts):
    base = {}
    for r in rows:
        if int(r["cores"]) == core_counts[0] and number(r["images_per_s"]):
            base[(r["scenario"], r["side"])] = number(r["images_per_s"])
    print(f"\n| cores | scenario | galley img/s | torch img/s | galley/torch | "
          f"galley speed-up | torch speed-up | galley ms CPU/img | torch ms CPU/img |")
    print("|---|---|---|---|---|---|---|---|---|")
    pairs = {}
    for r in rows:
        pairs.setdefault((int(r["cores"]), r["scenario"]), {})[r["side"]] = r
    for (cores, scenario), sides in sorted(pairs.items()):
        g, t = sides.get("galley", {}), sides.get("pytorch", {})
        gv, tv = number(g.get("images_per_s")), number(t.get("images_per_s"))

        def fmt(value, spec):
            return "-" if value is None else format(value, spec)

        def speedup(value, side):
            b = base.get((scenario, side))
            return None if value is None or not b else value / b

        def cpu_ms(row):
            value = number(row.get("cpu_s_per_image"))
            return None if value is None else value * 1e3

        print(f"| {cores} | {scenario} | {fmt(gv, '.0f')} | {fmt(tv, '.0f')} | "
              f"{fmt(gv / tv if gv and tv else None, '.2f')} | "
              f"{fmt(speedup(gv, 'galley'), '.2f')} | {fmt(speedup(tv, 'pytorch'), '.2f')} | "
              f"{fmt(cpu_ms(g), '.2f')} | {fmt(cpu_ms(t), '.2f')} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", default="2,4,8,16", help="core counts, comma-separated")
    parser.add_argument("--scenarios", default="1job,4same",
                        help="compare_pytorch.py scenarios, comma-separated")
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--batches-per-job", type=int, default=None,
                        help="default: one epoch (images // 64)")
    parser.add_argument("--galleyd", default=str(REPO / "build/server/daemon/galleyd"))
    parser.add_argument("--results", default=str(REPO / "results/core_scaling"))
    args = parser.parse_args()
    if args.batches_per_job is None:
        args.batches_per_job = args.images // 64
    available = len(os.sched_getaffinity(0))
    core_counts = []
    for text in args.cores.split(","):
        cores = int(text)
        if cores < 1:
            sys.exit("core counts are 1 or more")
        if cores > available:
            print(f"skipping {cores} cores: this process may use {available}")
            continue
        core_counts.append(cores)
    if not core_counts:
        sys.exit("no core count fits this machine")
    results = Path(args.results)
    rows = []
    for cores in core_counts:
        for scenario in args.scenarios.split(","):
            out_dir = results / f"cores-{cores}" / scenario
            out_dir.mkdir(parents=True, exist_ok=True)
            rows += run_one(args, cores, scenario, out_dir)
            with open(results / "core_scaling.csv", "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=FIELDS)
                writer.writeheader()
                writer.writerows(rows)
    print_table(rows, core_counts)
    print(f"\nwrote {results / 'core_scaling.csv'}")


if __name__ == "__main__":
    main()
