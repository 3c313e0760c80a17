#!/usr/bin/python3
"""Writes an ImageNet-1k-shaped dataset: 1,281,167 items in 1,000 classes.

Usage: make_imagenet_shape.py [--root DIR] [--what folder,shards]

Two forms of the same shape, for measuring what grows with the item count
(listing, indexing, memory per item, sampler decisions), not image work:

  DIR/folder/train/nXXXXXXXX/nXXXXXXXX_K.JPEG   an ImageFolder whose 1,281,167
      files are hard links to a few hundred real JPEGs (DIR/sources, written by
      make_demo_dataset.py), so the tree costs directory entries, not inodes
      or bytes.
  DIR/shards/train-XXXXXX.tar                   1,024 tar shards in the
      WebDataset layout (KEY.jpg + KEY.cls); each .jpg is one of a few hundred
      tiny real JPEGs of 2-3 KB, so the set is a few GB.

Classes hold 1,281 or 1,282 items (ImageNet's classes hold 732-1,300; only the
total matters here). Item i of the folder and sample i of the shards are the
same key in the same class. The default DIR is ~/.cache/galley/imagenet-shape,
outside any clone. Running again does only what is missing: each form records
a stamp when it is complete, shards are written to a temporary name and
renamed, and links that exist are kept.
"""
import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import time

from PIL import Image

ITEMS = 1_281_167
CLASSES = 1_000
SHARDS = 1_024
SOURCES = 300
TINY_BYTES = (2_000, 3_000)
STAMP = ".galley_imagenet_shape.json"
HERE = os.path.dirname(os.path.abspath(__file__))


def class_sizes(items, classes):
    base, extra = divmod(items, classes)
    return [base + (1 if c < extra else 0) for c in range(classes)]


def wnid(c):
    return f"n{c:08d}"


def keys(items, classes):
    """Yields (item index, class, key) in item order: class by class."""
    index = 0
    for c, size in enumerate(class_sizes(items, classes)):
        for k in range(size):
            yield index, c, f"{wnid(c)}_{k}"
            index += 1


def stamp_matches(folder, want):
    try:
        with open(os.path.join(folder, STAMP)) as f:
            return json.load(f) == want
    except (OSError, ValueError):
        return False


def write_stamp(folder, want):
    with open(os.path.join(folder, STAMP), "w") as f:
        json.dump(want, f)


def make_sources(root, count):
    out = os.path.join(root, "sources")
    subprocess.run([sys.executable, os.path.join(HERE, "make_demo_dataset.py"), out,
                    "--images", str(count), "--classes", "1"], check=True)
    folder = os.path.join(out, "class_000")
    return sorted(os.path.join(folder, name) for name in os.listdir(folder))


def make_folder(root, sources, items, classes):
    train = os.path.join(root, "folder", "train")
    want = {"items": items, "classes": classes, "sources": len(sources)}
    if stamp_matches(os.path.join(root, "folder"), want):
        print(f"{train}: complete, nothing to do")
        return
    start = time.monotonic()
    made = 0
    for c in range(classes):
        os.makedirs(os.path.join(train, wnid(c)), exist_ok=True)
    for index, c, key in keys(items, classes):
        try:
            os.link(sources[index % len(sources)], os.path.join(train, wnid(c), key + ".JPEG"))
            made += 1
        except FileExistsError:
            pass
        if index % 100_000 == 0 and index:
            print(f"  {index:,} links ({time.monotonic() - start:.0f} s)", flush=True)
    write_stamp(os.path.join(root, "folder"), want)
    print(f"{train}: {made:,} new links of {items:,} in {time.monotonic() - start:.0f} s")


def tiny_jpeg(path):
    """A real JPEG of 2-3 KB made from `path`: shrunk, at the quality whose size
    is nearest the middle of that range."""
    with Image.open(path) as image:
        small = image.convert("RGB").resize((96, 72), Image.Resampling.BILINEAR)
    best = b""
    middle = sum(TINY_BYTES) / 2
    for quality in range(60, 99, 2):
        buffer = io.BytesIO()
        small.save(buffer, format="JPEG", quality=quality)
        data = buffer.getvalue()
        if not best or abs(len(data) - middle) < abs(len(best) - middle):
            best = data
    return best


def member(tar, name, payload):
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    info.mtime = 0
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(payload))


def make_shards(root, sources, items, classes, shards):
    out = os.path.join(root, "shards")
    want = {"items": items, "classes": classes, "shards": shards, "sources": len(sources)}
    if stamp_matches(out, want):
        print(f"{out}: complete, nothing to do")
        return
    os.makedirs(out, exist_ok=True)
    tiny = [tiny_jpeg(path) for path in sources]
    print(f"tiny JPEGs: {min(map(len, tiny))}-{max(map(len, tiny))} bytes")
    per_shard = class_sizes(items, shards)  # samples per shard, in item order
    all_keys = keys(items, classes)
    start = time.monotonic()
    written = 0
    for s, count in enumerate(per_shard):
        path = os.path.join(out, f"train-{s:06d}.tar")
        chunk = [next(all_keys) for _ in range(count)]
        if os.path.exists(path):
            continue
        temporary = path + ".partial"
        with tarfile.open(temporary, "w", format=tarfile.USTAR_FORMAT) as tar:
            for index, c, key in chunk:
                member(tar, key + ".jpg", tiny[index % len(tiny)])
                member(tar, key + ".cls", str(c).encode())
        os.rename(temporary, path)
        written += 1
        if s % 64 == 63:
            print(f"  {s + 1}/{shards} shards ({time.monotonic() - start:.0f} s)", flush=True)
    write_stamp(out, want)
    print(f"{out}: {written} new shards of {shards} in {time.monotonic() - start:.0f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.expanduser("~/.cache/galley/imagenet-shape"))
    parser.add_argument("--what", default="folder,shards", help="folder, shards or both")
    parser.add_argument("--items", type=int, default=ITEMS)
    parser.add_argument("--classes", type=int, default=CLASSES)
    parser.add_argument("--shards", type=int, default=SHARDS)
    parser.add_argument("--sources", type=int, default=SOURCES)
    args = parser.parse_args()
    what = set(args.what.split(","))
    if not what <= {"folder", "shards"} or not what:
        sys.exit("--what takes folder, shards or folder,shards")
    if not 0 < args.classes <= args.items or not 0 < args.shards <= args.items:
        sys.exit("need 0 < classes <= items and 0 < shards <= items")
    os.makedirs(args.root, exist_ok=True)
    sources = make_sources(args.root, args.sources)
    if "folder" in what:
        make_folder(args.root, sources, args.items, args.classes)
    if "shards" in what:
        make_shards(args.root, sources, args.items, args.classes, args.shards)


if __name__ == "__main__":
    main()
