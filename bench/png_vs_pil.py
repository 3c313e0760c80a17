#!/usr/bin/python3
"""PNG decode speed: galley's decoder (libpng, build/bench/decode_bench's
BM_DecodePng) against PIL's Image.open(f).convert("RGB"), torchvision's
default loader, on the same files in the same run, one core each.

Writes a corpus of photo-like PNGs of several kinds (8-bit RGB, RGBA,
palette, gray, 16-bit RGB, Adam7-interlaced RGB), then decodes each kind
with both from memory (no file I/O timed) and prints images/s per CPU
second and the ratio. CPU time is compared, so other load on the machine
changes both sides' figures less than wall time would; wall-clock figures
are printed too.

Usage (from the repository root, after `scripts/build.sh decode_bench`):
  /usr/bin/python3 bench/png_vs_pil.py [--images 12] [--size 500x375]
      [--seconds 2] [--decode-bench build/bench/decode_bench]
"""
import argparse
import io
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
from make_fixtures import png_bytes  # noqa: E402  (writes 16-bit and Adam7 PNGs)


def photo_like(width, height, seed):
    """Smooth shapes plus sensor-like noise: compresses like a photograph."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    base = np.stack([128 + 90 * np.sin(x * 0.021 + y * 0.007 + seed),
                     128 + 80 * np.cos(y * 0.017 - x * 0.004),
                     128 + 70 * np.sin((x + y) * 0.011 + seed)], axis=-1)
    return np.clip(base + rng.normal(0, 18, base.shape), 0, 255)


def write_corpus(root, count, width, height):
    """One folder of `count` PNGs per kind; returns {kind: folder}."""
    kinds = {}
    for kind in ("rgb8", "rgba8", "palette8", "gray8", "rgb16", "rgb8_adam7"):
        folder = root / kind
        folder.mkdir(parents=True)
        kinds[kind] = folder
        for i in range(count):
            pixels = photo_like(width, height, i)
            rgb = Image.fromarray(pixels.astype(np.uint8), "RGB")
            path = folder / f"{i:03d}.png"
            if kind == "rgb8":
                rgb.save(path)
            elif kind == "rgba8":
                alpha = Image.fromarray((pixels[..., 0] * 0.5 + 64).astype(np.uint8), "L")
                rgba = rgb.copy()
                rgba.putalpha(alpha)
                rgba.save(path)
            elif kind == "palette8":
                rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=256).save(path)
            elif kind == "gray8":
                rgb.convert("L").save(path)
            elif kind == "rgb16":
                path.write_bytes(png_bytes((pixels * 257).astype(np.int64), 16, 2, False))
            else:
                path.write_bytes(png_bytes(pixels.astype(np.int64), 8, 2, True))
    return kinds


def time_pil(files, seconds):
    """Images/s per CPU second and per wall second for PIL on `files`."""
    for data in files:  # warm-up: imports, plugin registration, caches
        Image.open(io.BytesIO(data)).convert("RGB")
    images = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        for data in files:
            Image.open(io.BytesIO(data)).convert("RGB")
            images += 1
    return images / (time.process_time() - cpu0), images / (time.perf_counter() - wall0)


def time_galley(decode_bench, folder, seconds):
    """Images/s per CPU second and per wall second for BM_DecodePng."""
    out = subprocess.run(
        [decode_bench, "--benchmark_filter=^BM_DecodePng", "--benchmark_format=json",
         f"--benchmark_min_time={seconds}"],
        env={**os.environ, "GALLEY_BENCH_PNG_DIR": str(folder)},
        check=True, capture_output=True, text=True).stdout
    run = json.loads(out)["benchmarks"][0]
    if run.get("error_occurred"):
        sys.exit(f"decode_bench failed on {folder}: {run.get('error_message')}")
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[run["time_unit"]]
    return 1.0 / (run["cpu_time"] * scale), 1.0 / (run["real_time"] * scale)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=12, help="PNGs per kind")
    parser.add_argument("--size", default="500x375", help="WIDTHxHEIGHT (ImageNet-like)")
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per side")
    parser.add_argument("--decode-bench", default=str(ROOT / "build" / "bench" / "decode_bench"))
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    if not os.access(args.decode_bench, os.X_OK):
        sys.exit(f"{args.decode_bench} not found: run scripts/build.sh decode_bench first")

    print(f"PNG decode, {args.images} photo-like {width}x{height} images per kind, one core; "
          f"PIL {Image.__version__}; load average {os.getloadavg()[0]:.2f}")
    print(f"{'kind':<11} {'KiB/file':>8}  {'PIL img/s':>9} {'galley img/s':>12} {'ratio':>6}"
          f"   (wall: {'PIL':>5} {'galley':>6})")
    with tempfile.TemporaryDirectory(prefix="galley-png-bench-") as tmp:
        for kind, folder in write_corpus(pathlib.Path(tmp), args.images, width, height).items():
            files = [p.read_bytes() for p in sorted(folder.glob("*.png"))]
            kib = sum(len(f) for f in files) / len(files) / 1024
            pil_cpu, pil_wall = time_pil(files, args.seconds)
            galley_cpu, galley_wall = time_galley(args.decode_bench, folder, args.seconds)
            print(f"{kind:<11} {kib:8.0f}  {pil_cpu:9.0f} {galley_cpu:12.0f} "
                  f"{galley_cpu / pil_cpu:5.2f}x   (wall: {pil_wall:5.0f} {galley_wall:6.0f})")


if __name__ == "__main__":
    main()
