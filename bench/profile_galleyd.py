#!/usr/bin/python3
"""Where galleyd's CPU time goes while it serves jobs: a perf profile.

Starts a fresh galleyd, runs N concurrent jobs (scripts/demo_jobs.py:
RandomResizedCrop(224) + flip, uint8, batch 64) for one epoch over the
ImageNet-like demo dataset, waits until galleyd is busy, records every CPU
with `perf record` for a few seconds, and prints galleyd's samples grouped by
what the code does (entropy decoding, inverse DCT, resampling, kernel page
faults, ...), the share of all samples per process, and galleyd's minor page
faults in the window. Writes results/profile_galleyd.csv.

    /usr/bin/python3 bench/profile_galleyd.py [--jobs 1] [--images 5000]
        [--seconds 2] [--cache-bytes N] [--libjpeg-dir DIR]

Debian's libjpeg-turbo is stripped, so without --libjpeg-dir its time is one
group ("JPEG decode, no symbols"). --libjpeg-dir puts a build of the same
libjpeg-turbo with symbols first on galleyd's library path (bench/README.md
says how to make one), which splits it into entropy decoding, inverse DCT and
upsampling/colour conversion.
"""

import argparse
import collections
import csv
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

# (group, pattern on "dso symbol" of the sampled frame), first match wins.
# Kernel samples whose call chain passes through the page-fault handler are
# counted as page faults before these are tried.
PAGE_FAULTS = "kernel: page faults (first touch of new memory)"
GROUPS = [
    ("JPEG entropy (Huffman) decoding",
     r"jpeg.*\b(decode_mcu\w*|jpeg_fill_bit_buffer|jpeg_huff_decode|process_restart|"
     r"decompress_onepass|decompress_data|consume_data)\b"),
    ("JPEG inverse DCT", r"jpeg.*idct"),
    ("JPEG upsampling + colour conversion", r"jpeg.*(upsample|ycc|rgb|color|convert)"),
    ("JPEG decode, no symbols", r"^libjpeg\S*|^libturbojpeg\S*"),
    ("galley resample / crop / flip / layout", r"galley::image::"),
    ("kernel: other (syscalls, scheduling, copies)", r"^\[kernel"),
    ("libc (memcpy, memset, malloc)", r"^libc\.so"),
    ("galleyd: scheduler, cache, ring, protocol", r"^galleyd"),
]


def group_of(dso, symbol):
    text = f"{dso} {symbol}"
    for name, pattern in GROUPS:
        if re.search(pattern, text):
            return name
    return f"other ({dso})"


def galleyd_groups(data):
    """Counts galleyd's samples per group from `perf script` call chains."""
    out = subprocess.run(["perf", "script", "-i", data, "--comm", "galleyd", "-F", "comm,ip,sym,dso"],
                         capture_output=True, text=True, check=True).stdout
    groups = collections.Counter()
    for sample in out.split("\n\n"):
        frames = []
        for line in sample.splitlines()[1:]:
            m = re.match(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
            if m:
                frames.append((os.path.basename(m.group(2)), m.group(1)))
        if not frames:
            continue
        dso, symbol = frames[0]
        if dso.startswith("[kernel") and any("page_fault" in sym for _d, sym in frames):
            groups[PAGE_FAULTS] += 1
        else:
            groups[group_of(dso, symbol)] += 1
    return groups


def samples_per_process(data):
    out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio", "--sort", "comm"],
                         capture_output=True, text=True, check=True).stdout
    shares = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(.+?)\s*$", line)
        if m:
            comm = m.group(2)
            name = ("galleyd" if comm == "galleyd" else "idle" if comm == "swapper" else
                    "jobs (python3)" if comm.startswith("python") else "other")
            shares[name] += float(m.group(1))
    return shares


def minor_faults(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def busy_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=2.0, help="length of the recording")
    parser.add_argument("--cache-bytes", type=int, help="galleyd --cache-bytes")
    parser.add_argument("--libjpeg-dir", help="directory with a libjpeg-turbo built with symbols")
    parser.add_argument("--galleyd", default=str(ROOT / "build/server/daemon/galleyd"))
    parser.add_argument("--results", default=str(ROOT / "results"))
    args = parser.parse_args()
    if shutil.which("perf") is None:
        sys.exit("perf is not installed: apt-get install linux-perf")
    if not os.access(args.galleyd, os.X_OK):
        sys.exit(f"{args.galleyd} not found: run scripts/build.sh galleyd _galley")

    data = ROOT / f".demo/bench-{args.images}"
    subprocess.run([sys.executable, str(ROOT / "scripts/make_demo_dataset.py"), str(data),
                    "--images", str(args.images), "--classes", "10"], check=True)
    for path in data.rglob("*"):  # the page cache holds the files, as in compare_pytorch.py
        if path.is_file():
            path.read_bytes()

    env = dict(os.environ)
    if args.libjpeg_dir:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            [args.libjpeg_dir, env.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
    with tempfile.TemporaryDirectory() as tmp:
        sock = os.path.join(tmp, "galleyd.sock")
        command = [args.galleyd, "--socket", sock, "--allowed-root", str(data),
                   "--log-level", "warn"]
        if args.cache_bytes is not None:
            command += ["--cache-bytes", str(args.cache_bytes)]
        daemon = subprocess.Popen(command, env=env)
        jobs = None
        try:
            deadline = time.monotonic() + 10
            while not os.path.exists(sock):
                if daemon.poll() is not None or time.monotonic() > deadline:
                    sys.exit("galleyd did not start")
                time.sleep(0.05)
            jobs = subprocess.Popen(
                [sys.executable, str(ROOT / "scripts/demo_jobs.py"), "--socket", sock,
                 "--daemon-pid", str(daemon.pid), "--dataset", str(data), "--jobs",
                 str(args.jobs), "--epochs", "1", "--torch-epochs", "0",
                 "--plot", os.path.join(tmp, "jobs.png")],
                env=dict(os.environ, PYTHONPATH=str(ROOT / "python")), stdout=subprocess.PIPE,
                text=True)
            # Jobs import torch and open their loaders first; record once galleyd
            # has used more than half a core over 0.2 s.
            ticks_per_s = os.sysconf("SC_CLK_TCK")
            before = busy_ticks(daemon.pid)
            while jobs.poll() is None:
                time.sleep(0.2)
                now = busy_ticks(daemon.pid)
                if now - before > 0.1 * ticks_per_s:
                    break
                before = now
            faults_before = minor_faults(daemon.pid)
            perf_data = os.path.join(tmp, "perf.data")
            subprocess.run(["perf", "record", "-a", "-g", "-F", "999", "-o", perf_data, "-q", "--",
                            "sleep", str(args.seconds)], check=True, stderr=subprocess.DEVNULL)
            faults = minor_faults(daemon.pid) - faults_before
            job_output, _ = jobs.communicate(timeout=600)
        finally:
            if jobs is not None and jobs.poll() is None:
                jobs.kill()
            daemon.terminate()
            daemon.wait(timeout=30)

        by_process = samples_per_process(perf_data)
        groups = galleyd_groups(perf_data)

    total = sum(groups.values()) or 1.0
    print(f"\n{args.jobs} job(s), {args.images} images, {args.seconds:g} s recorded while "
          "galleyd was busy")
    print("all CPU samples: " + ", ".join(f"{k} {v:.1f}%" for k, v in by_process.most_common()))
    print(f"galleyd minor page faults in the window: {faults} "
          f"({faults / args.seconds:,.0f}/s)\n")
    print(f"{'share of galleyd':>17}  what")
    rows = []
    for name, value in groups.most_common():
        share = 100 * value / total
        if share >= 0.05:
            print(f"{share:16.1f}%  {name}")
        rows.append({"jobs": args.jobs, "group": name, "share_of_galleyd": round(share, 2)})
    print("\n" + "\n".join(line for line in job_output.splitlines()
                            if "images/s for all jobs" in line))
    os.makedirs(args.results, exist_ok=True)
    out = os.path.join(args.results, "profile_galleyd.csv")
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["jobs", "group", "share_of_galleyd"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
