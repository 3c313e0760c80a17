#!/usr/bin/python3
"""Runs N concurrent training-style jobs against a running galleyd and prints
each job's and the total images/s.

Each job is its own process with its own galley.DataLoader over the same
dataset (RandomResizedCrop(224) + RandomHorizontalFlip, uint8), as N users of
one node would run them.
"""

import argparse
import multiprocessing as mp
import time


def job(index, args, barrier, results):
    import galley
    from galley import transforms as T
    loader = galley.DataLoader(
        args.dataset, batch_size=args.batch_size, shuffle=True, seed=index,
        transform=T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()]),
        socket=args.socket, name=f"demo-{index}")
    len(loader)  # opens the job
    barrier.wait()
    start = time.perf_counter()
    images = 0
    checksum = 0
    for _ in range(args.epochs):
        for batch, labels in loader:
            images += batch.shape[0]
            checksum += int(batch[:, :, 0, 0].sum())  # touch the data like a consumer would
    elapsed = time.perf_counter() - start
    loader.close()
    results.put((index, images, elapsed))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(args.jobs + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=job, args=(i, args, barrier, results)) for i in range(args.jobs)]
    for p in procs:
        p.start()
    barrier.wait()
    start = time.perf_counter()
    rows = [results.get() for _ in procs]
    wall = time.perf_counter() - start
    for p in procs:
        p.join()
    print(f"{args.jobs} concurrent jobs, {args.epochs} epoch(s) each, batch {args.batch_size}, "
          f"RandomResizedCrop(224) + RandomHorizontalFlip, uint8 NCHW")
    print(f"{'job':>4} {'images':>8} {'seconds':>8} {'images/s':>9}")
    total = 0
    for index, images, elapsed in sorted(rows):
        total += images
        print(f"{index:>4} {images:>8} {elapsed:>8.2f} {images / elapsed:>9.1f}")
    print(f"total {total:>7} {wall:>8.2f} {total / wall:>9.1f}  (aggregate images/s)")


if __name__ == "__main__":
    main()
