"""Listing one 100,000-member tar shard: header by header, or with a DALI .idx.

galleyd lists a shard that is not in its index cache by walking its headers
(one read per header, PAX extended header and label payload). With a DALI
`wds2idx` file beside the shard it plans the reads from the index instead
(one read per indexed member, neighbours merged up to 1 MiB) and checks the
index against the headers. This script times both, side by side, on
shards of 50,000 samples (a `.jpg` and a 1-byte `.cls` each):

  ustar:      Python tarfile's default output (no extended headers), empty
              .jpg members, as in bench/shards_bench.py's 100,000-member figure;
  pax:        a PAX header before every member, as webdataset's ShardWriter
              writes them (its float mtime needs one), empty .jpg members;
  pax, 16 KiB: the same with 16 KiB .jpg payloads (an 830 MB shard), so that
              payloads lie between the headers as in a real shard.

Each figure is galleyd's own `index_seconds` for the job's shard set (index
cache off, `--tar-index-dir none`; a fresh daemon per run), the median of
--runs runs, the two ways alternating. "warm": the shard in the page cache;
"cold": its pages dropped first with posix_fadvise(DONTNEED) (the shard's
own pages only, nothing else on the machine).

  PYTHONPATH=python /usr/bin/python3 bench/idx_hint_bench.py [--runs 5] [--samples 50000]
"""

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
KINDS = [("ustar", 0), ("pax", 0), ("pax, 16 KiB", 16 << 10)]


def write_shard(path, samples, pax, jpg_bytes):
    jpg = bytes(range(256)) * (jpg_bytes // 256) + bytes(jpg_bytes % 256)
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for k in range(samples):
            for ext, payload in (("jpg", jpg), ("cls", b"1")):
                info = tarfile.TarInfo(f"k{k:06d}.{ext}")
                info.size = len(payload)
                if pax:
                    info.mtime = 1700000000.25
                tar.addfile(info, io.BytesIO(payload))


def write_idx(shard):
    """The index as DALI's wds2idx describes it: "v1.2 N", then per sample
    "ext offset size name" groups, offset = first payload byte."""
    lines, last = [], None
    with tarfile.open(shard) as tar:
        for m in tar:
            key, ext = m.name.split(".", 1)
            group = f"{ext} {m.offset_data} {m.size} {m.name}"
            if key == last:
                lines[-1] += " " + group
            else:
                lines.append(group)
            last = key
    idx = shard.with_suffix(".idx")
    idx.write_text(f"v1.2 {len(lines)}\n" + "\n".join(lines) + "\n")
    return idx


def drop_pages(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def list_once(directory, galleyd, shard):
    """galleyd's index_seconds and counters for one job over `shard`."""
    import galley
    from galley import transforms as T
    socket = str(directory / "galleyd.sock")
    if os.path.exists(socket):
        os.unlink(socket)  # a stopped daemon's, which would pass for the new one's
    proc = subprocess.Popen([galleyd, "--socket", socket, "--log-level", "warn",
                             "--tar-index-dir", "none", "--cache-bytes", "0"])
    try:
        for _ in range(400):  # until it answers: the socket file precedes listen()
            try:
                galley.query("status", socket=socket)
                break
            except Exception:
                time.sleep(0.025)
        loader = galley.DataLoader([str(shard)], batch_size=8, socket=socket,
                                   transform=T.Resize([8, 8]))
        len(loader)
        entry, = galley.query("datasets", socket=socket)["datasets"]
        loader.close()
        return entry["shards"]
    finally:
        proc.terminate()
        proc.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=50000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--galleyd", default=str(ROOT / "build/server/daemon/galleyd"))
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="galley_idx_bench_"))
    members = 2 * args.samples
    try:
        print(f"one shard of {members:,} members ({args.samples:,} samples), "
              f"median of {args.runs} runs, galleyd index_seconds")
        print("| shard | cache | header by header (s) | with .idx (s) | ratio |")
        print("|---|---|---|---|---|")
        for n, (kind, jpg_bytes) in enumerate(KINDS):
            shard = directory / f"shard{n}.tar"
            write_shard(shard, args.samples, pax=kind != "ustar", jpg_bytes=jpg_bytes)
            idx = write_idx(shard)
            hidden = directory / f"shard{n}.idx.off"
            for cache in ("warm", "cold"):
                times = {"scan": [], "idx": []}
                for _ in range(args.runs):
                    for way in ("scan", "idx"):
                        if way == "scan":
                            idx.rename(hidden)
                        if cache == "cold":
                            drop_pages(shard)
                        counts = list_once(directory, args.galleyd, shard)
                        if way == "scan":
                            hidden.rename(idx)
                        used = counts["from_idx"] == 1
                        assert used == (way == "idx"), (way, counts)
                        assert counts["samples"] == args.samples, counts
                        times[way].append(counts["index_seconds"])
                scan, hint = statistics.median(times["scan"]), statistics.median(times["idx"])
                print(f"| {kind} | {cache} | {scan:.3f} ({members / scan:,.0f} members/s) | "
                      f"{hint:.3f} ({members / hint:,.0f} members/s) | {scan / hint:.1f}x |",
                      flush=True)
            shard.unlink()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
