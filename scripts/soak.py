"""Soak galleyd: jobs open, consume, close, die and flood for a bounded time,
while one steady job checks that it gets every item exactly once per epoch;
the daemon's RSS, threads, descriptors, rings and shared memory are sampled
over time and compared between the start and the end.

    GALLEYD=build/server/daemon/galleyd PYTHONPATH=python /usr/bin/python3 \\
        scripts/soak.py [--seconds 600] [--interval 10] [--workers 6]

Each worker process loops over one behaviour:
  polite   opens a loader, reads a few batches, closes it;
  killed   opens a loader, reads a batch, and is SIGKILLed by the driver;
  breaker  leaves mid-epoch (break) and reopens, or holds its batches;
  flooder  speaks the wire protocol directly: opens a job and floods
           SlotReleased, StatsRequest and Query frames without reading;
  idler    connects, says Hello, and sits there until dropped.
Exit status 1 when the steady job lost or duplicated an item, galleyd died,
or what galleyd holds at the end (threads, descriptors, rings, shared memory
once the workers are gone) is more than it held at the start.
"""

import argparse
import json
import multiprocessing as mp
import os
import pathlib
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(ROOT / "bench"))

from noisy_neighbour import frame, message_numbers  # noqa: E402

BEHAVIOURS = ["polite", "killed", "breaker", "flooder", "idler"]


def loader(data, sock, **kwargs):
    import galley
    from galley import transforms as T
    return galley.DataLoader(data, batch_size=8, shuffle=True, transform=T.Resize([16, 16]),
                             socket=sock, timeout=60, **kwargs)


def worker(kind, data, sock, seed):
    rng = random.Random(seed)
    if kind == "killed":
        it = iter(loader(data, sock, prefetch=rng.randint(1, 3)))
        next(it)
        time.sleep(60)  # the driver kills it first
        return
    if kind in ("polite", "breaker"):
        while True:
            ld = loader(data, sock, prefetch=rng.randint(1, 3))
            held = []
            for n, (x, _y) in enumerate(ld):
                if kind == "breaker" and rng.random() < 0.5:
                    held.append(x)  # keeps a slot until the loader is dropped
                if n >= rng.randint(1, 6):
                    break
            del held
            ld.close()
    n = message_numbers()
    if kind == "flooder":
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sock)
            s.sendall(frame(n["kHello"], b'{"client":"soak-flooder"}'))
            spec = {"dataset": data, "batch_size": 4, "prefetch": 1,
                    "transform": {"ops": [{"op": "Resize", "size": [16, 16]}]}}
            s.sendall(frame(n["kOpenJob"], json.dumps(spec).encode(), 1))
            s.setblocking(False)
            end = time.monotonic() + rng.uniform(1, 5)
            while time.monotonic() < end:
                kind_no = rng.choice([n["kSlotReleased"], n["kStatsRequest"]])
                try:
                    s.send(frame(kind_no, b"{}"))
                except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                    break
            s.close()
    if kind == "idler":
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sock)
            s.sendall(frame(n["kHello"], b'{"client":"soak-idler"}'))
            s.settimeout(120)
            try:
                while s.recv(4096):
                    pass
            except OSError:
                pass
            s.close()


def sample(pid, sock):
    """What galleyd holds now."""
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    field = {line.split(":")[0]: line.split(":")[1].strip() for line in status.splitlines()}
    fds = os.listdir(f"/proc/{pid}/fd")
    rings = 0
    for fd in fds:
        try:
            rings += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:galley-ring")
        except OSError:
            pass
    import galley
    s = galley.query("status", socket=sock)
    return {"rss_mib": int(field["VmRSS"].split()[0]) / 1024, "threads": int(field["Threads"]),
            "fds": len(fds), "rings": rings, "shm_mib": s["shm_bytes"] / 2**20,
            "jobs": s["jobs"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--interval", type=float, default=10)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--images", type=int, default=120)
    args = parser.parse_args()

    from conftest import start_daemon, stop_daemon, write_folder
    work = pathlib.Path(tempfile.mkdtemp(prefix="galley-soak-"))
    data = work / "data"
    write_folder(data, classes=4, per_class=args.images // 4, sizes=(24, 48))
    daemon = start_daemon(work)
    pid = daemon.proc.pid
    ctx = mp.get_context("spawn")
    stop, report = ctx.Event(), ctx.Queue()

    steady_proc = ctx.Process(target=steady_entry, args=(str(data), daemon.socket, stop, report))
    # One epoch first, so the baseline counts the threads galleyd starts on
    # its first work (its pipeline's worker pool).
    warm = loader(str(data), daemon.socket)
    for _batch in warm:
        pass
    warm.close()
    time.sleep(1.5)
    baseline = sample(pid, daemon.socket)
    steady_proc.start()
    print(f"soak: galleyd pid {pid}, {args.workers} workers, {args.seconds:g} s")
    print(f"{'t':>6} {'rss MiB':>8} {'threads':>8} {'fds':>5} {'rings':>6} {'shm MiB':>8} "
          f"{'jobs':>5} {'spawned':>8} {'killed':>7}")
    rng = random.Random(1)
    procs, spawned, killed = [], 0, 0
    start = time.monotonic()
    next_sample = start
    rows = []
    ok = True
    while time.monotonic() - start < args.seconds:
        procs = [p for p in procs if p.is_alive()]
        while len(procs) < args.workers:
            kind = BEHAVIOURS[spawned % len(BEHAVIOURS)]
            p = ctx.Process(target=worker, args=(kind, str(data), daemon.socket, spawned),
                            daemon=True)
            p.start()
            p.kind, p.started = kind, time.monotonic()
            procs.append(p)
            spawned += 1
        for p in procs:
            # Every worker dies sooner or later, by SIGKILL, at a random point.
            if time.monotonic() - p.started > rng.uniform(0.5, 8):
                p.kill()  # a no-op for one that already ended
                p.join()
                killed += 1
        if daemon.proc.poll() is not None:
            print(f"soak: galleyd died with {daemon.proc.returncode}")
            ok = False
            break
        if time.monotonic() >= next_sample:
            row = sample(pid, daemon.socket)
            rows.append(row)
            print(f"{time.monotonic() - start:6.0f} {row['rss_mib']:8.1f} {row['threads']:8d} "
                  f"{row['fds']:5d} {row['rings']:6d} {row['shm_mib']:8.1f} {row['jobs']:5d} "
                  f"{spawned:8d} {killed:7d}", flush=True)
            next_sample += args.interval
        time.sleep(0.1)
    for p in procs:
        p.kill()
        p.join()
    stop.set()
    epochs, errors = report.get(timeout=300)
    steady_proc.join()
    # The daemon notices the last closes and joins their threads within a few
    # seconds; what it still holds after 20 s is a leak.
    end = None
    deadline = time.monotonic() + 20
    while daemon.proc.poll() is None:
        end = sample(pid, daemon.socket)
        settled = all(end[k] <= baseline[k] for k in ("threads", "fds", "rings", "jobs"))
        if settled or time.monotonic() > deadline:
            break
        time.sleep(1.5)  # longer than galleyd takes to reap a finished connection
    stop_daemon(daemon)
    print(f"steady job: {epochs} epochs, {errors} not exactly-once")
    print(f"start: {json.dumps(baseline)}")
    print(f"end:   {json.dumps(end)}")
    if errors:
        ok = False
    if end is not None:
        for key in ("threads", "fds", "rings", "jobs"):
            if end[key] > baseline[key]:
                print(f"soak: galleyd holds more {key} at the end ({end[key]}) than at the "
                      f"start ({baseline[key]})")
                ok = False
        if end["shm_mib"] > baseline["shm_mib"]:
            print("soak: shared memory still held at the end")
            ok = False
    else:
        ok = False
    print("soak: ok" if ok else "soak: FAILED")
    sys.exit(0 if ok else 1)


def steady_entry(data, sock, stop, report):
    import galley
    from galley import transforms as T
    ld = galley.DataLoader(data, batch_size=8, shuffle=True, transform=T.Resize([16, 16]),
                           socket=sock, timeout=60)
    size = ld.info["dataset_size"]
    epochs = errors = 0
    while not stop.is_set():
        items = [i for _x, _y, ids in ld.iter_with_ids() for i in ids.tolist()]
        if sorted(items) != list(range(size)):
            errors += 1
        epochs += 1
    ld.close()
    report.put((epochs, errors))


if __name__ == "__main__":
    main()
