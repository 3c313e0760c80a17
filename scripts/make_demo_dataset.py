#!/usr/bin/python3
"""Writes an ImageNet-like JPEG ImageFolder for demos and benchmarks.

Usage: make_demo_dataset.py OUT_DIR --images N --classes C [--seed S] [--workers W]

Each image is 300-600 pixels a side and about 80-120 KB at quality 90: smooth
random gradients and shapes plus noise, which compresses like a photograph.
Image i goes to class i % C as OUT_DIR/class_XXX/img_XXXXXXX.jpg. The output
depends only on (N, C, S); a stamp file records them, and running again with
the same values does nothing.
"""
import argparse
import io
import json
import multiprocessing
import os
import sys

import numpy as np
from PIL import Image

STAMP = ".galley_demo_dataset.json"
TARGET_BYTES = (80_000, 120_000)
# Noise level that lands a typical image near 100 KB; adjusted per image below.
BASE_NOISE = 16.0


# One shared field of Gaussian noise; each image reads a window of it at a
# random offset, which is much cheaper than drawing fresh noise per image.
_NOISE = np.random.default_rng(12345).standard_normal((700, 700, 3), dtype=np.float32)


def render(index, seed):
    """Returns the smooth content (uint8) and a noise window for image `index`."""
    rng = np.random.default_rng([seed, index])
    width, height = (int(v) for v in rng.integers(300, 601, size=2))
    # The content is smooth, so it is drawn at 1/4 resolution and enlarged.
    small_w, small_h = width // 4, height // 4
    y, x = np.mgrid[0:small_h, 0:small_w].astype(np.float32)
    small = np.empty((small_h, small_w, 3), np.float32)
    for c in range(3):
        fx, fy = rng.uniform(0.008, 0.08, size=2)
        phase = rng.uniform(0, 6.3)
        small[..., c] = 128 + 80 * np.sin(x * fx + y * fy + phase)
    for _ in range(int(rng.integers(3, 8))):  # a few ellipses
        cx, cy = rng.uniform(0, small_w), rng.uniform(0, small_h)
        rx, ry = rng.uniform(5, small_w / 2), rng.uniform(5, small_h / 2)
        mask = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 < 1.0
        small[mask] = 0.5 * small[mask] + 0.5 * rng.uniform(0, 255, size=3)
    content = Image.fromarray(small.astype(np.uint8), "RGB").resize((width, height),
                                                                   Image.Resampling.BILINEAR)
    oy, ox = int(rng.integers(0, 700 - height + 1)), int(rng.integers(0, 700 - width + 1))
    noise = _NOISE[oy:oy + height, ox:ox + width]
    return np.asarray(content, np.float32), noise


def encode(image, noise, sigma):
    pixels = np.clip(image + sigma * noise, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def make_one(job):
    index, classes, seed, out_dir = job
    image, noise = render(index, seed)
    sigma = BASE_NOISE
    data = encode(image, noise, sigma)
    for _ in range(3):  # JPEG size grows about linearly with the noise level
        if TARGET_BYTES[0] <= len(data) <= TARGET_BYTES[1]:
            break
        sigma *= 100_000 / len(data)
        data = encode(image, noise, sigma)
    path = os.path.join(out_dir, f"class_{index % classes:03d}", f"img_{index:07d}.jpg")
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--images", type=int, required=True)
    parser.add_argument("--classes", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    if args.images <= 0 or args.classes <= 0 or args.classes > args.images:
        sys.exit("need 0 < classes <= images")

    want = {"images": args.images, "classes": args.classes, "seed": args.seed}
    stamp_path = os.path.join(args.out_dir, STAMP)
    try:
        with open(stamp_path) as f:
            if json.load(f) == want:
                print(f"{args.out_dir} already holds this dataset; nothing to do")
                return
    except (OSError, ValueError):
        pass
    if os.path.exists(args.out_dir) and os.listdir(args.out_dir):
        sys.exit(f"{args.out_dir} is not empty and holds no matching dataset; remove it first")

    for c in range(args.classes):
        os.makedirs(os.path.join(args.out_dir, f"class_{c:03d}"), exist_ok=True)
    jobs = [(i, args.classes, args.seed, args.out_dir) for i in range(args.images)]
    with multiprocessing.Pool(args.workers) as pool:
        sizes = pool.map(make_one, jobs, chunksize=16)
    with open(stamp_path, "w") as f:
        json.dump(want, f)
    print(f"wrote {len(sizes)} images in {args.classes} classes to {args.out_dir}; "
          f"mean size {sum(sizes) / len(sizes) / 1000:.1f} KB, "
          f"range {min(sizes) / 1000:.1f}-{max(sizes) / 1000:.1f} KB")


if __name__ == "__main__":
    main()
