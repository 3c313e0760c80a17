#!/usr/bin/python3
"""Converts Debian's Fashion-MNIST (package dataset-fashion-mnist) into an
ImageFolder of PNG files.

Usage: make_fashion_mnist.py OUT_DIR [--split train|test] [--limit N]

Class folders are named "<2-digit label>_<class name>" so that sorted order
(torchvision's ImageFolder rule) equals the label order, e.g. 0_T-shirt_top.
The first N images of the split (all by default) are written as
OUT_DIR/<class>/<index>.png. Running again with the same arguments does
nothing (a stamp file records them).
"""
import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np
from PIL import Image

SOURCE = "/usr/share/datasets/fashion-mnist"
CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]
STAMP = ".galley_fashion_mnist.json"


def read_idx(path):
    """Reads an IDX file (big-endian header: magic with the rank, then dims)."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, rank = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * rank).reshape(dims)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--split", choices=["train", "test"], default="train")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()

    prefix = "train" if args.split == "train" else "t10k"
    images = read_idx(os.path.join(SOURCE, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(SOURCE, f"{prefix}-labels-idx1-ubyte.gz"))
    if len(images) != len(labels):
        sys.exit("image and label counts differ")
    count = len(images) if args.limit is None else max(0, min(args.limit, len(images)))

    want = {"split": args.split, "count": count}
    stamp_path = os.path.join(args.out_dir, STAMP)
    try:
        with open(stamp_path) as f:
            if json.load(f) == want:
                print(f"{args.out_dir} already holds this conversion; nothing to do")
                return
    except (OSError, ValueError):
        pass

    names = [f"{label}_{name}" for label, name in enumerate(CLASSES)]
    for name in names:
        os.makedirs(os.path.join(args.out_dir, name), exist_ok=True)
    for index in range(count):
        path = os.path.join(args.out_dir, names[labels[index]], f"{index:05d}.png")
        Image.fromarray(images[index], "L").save(path)
    with open(stamp_path, "w") as f:
        json.dump(want, f)
    print(f"wrote {count} {args.split} images in {len(names)} classes to {args.out_dir}")


if __name__ == "__main__":
    main()
