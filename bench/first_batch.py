"""Time from `import galley` to the first batch, beside torch's DataLoader.

Three ways to start a training script, each in a fresh Python process, on the
same ImageNet-like JPEGs, batch 64, RandomResizedCrop(224) + flip:

- galley, autostart: no daemon running; the first loader starts the user's
  galleyd (default settings: cache 25% of MemAvailable, so the node probe
  runs) and reads its first batch;
- galley, daemon up: the daemon the previous run started is still there;
- torch: `torch.utils.data.DataLoader` over torchvision's ImageFolder with
  `num_workers=2`, from `import torch` to the first batch.

Each is repeated --repeats times; the median and range are printed and
written to results/first_batch.csv.

    PYTHONPATH=python /usr/bin/python3 bench/first_batch.py [--images 1000] [--repeats 5]
    ~/.cache/galley/venv-torch2.14/bin/python bench/first_batch.py    # galley pip-installed there
"""

import argparse
import csv
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

GALLEY = """
import time
t0 = time.perf_counter()
import galley
from galley import transforms as T
loader = galley.DataLoader({data!r}, batch_size=64, shuffle=True,
                           transform=T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()]))
images, labels = next(iter(loader))
print(time.perf_counter() - t0)
"""

TORCH = """
import time
t0 = time.perf_counter()
import torch, torchvision
from torchvision import transforms as TV
dataset = torchvision.datasets.ImageFolder({data!r}, transform=TV.Compose([
    TV.RandomResizedCrop(224), TV.RandomHorizontalFlip(), TV.PILToTensor()]))
loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=2)
images, labels = next(iter(loader))
print(time.perf_counter() - t0)
"""


def timed(code, env):
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    if out.returncode != 0:
        sys.exit(f"run failed:\n{out.stderr}")
    return float(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--galleyd", default=str(ROOT / "build/server/daemon/galleyd"))
    parser.add_argument("--results", default=str(ROOT / "results"))
    args = parser.parse_args()

    data = ROOT / ".demo" / f"imagenet-like-{args.images}"
    subprocess.run([sys.executable, str(ROOT / "scripts/make_demo_dataset.py"), str(data),
                    "--images", str(args.images), "--classes", "10"], check=True)
    galleyctl = pathlib.Path(args.galleyd).with_name("galleyctl")
    rows = []
    with tempfile.TemporaryDirectory() as home:
        run = pathlib.Path(home) / "run"
        run.mkdir(mode=0o700)
        env = {k: v for k, v in os.environ.items() if k not in ("GALLEY_SOCKET", "GALLEY_AUTOSTART")}
        env.update(XDG_RUNTIME_DIR=str(run), XDG_CONFIG_HOME=str(pathlib.Path(home) / "config"),
                   GALLEYD=args.galleyd, GALLEY_IDLE_EXIT="600")
        socket = run / "galley" / "galleyd.sock"
        times = {"galley, autostart": [], "galley, daemon up": [], "torch DataLoader": []}
        for _ in range(args.repeats):
            times["galley, autostart"].append(timed(GALLEY.format(data=str(data)), env))
            times["galley, daemon up"].append(timed(GALLEY.format(data=str(data)), env))
            subprocess.run([str(galleyctl), "--socket", str(socket), "stop"], check=True,
                           capture_output=True)
            times["torch DataLoader"].append(timed(TORCH.format(data=str(data)), env))
    print(f"time from import to the first batch of 64 (s), {args.repeats} runs, "
          f"{args.images} images, python {sys.version.split()[0]}")
    print(f"{'':20s} {'median':>8s} {'min':>8s} {'max':>8s}")
    for name, values in times.items():
        row = {"scenario": name, "median_s": round(statistics.median(values), 3),
               "min_s": round(min(values), 3), "max_s": round(max(values), 3)}
        rows.append(row)
        print(f"{name:20s} {row['median_s']:8.3f} {row['min_s']:8.3f} {row['max_s']:8.3f}")
    os.makedirs(args.results, exist_ok=True)
    with open(os.path.join(args.results, "first_batch.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
