#!/usr/bin/python3
"""Test accuracy of a small CNN trained through galley and through PyTorch's DataLoader.

Usage:
  bench/accuracy_parity.py [--train 10000] [--test 2000] [--epochs 3] [--seeds 1,2]
                           [--batch-size 64] [--recipe plain|augment]
                           [--galleyd PATH] [--results DIR] [--max-resolution N]

Fashion-MNIST (Debian's dataset-fashion-mnist) is written as PNG ImageFolders
by scripts/make_fashion_mnist.py into .demo/fashion-mnist-{train,test}-<N>.
One model per seed is trained on CPU through galley — all seeds at once, one
process each, as concurrent jobs of one galleyd — and one per seed through
torch.utils.data.DataLoader over torchvision's ImageFolder (also concurrently).
Model, optimizer, initial weights, batch size and epochs are the same for a
seed on both sides; only the loader differs. Both loaders resize to 28x28
(the identity here) and give uint8 RGB; the training loop takes one channel
as float / 255. With --recipe augment both sides get the same torchvision
Compose, an augmentation-heavy one: RandomCrop(28, padding=2, reflect),
RandomHorizontalFlip, TrivialAugmentWide, ToTensor, RandomErasing(0.25)
(galley translates it and runs it in galleyd). Every model is evaluated by
the same code on the test split. With --max-resolution N a third loader,
galley@N, trains the same models through galley with max_resolution=N (the
28 px images kept at N px, then resized back to 28 by the transform), tested
on the same full-resolution test split.

Prints a table and writes DIR/accuracy_parity.csv.
"""

import argparse
import csv
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))


def die_with_parent():
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def make_model():
    import torch.nn as nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def load_test_set(root):
    """The test ImageFolder as one float tensor [N, 1, 28, 28] in [0, 1] and labels."""
    import numpy as np
    import torch
    import torchvision
    folder = torchvision.datasets.ImageFolder(root)
    images = np.stack([np.asarray(folder.loader(path), np.uint8)[:, :, 0]
                       for path, _ in folder.samples])
    labels = torch.tensor([label for _, label in folder.samples], dtype=torch.int64)
    return torch.from_numpy(images).unsqueeze(1).float() / 255.0, labels, folder.classes


def to_input(images):
    # [B, 3, 28, 28] (gray replicated into RGB) -> float [B, 1, 28, 28] in [0, 1]
    if images.is_floating_point():
        return images[:, :1].clone()  # ToTensor already scaled it
    return images[:, :1].float() / 255.0


def augment_recipe():
    """The augmentation-heavy recipe, one torchvision object for both loaders."""
    from torchvision import transforms as TT
    return TT.Compose([TT.RandomCrop(28, padding=2, padding_mode="reflect"),
                       TT.RandomHorizontalFlip(), TT.TrivialAugmentWide(), TT.ToTensor(),
                       TT.RandomErasing(p=0.25)])


def train(spec, results):
    """Body of one training process; puts a result row on `results`."""
    try:
        die_with_parent()
        import torch
        import torch.nn.functional as F
        torch.set_num_threads(1)
        torch.manual_seed(spec["seed"])
        model = make_model()
        optimizer = torch.optim.Adam(model.parameters(), lr=spec["lr"])

        if spec["side"].startswith("galley"):
            import galley
            from galley import transforms as GT
            recipe = augment_recipe() if spec["recipe"] == "augment" else None
            loader = galley.DataLoader(spec["train"], batch_size=spec["batch_size"],
                                       shuffle=True,
                                       transform=recipe or GT.Compose([GT.Resize([28, 28])]),
                                       seed=spec["seed"], socket=spec["socket"],
                                       max_resolution=spec.get("max_resolution"),
                                       name=f"parity-seed{spec['seed']}")
            classes = loader.classes
        else:
            import torchvision
            from torchvision import transforms as TT
            recipe = augment_recipe() if spec["recipe"] == "augment" else None
            dataset = torchvision.datasets.ImageFolder(
                spec["train"],
                transform=recipe or TT.Compose([TT.Resize([28, 28]), TT.PILToTensor()]))
            loader = torch.utils.data.DataLoader(
                dataset, batch_size=spec["batch_size"], shuffle=True,
                num_workers=spec["torch_workers"],
                generator=torch.Generator().manual_seed(spec["seed"]))
            classes = dataset.classes

        test_images, test_labels, test_classes = load_test_set(spec["test"])
        if list(classes) != list(test_classes):
            raise RuntimeError(f"train classes {classes} differ from test classes {test_classes}")

        losses = []
        seen = 0
        start = time.monotonic()
        for _epoch in range(spec["epochs"]):
            model.train()
            total, count = 0.0, 0
            for images, labels in loader:
                x = to_input(images)
                y = labels.to(torch.int64)
                del images  # galley: the ring slot goes back as soon as possible
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                total += float(loss) * len(y)
                count += len(y)
            losses.append(total / count)
            seen += count
        elapsed = time.monotonic() - start
        if spec["side"].startswith("galley"):
            loader.close()

        model.eval()
        with torch.no_grad():
            correct = sum(int((model(test_images[i:i + 500]).argmax(1) ==
                               test_labels[i:i + 500]).sum())
                          for i in range(0, len(test_labels), 500))
        results.put({"side": spec["side"], "seed": spec["seed"], "epochs": spec["epochs"],
                     "train_images": seen, "train_seconds": elapsed,
                     "final_train_loss": losses[-1], "train_losses": losses,
                     "test_accuracy": correct / len(test_labels), "error": ""})
    except BaseException:
        results.put({"side": spec["side"], "seed": spec["seed"],
                     "error": traceback.format_exc().strip().splitlines()[-1]})


def run_concurrently(specs, timeout):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=train, args=(spec, results)) for spec in specs]
    for p in procs:
        p.start()
    rows = []
    try:
        deadline = time.monotonic() + timeout
        while len(rows) < len(specs) and time.monotonic() < deadline:
            try:
                rows.append(results.get(timeout=1.0))
            except Exception:
                if not any(p.is_alive() for p in procs):
                    break
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    done = {(r["side"], r["seed"]) for r in rows}
    for spec in specs:
        if (spec["side"], spec["seed"]) not in done:
            rows.append({"side": spec["side"], "seed": spec["seed"],
                         "error": "no result (timed out or crashed)"})
    return rows


def start_daemon(galleyd, allowed_root, run_dir):
    socket = os.path.join(run_dir, "galleyd.sock")
    log = open(os.path.join(run_dir, "galleyd.log"), "wb")
    proc = subprocess.Popen([galleyd, "--socket", socket, "--allowed-root", str(allowed_root)],
                            stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    log.close()
    deadline = time.monotonic() + 20
    while not os.path.exists(socket):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("galleyd did not start; see its log in " + run_dir)
        time.sleep(0.05)
    return proc, socket


def _on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", type=int, default=10000, help="training images")
    p.add_argument("--test", type=int, default=2000, help="test images")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seeds", default="1,2")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--torch-workers", type=int, default=2)
    p.add_argument("--galleyd", default=str(REPO / "build/server/daemon/galleyd"))
    p.add_argument("--results", default=str(REPO / "results"))
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per side")
    p.add_argument("--recipe", choices=("plain", "augment"), default="plain",
                   help="augment: the TrivialAugmentWide + RandomErasing recipe on both sides")
    p.add_argument("--max-resolution", type=int, default=None,
                   help="also train through galley with max_resolution=N (loader galley@N)")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "python")] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x])

    demo = REPO / ".demo"
    train_dir = demo / f"fashion-mnist-train-{args.train}"
    test_dir = demo / f"fashion-mnist-test-{args.test}"
    maker = str(REPO / "scripts/make_fashion_mnist.py")
    subprocess.run([sys.executable, maker, str(train_dir), "--split", "train",
                    "--limit", str(args.train)], check=True)
    subprocess.run([sys.executable, maker, str(test_dir), "--split", "test",
                    "--limit", str(args.test)], check=True)

    common = {"train": str(train_dir), "test": str(test_dir), "epochs": args.epochs,
              "batch_size": args.batch_size, "lr": args.lr, "torch_workers": args.torch_workers,
              "recipe": args.recipe}
    rows = []
    run_dir = tempfile.mkdtemp(prefix="galley-parity-")
    daemon = None
    try:
        try:
            daemon, socket = start_daemon(args.galleyd, train_dir, run_dir)
            rows += run_concurrently([dict(common, side="galley", seed=s, socket=socket)
                                      for s in seeds], args.timeout)
            if args.max_resolution:
                rows += run_concurrently(
                    [dict(common, side=f"galley@{args.max_resolution}", seed=s, socket=socket,
                          max_resolution=args.max_resolution) for s in seeds], args.timeout)
        except Exception as e:
            rows += [{"side": "galley", "seed": s, "error": f"{type(e).__name__}: {e}"}
                     for s in seeds]
        finally:
            if daemon is not None:
                daemon.terminate()
                try:
                    daemon.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    daemon.kill()
                    daemon.wait()
        rows += run_concurrently([dict(common, side="pytorch", seed=s) for s in seeds],
                                 args.timeout)
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
        shutil.rmtree(run_dir, ignore_errors=True)

    print(f"\nFashion-MNIST: {args.train} train / {args.test} test images, {args.epochs} epochs, "
          f"recipe {args.recipe}, batch {args.batch_size}, Adam lr {args.lr}, CPU, "
          f"{len(seeds)} models trained concurrently per loader")
    header = (f"{'loader':10s} {'seed':>4s} {'test acc':>8s} {'train loss/epoch':>26s} "
              f"{'train s':>8s} {'images/s':>8s}")
    print(header)
    print("-" * len(header))
    rows.sort(key=lambda r: (r["side"], r["seed"]))
    for r in rows:
        if r.get("error"):
            print(f"{r['side']:10s} {r['seed']:>4d} ERROR: {r['error']}")
            continue
        losses = " ".join(f"{x:.3f}" for x in r["train_losses"])
        print(f"{r['side']:10s} {r['seed']:>4d} {r['test_accuracy']:>8.4f} {losses:>26s} "
              f"{r['train_seconds']:>8.1f} {r['train_images'] / r['train_seconds']:>8.0f}")
    sides = ["galley"] + ([f"galley@{args.max_resolution}"] if args.max_resolution else [])
    for side in sides + ["pytorch"]:
        accs = [r["test_accuracy"] for r in rows if r["side"] == side and not r.get("error")]
        if accs:
            print(f"{side:10s} mean test accuracy {sum(accs) / len(accs):.4f} over {len(accs)} "
                  f"model(s) (range {min(accs):.4f}-{max(accs):.4f})")

    os.makedirs(args.results, exist_ok=True)
    path = os.path.join(args.results, "accuracy_parity.csv")
    fields = ["side", "seed", "epochs", "train_images", "train_seconds", "final_train_loss",
              "test_accuracy", "error"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in fields})
    print(f"wrote {path}")
    if any(r.get("error") for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
