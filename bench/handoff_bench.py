#!/usr/bin/python3
"""Time from a published (ready) batch slot to a torch tensor in Python.

Starts galleyd on a temporary socket, lets a job's ring fill, then times
`next(iterator)` for batches that are already ready: the semaphore wait, the
lease, the zero-copy numpy/torch wrapping, and the release of the previous
batch. Prints the median and 90th percentile in microseconds.

    PYTHONPATH=python /usr/bin/python3 bench/handoff_bench.py [--galleyd build/server/daemon/galleyd]
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--galleyd", default=str(ROOT / "build/server/daemon/galleyd"))
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    import numpy as np
    from PIL import Image

    import torch

    import galley
    from galley import transforms as T

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        data = tmp / "data" / "c"
        data.mkdir(parents=True)
        rng = np.random.default_rng(0)
        for i in range(args.batch_size * 2):
            Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(data / f"{i}.jpg")
        sock = str(tmp / "g.sock")
        daemon = subprocess.Popen([args.galleyd, "--socket", sock, "--log-level", "warn",
                                   "--allowed-root", str(tmp)])
        try:
            while not os.path.exists(sock):
                time.sleep(0.05)
            loader = galley.DataLoader(tmp / "data", batch_size=args.batch_size, prefetch=4,
                                       transform=T.Resize([224, 224]), socket=sock)
            job = loader._open()
            first, warm, release = [], [], []
            while len(warm) < args.rounds:
                time.sleep(0.05)  # the daemon refills the ring: 4 batches are ready
                held = []
                for k in range(4):
                    start = time.perf_counter()
                    images, labels, _ids, meta = job.next(10.0)
                    tensor = torch.from_numpy(images)
                    took = time.perf_counter() - start
                    held.append((images, tensor))
                    if meta["last_in_epoch"] and not len(labels):
                        continue
                    (first if k == 0 else warm).append(took)
                # Releasing wakes the daemon, which starts the next batches on
                # these same cores: time only this thread's CPU for it.
                start = time.thread_time()
                del images, tensor
                held.clear()
                release.append((time.thread_time() - start) / 4)
            loader.close()
        finally:
            daemon.terminate()
            daemon.wait()
    def summary(samples):
        us = sorted(t * 1e6 for t in samples)
        return f"median {statistics.median(us):.1f} us, p90 {us[int(0.9 * len(us))]:.1f} us"

    print(f"ready slot -> torch tensor ({args.batch_size} x 3 x 224 x 224 uint8, zero-copy)")
    print(f"  back to back (a training loop):  {summary(warm)} over {len(warm)} hand-offs")
    print(f"  first after 50 ms idle (cold):   {summary(first)}")
    print(f"  releasing a batch (thread CPU):  {summary(release)}")

if __name__ == "__main__":
    main()
