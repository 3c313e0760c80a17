#!/usr/bin/python3
"""Epoch 1 vs epoch 2 throughput with the tiered cache at several budgets.

For each cache budget (a fraction of the demo dataset's decoded size) and
each job count, starts a fresh galleyd, runs the jobs for two epochs over the
same ImageNet-like JPEG dataset (RandomResizedCrop(224) + flip, uint8, batch
64), and prints per-epoch aggregate images/s, the plan galleyd chose (split,
predicted rate, measured inputs) and the pipeline's reads, decodes and tier
hits in epoch 2.

    PYTHONPATH=python /usr/bin/python3 bench/cache_epochs.py [--images 5000]
        [--fractions 0.25,0.5,1.0] [--jobs 1,4] [--galleyd build/server/daemon/galleyd]
"""

import argparse
import csv
import multiprocessing as mp
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def decoded_bytes(root):
    from PIL import Image
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.lower().endswith((".jpg", ".jpeg", ".png")):
                with Image.open(os.path.join(dirpath, name)) as im:
                    total += im.width * im.height * 3
    return total


def job(socket, root, seed, barrier, marks, out):
    import galley
    from galley import transforms as T
    loader = galley.DataLoader(root, batch_size=64, shuffle=True, seed=seed, socket=socket,
                               transform=T.Compose([T.RandomResizedCrop(224),
                                                    T.RandomHorizontalFlip()]))
    len(loader)
    barrier.wait()
    times, counts = [], []
    for _epoch in range(2):
        start, n = time.perf_counter(), 0
        for images, _labels in loader:
            n += images.shape[0]
        times.append((start, time.perf_counter()))
        counts.append(n)
        marks.wait()  # every job finished this epoch: the parent reads counters
    out.put((times, counts))
    loader.close()


def run(galleyd, root, cache_bytes, jobs):
    import galley
    with tempfile.TemporaryDirectory() as tmp:
        sock = os.path.join(tmp, "g.sock")
        daemon = subprocess.Popen([galleyd, "--socket", sock, "--cache-bytes", str(cache_bytes),
                                   "--allowed-root", str(root), "--log-level", "warn"])
        try:
            while not os.path.exists(sock):
                time.sleep(0.05)
            ctx = mp.get_context("spawn")
            barrier, marks, out = ctx.Barrier(jobs + 1), ctx.Barrier(jobs + 1), ctx.Queue()
            procs = [ctx.Process(target=job, args=(sock, str(root), s, barrier, marks, out))
                     for s in range(jobs)]
            for p in procs:
                p.start()
            barrier.wait()
            marks.wait()
            after_epoch1 = galley.query("status", socket=sock)["pipeline"]
            plan = galley.query("plan", socket=sock)
            marks.wait()
            after_epoch2 = galley.query("status", socket=sock)["pipeline"]
            results = [out.get() for _ in procs]
            for p in procs:
                p.join()
        finally:
            daemon.terminate()
            daemon.wait()
    rates = []
    for epoch in range(2):
        start = min(r[0][epoch][0] for r in results)
        end = max(r[0][epoch][1] for r in results)
        rates.append(sum(r[1][epoch] for r in results) / (end - start))
    delta = {k: after_epoch2.get(k, 0) - after_epoch1.get(k, 0)
             for k in ("file_reads", "decodes", "decoded_hits", "encoded_hits")}
    return rates, plan, delta


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--fractions", default="0.25,0.5,1.0")
    parser.add_argument("--jobs", default="1,4")
    parser.add_argument("--galleyd", default=str(ROOT / "build/server/daemon/galleyd"))
    parser.add_argument("--results", default=str(ROOT / "results"))
    args = parser.parse_args()

    root = ROOT / ".demo" / f"bench-{args.images}"
    subprocess.run([sys.executable, str(ROOT / "scripts/make_demo_dataset.py"), str(root),
                    "--images", str(args.images), "--classes", "10"], check=True)
    decoded = decoded_bytes(root)
    print(f"dataset {root}: {args.images} images, decoded size {decoded / 2**20:.0f} MiB")
    rows = []
    for fraction in [float(f) for f in args.fractions.split(",")]:
        # 2% headroom over the decoded pixels for per-entry bookkeeping.
        cache_bytes = int(decoded * fraction * 1.02)
        for jobs in [int(j) for j in args.jobs.split(",")]:
            rates, plan, delta = run(args.galleyd, root, cache_bytes, jobs)
            split = plan.get("split", {})
            inputs = plan.get("inputs", {})
            rows.append({
                "cache_fraction": fraction, "cache_bytes": cache_bytes, "jobs": jobs,
                "epoch1_images_per_s": round(rates[0], 1), "epoch2_images_per_s": round(rates[1], 1),
                "speedup": round(rates[1] / rates[0], 2),
                "split": f"{split.get('encoded_pct')}/{split.get('decoded_pct')}/{split.get('augmented_pct')}",
                "predicted_items_per_s": round(plan.get("predicted_items_per_s", 0), 1),
                "epoch2_file_reads": delta["file_reads"], "epoch2_decodes": delta["decodes"],
                "epoch2_decoded_hits": delta["decoded_hits"],
                "epoch2_encoded_hits": delta["encoded_hits"],
            })
            print(rows[-1], flush=True)
            if fraction == 1.0 and jobs == 1:
                print("planner inputs:", inputs)
    os.makedirs(args.results, exist_ok=True)
    with open(os.path.join(args.results, "cache_epochs.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    header = ("cache", "jobs", "split E/D/A", "predicted/s", "epoch1 img/s", "epoch2 img/s",
              "x", "e2 reads", "e2 decodes")
    print("\n" + " ".join(f"{h:>12}" for h in header))
    for r in rows:
        print(" ".join(f"{v:>12}" for v in (
            f"{int(r['cache_fraction'] * 100)}%", r["jobs"], r["split"], r["predicted_items_per_s"],
            r["epoch1_images_per_s"], r["epoch2_images_per_s"], r["speedup"],
            r["epoch2_file_reads"], r["epoch2_decodes"])))


if __name__ == "__main__":
    main()
