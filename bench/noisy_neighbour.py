"""A well-behaved job's speed beside a flooding peer, against beside an idle one.

One galleyd (no cache, so every batch is real work) serves a job that reads
batches as fast as it can for --seconds. Beside it runs a second client that
opens a job on another dataset of the same daemon and then either idles, or floods galleyd with
SlotReleased and StatsRequest frames without reading the replies (what a
buggy or hostile client does). The well-behaved job's batches/s in each case
and their ratio are printed (target: >= 0.90). The flooder speaks the wire
protocol directly (docs/protocol.md), from its own process.

    GALLEYD=build/server/daemon/galleyd PYTHONPATH=python /usr/bin/python3 \\
        bench/noisy_neighbour.py [--seconds 10] [--images 400]

Figures on a shared 2-core machine are noisy; the two phases run
back-to-back in the same run, so compare their ratio, not absolute speeds.
"""

import argparse
import json
import multiprocessing as mp
import os
import pathlib
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

MAGIC = 0x594C4C47


def frame(kind, body=b"", request_id=0):
    import galley
    return struct.pack("<IHHII", MAGIC, galley.protocol_version, kind, len(body), request_id) + body


def message_numbers():
    """Message numbers as protocol.h defines them (read, not assumed)."""
    text = (ROOT / "client" / "wire" / "protocol.h").read_text()
    numbers = {}
    for name in ("kHello", "kOpenJob", "kConsumerReady", "kSlotReleased", "kStatsRequest"):
        line = next(l for l in text.splitlines() if l.strip().startswith(name + " ="))
        numbers[name] = int(line.split("=")[1].split(",")[0])
    return numbers


def neighbour(sock_path, data, mode, stop, sent):
    n = message_numbers()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    s.sendall(frame(n["kHello"], b'{"client":"neighbour"}'))
    s.recv(4096)
    spec = {"dataset": data, "batch_size": 8, "prefetch": 2,
            "transform": {"ops": [{"op": "Resize", "size": [32, 32]}]}}
    s.sendall(frame(n["kOpenJob"], json.dumps(spec).encode(), 1))
    time.sleep(0.2)
    if mode == "idle":
        stop.wait()
        return
    s.setblocking(False)
    burst = (frame(n["kSlotReleased"]) * 50 + frame(n["kStatsRequest"], b"", 2)) * 20
    while not stop.is_set():
        try:
            n_bytes = s.send(burst)
            with sent.get_lock():
                sent.value += n_bytes // 16  # frames (16-byte headers, empty bodies)
        except BlockingIOError:
            time.sleep(0.001)  # the daemon paces us: the socket is full
        except OSError:
            return  # closed on us


def measure(sock_path, data, seconds):
    import galley
    from galley import transforms as T
    loader = galley.DataLoader(data, batch_size=16, socket=sock_path, epochs=None,
                               transform=T.Compose([T.RandomResizedCrop(64),
                                                    T.RandomHorizontalFlip()]))
    def endless():
        while True:  # one pass per epoch, as torch's DataLoader
            yield from loader

    it = endless()
    for _ in range(5):
        next(it)  # warm-up outside the timed loop
    batches, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        next(it)
        batches += 1
    rate = batches / (time.perf_counter() - t0)
    loader.close()
    return rate


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--images", type=int, default=400)
    args = ap.parse_args()
    from conftest import write_folder
    tmp = pathlib.Path(tempfile.mkdtemp())
    data = tmp / "data"
    write_folder(data, classes=4, per_class=args.images // 4, sizes=(96, 160), seed=1)
    # The neighbour reads a dataset of its own, so it never shares a sampler
    # (and its pace) with the measured job.
    other = tmp / "other"
    write_folder(other, classes=2, per_class=8, sizes=(32, 48), seed=2)
    galleyd = os.environ.get("GALLEYD", str(ROOT / "build/server/daemon/galleyd"))
    sock_path = str(tmp / "galleyd.sock")
    daemon = subprocess.Popen([galleyd, "--socket", sock_path, "--allowed-root", str(tmp),
                               "--cache-bytes", "0", "--log-level", "error"])
    try:
        while not os.path.exists(sock_path):
            time.sleep(0.05)
        rates = {}
        for mode in ("idle", "flood"):
            stop = mp.Event()
            sent = mp.Value("q", 0)
            peer = mp.Process(target=neighbour, args=(sock_path, str(other), mode, stop, sent))
            peer.start()
            time.sleep(0.5)
            rates[mode] = measure(sock_path, str(data), args.seconds)
            stop.set()
            peer.join(timeout=10)
            if peer.is_alive():
                peer.kill()
            print(f"beside an {mode:5} peer: {rates[mode]:8.1f} batches/s "
                  f"(the peer sent {sent.value} frames)", flush=True)
        print(f"ratio flood/idle: {rates['flood'] / rates['idle']:.3f} (target >= 0.90)")
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


if __name__ == "__main__":
    main()
