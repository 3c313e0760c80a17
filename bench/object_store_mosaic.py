"""Mosaic Streaming's side of bench/object_store.py, run with the python of
its own venv (~/.cache/galley/venv-mosaic, scripts/setup_mosaic_venv.sh:
mosaicml-streaming pins numpy<2.2, torch 2.13 CPU).

  object_store_mosaic.py write FOLDER OUT SHARDS
      MDS shards of the demo JPEGs in FOLDER (ordered as the tar shards),
      written by streaming's MDSWriter into OUT: the JPEG's own bytes in a
      `bytes` column (not re-encoded) and the label in an `int` one, no
      compression, size_limit set so that there are about SHARDS shards.
  object_store_mosaic.py job SPEC_JSON
      One job, as bench/object_store.py's others: "ready", waits for "go",
      one epoch of StreamingDataset(remote, local, shuffle=True) in a
      DataLoader of 2 workers, then its result line.

torchvision cannot be imported beside torch 2.13 CPU here (PyPI's
torchvision wheels link CUDA torch), and streaming's package __init__
imports its vision module, which imports torchvision. So streaming.base
(StreamingDataset, MDSWriter: all this side uses) is loaded without that
__init__, and the transform is RandomResizedCrop(224) + flip written with
PIL and torch ops, drawing the crop as torchvision does (scale 0.08-1,
ratio 3/4-4/3, 10 tries, then the centre crop), resized bilinearly by PIL
(torchvision resizes a PIL image with PIL's bilinear filter too).
"""

import importlib.util
import io
import json
import math
import os
import random
import resource
import sys
import time
import types
from pathlib import Path

BATCH = 64


def import_streaming_base():
    spec = importlib.util.find_spec("streaming")
    if spec is None:
        sys.exit("mosaicml-streaming is not installed in this venv: "
                 "bash scripts/setup_mosaic_venv.sh")
    package = types.ModuleType("streaming")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    package.__file__ = spec.origin
    sys.modules.setdefault("streaming", package)
    import streaming.base as base
    return base


def random_resized_crop(image, size=224, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop draw on a PIL image."""
    from PIL import Image
    width, height = image.size
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * random.uniform(*scale)
        aspect = math.exp(random.uniform(*log_ratio))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top, left = random.randint(0, height - h), random.randint(0, width - w)
            break
    else:
        in_ratio = width / height
        if in_ratio < ratio[0]:
            w, h = width, int(round(width / ratio[0]))
        elif in_ratio > ratio[1]:
            h, w = height, int(round(height * ratio[1]))
        else:
            w, h = width, height
        top, left = (height - h) // 2, (width - w) // 2
    return image.resize((size, size), Image.BILINEAR, box=(left, top, left + w, top + h))


def transform(jpeg):
    """RandomResizedCrop(224) + RandomHorizontalFlip -> uint8 CHW tensor."""
    import numpy as np
    import torch
    from PIL import Image
    image = random_resized_crop(Image.open(io.BytesIO(jpeg)).convert("RGB"))
    if random.random() < 0.5:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    return torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1)


base = import_streaming_base()


class Samples(base.StreamingDataset):
    """(sample index, transformed image, label); picklable, for spawned
    DataLoader workers (the module is imported there again)."""

    def __getitem__(self, index):
        sample = super().__getitem__(index)
        return index, transform(sample["jpg"]), sample["cls"]


def write(folder, out, shards):
    files = sorted(Path(folder).rglob("*.jpg"), key=lambda p: p.name)
    total = sum(f.stat().st_size for f in files)
    limit = total // shards + 200_000  # about `shards` shards
    with base.MDSWriter(out=str(out), columns={"jpg": "bytes", "cls": "int"},
                        size_limit=limit) as writer:
        for f in files:
            writer.write({"jpg": f.read_bytes(), "cls": int(f.parent.name.split("_")[1])})
    print(f"MDS: {len(list(Path(out).glob('shard.*.mds')))} shards in {out}", flush=True)


def cpu_seconds():
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def job(spec):
    import torch
    torch.set_num_threads(1)
    # Built before "ready", one job after the other (the bench waits for
    # each job's "ready" before it starts the next): jobs that build theirs
    # at the same moment can pick the same shared-memory prefix, and one
    # fails (FileExistsError: '/0000NN_locals'). It fetches index.json;
    # the bench counts requests from before the jobs start.
    dataset = Samples(remote=spec["remote"], local=spec["local"], shuffle=True,
                      shuffle_seed=spec["seed"], batch_size=BATCH)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    t0, cpu0 = time.monotonic(), cpu_seconds()
    # The dataset fetched index.json with a boto3 client that keeps its
    # connection alive; forked workers inherit both and read that one
    # connection at once (shards arrived shifted by 8 KiB, downloads timed
    # out). So the main process drops its client (the downloader's own
    # clean_up(), which streaming calls before a retry): each worker makes
    # its own. Spawned workers would not share it either, but each would
    # import streaming (and transformers) again: seconds of CPU per worker.
    for stream in dataset.streams:
        stream._downloader.clean_up()
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=2)
    seen, checksum, t_first = [], 0, None
    for ids, images, _labels in loader:
        if t_first is None:
            t_first = time.monotonic() - t0
        checksum += int(images[:, 0, 0, 0].sum())
        seen.extend(int(i) for i in ids)
        del images
    del loader
    t1, cpu1 = time.monotonic(), cpu_seconds()
    print("result " + json.dumps({"t0": t0, "t1": t1, "first_batch_s": t_first,
                                  "cpu_s": cpu1 - cpu0, "images": len(seen),
                                  "distinct": len(set(seen)), "checksum": checksum}),
          flush=True)


def main():
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "job":
        job(json.loads(sys.argv[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
