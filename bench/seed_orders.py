#!/usr/bin/python3
"""What a seed sweep run at once costs when each job keeps its own order.

Under the default policy (dsa), concurrent jobs over the same items receive
one shared order whatever their seeds, and each item is read and decoded
once for all of them; policy="independent" gives each job the order of its
own seed, and the jobs then share only what the cache tiers hold. For 2 and
4 concurrent jobs with different seeds, each policy, and galleyd's cache off
(--cache-bytes 0) and on (room for the whole dataset decoded), this starts a
fresh galleyd, runs the jobs (each its own process, released together after
opening) for the given epochs, and prints from galleyd's counters the loads,
file reads and decodes per request (a request: one item delivered to one
job), the mean Spearman correlation between the jobs' orders of each epoch,
and aggregate images/s.

    /usr/bin/python3 bench/seed_orders.py [--images 1000] [--jobs 2,4] [--epochs 2]
        [--batch-size 32] [--galleyd build/server/daemon/galleyd] [--results results]

Writes DIR/seed_orders.csv and prints a Markdown table (docs/sampling.md
section 1.2 holds one).
"""

import argparse
import csv
import itertools
import math
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_pytorch as cp  # noqa: E402


def spearman(a, b):
    """Rank correlation of the positions of the same items in two orders."""
    n = len(a)
    position = {item: i for i, item in enumerate(b)}
    d2 = sum((i - position[item]) ** 2 for i, item in enumerate(a))
    return 1 - 6 * d2 / (n * (n * n - 1))


def run_job(socket, dataset, seed, policy, epochs, batch_size, barrier, results):
    cp.die_with_parent()
    import warnings
    # The notice a job with another seed gets under a shared order is what
    # this measures; once per job in the output is noise.
    warnings.filterwarnings("ignore", message=".*one shared order.*")
    import galley
    from galley import transforms as T
    loader = galley.DataLoader(dataset, batch_size=batch_size, shuffle=True, seed=seed,
                               policy=policy, epochs=epochs, socket=socket,
                               transform=T.Compose([T.RandomResizedCrop(224),
                                                    T.RandomHorizontalFlip()]))
    len(loader)  # opens the job
    barrier.wait(timeout=120)
    orders = []
    for _ in range(epochs):
        orders.append([i for _x, _y, ids in loader.iter_with_ids() for i in ids.tolist()])
    loader.close()
    results.put((seed, orders, time.monotonic()))


def run(args, dataset, jobs, policy, cache_bytes):
    import galley
    run_dir = tempfile.mkdtemp(prefix="galley-seeds-")
    daemon = None
    try:
        daemon, socket = cp.start_daemon(args.galleyd, dataset, run_dir, cache_bytes)
        ctx = mp.get_context("spawn")
        barrier, results = ctx.Barrier(jobs + 1), ctx.Queue()
        procs = [ctx.Process(target=run_job, args=(socket, str(dataset), 1000 + k, policy,
                                                   args.epochs, args.batch_size, barrier,
                                                   results))
                 for k in range(jobs)]
        for p in procs:
            p.start()
            cp.CHILDREN.processes.append(p)
        barrier.wait(timeout=120)
        start = time.monotonic()
        rows = [results.get(timeout=1800) for _ in procs]
        wall = max(end for _seed, _orders, end in rows) - start
        for p in procs:
            p.join(timeout=30)
            cp.CHILDREN.processes.remove(p)
        status = galley.query("status", socket=socket)
    finally:
        if daemon is not None:
            cp.stop_daemon(daemon)
            cp.CHILDREN.daemons.remove(daemon)
        shutil.rmtree(run_dir, ignore_errors=True)
    group, = [g for g in status["samplers"] if g["dataset"] == str(dataset)]
    pipeline = status["pipeline"]
    requests = group["requests"]
    orders = [orders for _seed, orders, _end in sorted(rows)]
    rhos = [sum(spearman(a[e], b[e]) for a, b in itertools.combinations(orders, 2)) /
            math.comb(jobs, 2) for e in range(args.epochs)]
    return {"jobs": jobs, "policy": policy, "cache": "on" if cache_bytes else "off",
            "cache_bytes": cache_bytes, "requests": requests,
            "loads_per_request": group["loads"] / requests,
            "file_reads_per_request": pipeline["file_reads"] / requests,
            "decodes_per_request": pipeline["decodes"] / requests,
            "decoded_hits_per_request": pipeline["decoded_hits"] / requests,
            "spearman": rhos, "images_per_s": sum(map(len, itertools.chain(*orders))) / wall}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=1000)
    p.add_argument("--jobs", default="2,4")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--galleyd", default=str(cp.REPO / "build/server/daemon/galleyd"))
    p.add_argument("--results", default=str(cp.REPO / "results"))
    args = p.parse_args()
    ctx, args.galleyd = cp.prepare_run(args.images, 10, args.galleyd, "seeds")
    dataset, files = ctx["dataset"], ctx["files"]
    # Room for every decoded image, with the planner's split and bookkeeping.
    cache_on = int(math.ceil(cp.decoded_bytes(files) * 1.25 / (1 << 20))) << 20
    print(f"{len(files)} images in {dataset}, batch {args.batch_size}, {args.epochs} epochs, "
          f"RandomResizedCrop(224) + flip; cache on = --cache-bytes {cache_on}")
    rows = []
    for jobs in (int(j) for j in args.jobs.split(",")):
        for cache_bytes in (0, cache_on):
            for policy in ("dsa", "independent"):
                cp.warm_page_cache(files)
                row = run(args, dataset, jobs, policy, cache_bytes)
                rows.append(row)
                print(f"  {jobs} jobs, cache {row['cache']}, {policy}: loads/request "
                      f"{row['loads_per_request']:.3f}, decodes/request "
                      f"{row['decodes_per_request']:.3f}, Spearman "
                      f"{', '.join(f'{r:+.3f}' for r in row['spearman'])}", flush=True)
    print("\n| jobs | cache | policy | loads / request | file reads / request | "
          "decodes / request | Spearman between jobs (per epoch) | images/s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['jobs']} | {r['cache']} | `{r['policy']}` | {r['loads_per_request']:.3f} | "
              f"{r['file_reads_per_request']:.3f} | {r['decodes_per_request']:.3f} | "
              f"{' / '.join(f'{x:+.3f}' for x in r['spearman'])} | {r['images_per_s']:.0f} |")
    os.makedirs(args.results, exist_ok=True)
    path = os.path.join(args.results, "seed_orders.csv")
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
