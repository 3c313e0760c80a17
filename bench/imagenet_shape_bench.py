#!/usr/bin/python3
"""galley at ImageNet-1k's size: 1,281,167 items in 1,000 classes.

Usage: imagenet_shape_bench.py [--root DIR] [--forms folder,shards] [--galleyd PATH]
                               [--batch-size N] [--results DIR] [--skip-baselines]

Over the dataset scripts/make_imagenet_shape.py writes (an ImageFolder of
hard links, and 1,024 tar shards of 2-3 KB samples), this measures what
grows with the item count, not image work:

  - first open: galleyd listing the folder (or indexing the shards, with an
    empty index cache, then again from the cache in a fresh daemon), beside
    `find DIR -type f` and torchvision's ImageFolder over the same tree
    (Python's tarfile listing every shard, for the shards);
  - galleyd's resident memory per item: VmRSS after the listing minus before,
    divided by the items; and again after a job and after a second job;
  - the first batch's latency of a job (open + first batch; RandomResizedCrop
    224 + flip, batch 256), and a later job's open of the same dataset while
    the first is still open;
  - the sampler's heap per item and time per decision with 1, 8 and 32 jobs
    (build/bench/galley_sampler_bench, BM_ImageNetDecision).

Every tool runs once untimed first, so the dentry and page caches are warm
for all of them alike. galleyd is started fresh for each form. Writes
DIR/imagenet_shape.csv and prints a table.
"""
import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

TORCHVISION_LISTING = """
import resource, sys, time
from torchvision.datasets import ImageFolder
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
start, cpu_start = time.monotonic(), cpu()
dataset = ImageFolder(sys.argv[1])
print(len(dataset), time.monotonic() - start, cpu() - cpu_start,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""

TARFILE_LISTING = """
import os, resource, sys, tarfile, time
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
start, cpu_start = time.monotonic(), cpu()
members = 0
for name in sorted(os.listdir(sys.argv[1])):
    if name.endswith(".tar"):
        with tarfile.open(os.path.join(sys.argv[1], name)) as tar:
            members += len(tar.getmembers())
print(members // 2, time.monotonic() - start, cpu() - cpu_start,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def timed(command):
    start = time.monotonic()
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return time.monotonic() - start, out


def python_baseline(script, path, warm_up=True):
    """(items, seconds, CPU seconds, peak RSS bytes) of a listing in a fresh
    Python."""
    if warm_up:
        subprocess.run([sys.executable, "-c", script, path], check=True, capture_output=True)
    _, out = timed([sys.executable, "-c", script, path])
    items, seconds, cpu, peak = out.split()
    return int(items), float(seconds), float(cpu), int(peak)


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def find_files(path):
    command = ["sh", "-c", f"find '{path}' -type f | wc -l"]
    subprocess.run(command, check=True, capture_output=True)
    cpu_start = children_cpu_seconds()
    seconds, out = timed(command)
    return int(out), seconds, children_cpu_seconds() - cpu_start


class Daemon:
    """A fresh galleyd on a temporary socket, stopped on exit."""

    def __init__(self, galleyd, root, run_dir, index_dir, extra_args=()):
        self.socket = os.path.join(run_dir, "galleyd.sock")
        self.log = os.path.join(run_dir, "galleyd.log")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [galleyd, "--socket", self.socket, "--allowed-root", root, "--tar-index-dir",
                 index_dir, "--cache-prefault", "false", *extra_args], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"galleyd did not start; see {self.log}")
            time.sleep(0.05)
        import galley
        self.client = galley._autostart.client(self.socket, False, 3600.0)

    def rss(self):
        return rss_bytes(self.proc.pid)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def open_job(dataset, socket, batch_size, seed):
    """(loader, iterator, seconds to the first batch). The job opens with
    its first batch: the loader asks galleyd for nothing before it."""
    import galley
    from galley import transforms as GT
    start = time.monotonic()
    loader = galley.DataLoader(dataset, batch_size=batch_size, shuffle=True, seed=seed,
                               transform=GT.Compose([GT.RandomResizedCrop(224),
                                                     GT.RandomHorizontalFlip()]),
                               socket=socket, autostart=False, timeout=3600)
    iterator = iter(loader)
    images, _ = next(iterator)
    assert images.shape[0] == batch_size
    return loader, iterator, time.monotonic() - start


def measure_galley(args, form, dataset, root, spec, index_dir, label):
    """One fresh galleyd: listing, memory per item, two jobs."""
    row = {"form": form, "run": label, "loadavg_1m": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="galley-ishape-") as run_dir, \
            Daemon(args.galleyd, root, run_dir, index_dir,
                   args.galleyd_args.split()) as daemon:
        time.sleep(0.5)  # let the daemon's start-up threads settle before the baseline
        before = daemon.rss()
        start, cpu_start = time.monotonic(), process_cpu_seconds(daemon.proc.pid)
        figures = daemon.client.listing(spec, 0, 0)
        row["galley_open_s"] = time.monotonic() - start
        row["galley_open_cpu_s"] = process_cpu_seconds(daemon.proc.pid) - cpu_start
        items = int(figures["dataset_size"])
        row["items"] = items
        listed = daemon.rss()
        row["rss_before_mib"] = before / 2**20
        row["rss_listed_mib"] = listed / 2**20
        row["bytes_per_item_listed"] = (listed - before) / items
        first = open_job(dataset, daemon.socket, args.batch_size, 1)
        row["job1_first_batch_s"] = first[2]
        one_job = daemon.rss()
        row["job1_rss_mib"] = (one_job - listed) / 2**20
        second = open_job(dataset, daemon.socket, args.batch_size, 2)
        row["job2_first_batch_s"] = second[2]
        row["job2_rss_mib"] = (daemon.rss() - one_job) / 2**20
        del first, second
    return row


def sampler_rows(args):
    binary = REPO / "build/bench/galley_sampler_bench"
    if not os.access(binary, os.X_OK):
        print(f"no {binary}: build it with scripts/build.sh galley_sampler_bench")
        return []
    out = subprocess.run([str(binary), "--benchmark_filter=BM_ImageNetDecision",
                          "--benchmark_format=json"], check=True, capture_output=True,
                         text=True).stdout
    rows = []
    for b in json.loads(out)["benchmarks"]:
        rows.append({"jobs": int(b["name"].split("/")[1]),
                     "ns_per_decision": b["real_time"],
                     "ns_per_request": b["ns_per_request"] * 1e9,
                     "bytes_per_item": b["bytes_per_item"]})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.expanduser("~/.cache/galley/imagenet-shape"))
    parser.add_argument("--forms", default="folder,shards")
    parser.add_argument("--galleyd", default=str(REPO / "build/server/daemon/galleyd"))
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--galleyd-args", default="",
                        help="more galleyd flags, space-separated, given with '=' "
                             "(--galleyd-args=--cache-bytes=0)")
    parser.add_argument("--results", default=str(REPO / "results"))
    parser.add_argument("--skip-baselines", action="store_true",
                        help="no find / torchvision / tarfile listings")
    args = parser.parse_args()
    root = os.path.realpath(args.root)
    forms = args.forms.split(",")
    rows = []
    for form in forms:
        if form == "folder":
            dataset = os.path.join(root, "folder", "train")
            spec = {"dataset": dataset}
        elif form == "shards":
            dataset = os.path.join(root, "shards")
            import galley.shards
            spec = {"dataset": dataset, "shards": galley.shards.resolve_dataset(dataset)[1],
                    "label_key": "cls"}
        else:
            sys.exit(f"unknown form {form!r}: folder or shards")
        if not os.path.isdir(dataset):
            sys.exit(f"no {dataset}: run scripts/make_imagenet_shape.py first")
        baseline = {}
        if not args.skip_baselines:
            if form == "folder":
                baseline["find_items"], baseline["find_s"], baseline["find_cpu_s"] = \
                    find_files(dataset)
                items, seconds, cpu, peak = python_baseline(TORCHVISION_LISTING, dataset)
                baseline.update(torchvision_items=items, torchvision_s=seconds,
                                torchvision_cpu_s=cpu, torchvision_peak_mib=peak / 2**20)
            else:
                # One run: Python's tarfile takes minutes over 2.5 million members.
                items, seconds, cpu, peak = python_baseline(TARFILE_LISTING, dataset, False)
                baseline.update(tarfile_items=items, tarfile_s=seconds, tarfile_cpu_s=cpu,
                                tarfile_peak_mib=peak / 2**20)
            print(f"{form}: {baseline}", flush=True)
        with tempfile.TemporaryDirectory(prefix="galley-ishape-index-") as index_dir:
            runs = ["cold index", "index cached"] if form == "shards" else ["first"]
            for label in runs:
                row = measure_galley(args, form, dataset, root, spec, index_dir, label)
                row.update(baseline)
                rows.append(row)
                print(json.dumps(row), flush=True)
    sampler = sampler_rows(args)

    os.makedirs(args.results, exist_ok=True)
    path = os.path.join(args.results, "imagenet_shape.csv")
    keys = sorted({k for row in rows for k in row})
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)

    print()
    print("| form | run | items | first open s (CPU s): galley | find | "
          "torchvision / tarfile | RSS before MiB | bytes/item listed | "
          "RSS MiB: 1st job, later job | 1st batch s: 1st job, later job | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")

    def both(r, key):
        if r.get(f"{key}_s") is None:
            return "-"
        return f"{r[f'{key}_s']:.2f} ({r[f'{key}_cpu_s']:.2f})"

    for r in rows:
        peer = "torchvision" if "torchvision_s" in r else "tarfile"
        print(f"| {r['form']} | {r['run']} | {r['items']:,} | {both(r, 'galley_open')} | "
              f"{both(r, 'find')} | {both(r, peer)} | ", end="")
        print(f"{r['rss_before_mib']:.0f} | {r['bytes_per_item_listed']:.1f} | "
              f"{r['job1_rss_mib']:.0f}, {r['job2_rss_mib']:.0f} | "
              f"{r['job1_first_batch_s']:.2f}, {r['job2_first_batch_s']:.2f} | "
              f"{r['loadavg_1m']:.1f} |")
    if sampler:
        print()
        print("| sampler (dsa), jobs | ns per decision | ns per request | heap bytes per item |")
        print("|---|---|---|---|")
        for s in sampler:
            print(f"| {s['jobs']} | {s['ns_per_decision']:.0f} | {s['ns_per_request']:.0f} | "
                  f"{s['bytes_per_item']:.1f} |")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
