#!/usr/bin/python3
"""Per-op and ImageNet-recipe transform cost: galley's daemon pipeline
(build/bench/transforms_bench) against torchvision on PIL, same image, one
core each.

Usage:
  bench/transforms_vs_torchvision.py [--bench build/bench/transforms_bench]
                                     [--min-time 0.3] [--repeats 200]

Both sides start from the same decoded 500 x 375 RGB image (transforms_bench's
SourceImage pixels, rebuilt here with numpy). Per op: CenterCrop(224), the op
with the same parameters, uint8 CHW tensor (torchvision: PILToTensor). The
recipe: RandomResizedCrop(224, bicubic), RandomHorizontalFlip,
TrivialAugmentWide(bicubic), ToTensor + Normalize, RandomErasing(0.25) on the
full image. Figures are CPU time per item (process CPU time for torchvision,
Google Benchmark's cpu_time for galley), which is less disturbed by other
load than wall time on a shared machine; both run single-threaded
(torch.set_num_threads(1), transforms_bench's one thread). Prints a table
with items/s and the ratio galley / torchvision.
"""

import argparse
import json
import subprocess
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision import transforms as TV

REPO = Path(__file__).resolve().parent.parent
IM = TV.InterpolationMode


def source_image():
    # transforms_bench.cc SourceImage: byte i = (i * 2654435761 mod 2^32) >> 24.
    i = np.arange(500 * 375 * 3, dtype=np.uint64)
    pixels = (((i * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)) >> np.uint64(24))
    return Image.fromarray(pixels.astype(np.uint8).reshape(375, 500, 3), "RGB")


# transforms_bench name -> the torchvision op it times (after CenterCrop(224)).
OPS = {
    "BM_Op/CenterCropOnly": None,
    "BM_Op/RandomCrop_pad4_reflect": TV.RandomCrop(224, padding=4, padding_mode="reflect"),
    "BM_Op/RandomVerticalFlip": TV.RandomVerticalFlip(p=1.0),
    "BM_Op/ColorJitter": TV.ColorJitter(0.4, 0.4, 0.4, 0.1),
    "BM_Op/Grayscale": TV.Grayscale(num_output_channels=3),
    "BM_Op/GaussianBlur_k23": TV.GaussianBlur(23, sigma=(0.1, 2.0)),
    "BM_Op/RandomRotation_bilinear": TV.RandomRotation(30, interpolation=IM.BILINEAR),
    "BM_Op/RandomAffine": TV.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1), shear=10),
    "BM_Op/AutoAugment_imagenet": TV.AutoAugment(),
    "BM_Op/RandAugment": TV.RandAugment(),
    "BM_Op/TrivialAugmentWide": TV.TrivialAugmentWide(),
    "BM_Op/AugMix": TV.AugMix(),
}


def recipe():
    return TV.Compose([TV.RandomResizedCrop(224, interpolation=IM.BICUBIC),
                       TV.RandomHorizontalFlip(), TV.TrivialAugmentWide(interpolation=IM.BICUBIC),
                       TV.ToTensor(), TV.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
                       TV.RandomErasing(p=0.25)])


def torchvision_cpu_per_item(transform, image, repeats):
    for _ in range(5):
        transform(image)  # warm-up
    start = time.process_time()
    for _ in range(repeats):
        transform(image)
    return (time.process_time() - start) / repeats


def galley_cpu_per_item(bench, min_time):
    names = "|".join(list(OPS) + ["BM_RandomErasingFloat32", "BM_ImageNetRecipe"])
    out = subprocess.run([bench, f"--benchmark_filter=^({names})/real_time$",
                          f"--benchmark_min_time={min_time}", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True).stdout
    result = {}
    for row in json.loads(out)["benchmarks"]:
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[row["time_unit"]]
        result[row["name"].rsplit("/real_time", 1)[0]] = row["cpu_time"] * scale
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default=str(REPO / "build/bench/transforms_bench"))
    p.add_argument("--min-time", type=float, default=0.3)
    p.add_argument("--repeats", type=int, default=200)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    image = source_image()
    galley = galley_cpu_per_item(args.bench, args.min_time)
    rows = []
    for name, op in OPS.items():
        steps = [TV.CenterCrop(224)] + ([op] if op is not None else []) + [TV.PILToTensor()]
        rows.append((name.split("/", 1)[1], galley.get(name),
                     torchvision_cpu_per_item(TV.Compose(steps), image, args.repeats)))
    erasing = TV.Compose([TV.CenterCrop(224), TV.ToTensor(),
                          TV.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
                          TV.RandomErasing(p=1.0)])
    rows.append(("RandomErasing (float32, after Normalize)", galley.get("BM_RandomErasingFloat32"),
                 torchvision_cpu_per_item(erasing, image, args.repeats)))
    rows.append(("ImageNet recipe (RRC bicubic+flip+TA+Normalize+RE)",
                 galley.get("BM_ImageNetRecipe"),
                 torchvision_cpu_per_item(recipe(), image, args.repeats)))
    print(f"{'op (after CenterCrop(224), uint8 CHW)':52} {'galley items/s':>15} "
          f"{'torchvision items/s':>20} {'ratio':>7}")
    for name, g, t in rows:
        ratio = t / g if g else float("nan")
        print(f"{name:52} {1 / g if g else float('nan'):15.0f} {1 / t:20.0f} {ratio:7.2f}")


if __name__ == "__main__":
    main()
