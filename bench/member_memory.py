"""galleyd's peak memory while it serves one large tar member.

Writes a shard holding one sample whose member of --mb MiB is, in turn:

- txt:   a caption (a field: the sample's field record carries it);
- json:  a JSON document, one long string (a field, checked to be JSON);
- npy:   opaque bytes under a field's name;
- image: the image itself, a small JPEG followed by other bytes;
- image+txt: the same image with a small caption (the shard's image and
  field members read together or apart).

For each, starts a galleyd of its own (the build's, or GALLEYD=), reads
--epochs epochs of the one-sample job through galley.DataLoader (batch 1,
the default prefetch, max_member_bytes raised to let the member through),
and reports galleyd's VmHWM from /proc/PID/status beside the ring's size
(segment_bytes, committed whole when the job opens): the growth beyond the
ring, as a multiple of the member, is what one member in flight costs.

    PYTHONPATH=python /usr/bin/python3 bench/member_memory.py [--mb 100] [--epochs 3]
"""

import argparse
import io
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[1]
MIB = 1 << 20


def small_jpeg():
    pixels = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


def members(kind, size):
    """The sample's members (extension -> bytes) and the job's field, if any."""
    image = small_jpeg()
    padded = image + b"\0" * (size - len(image))
    if kind == "txt":
        return {"jpg": image, "txt": b"x" * size}, "txt"
    if kind == "json":
        return {"jpg": image, "json": b'{"caption": "' + b"x" * (size - 16) + b'"}'}, "json"
    if kind == "npy":
        return {"jpg": image, "npy": b"\x93" * size}, "npy"
    if kind == "image":
        return {"jpg": padded}, None
    return {"jpg": padded, "txt": b"a caption"}, "txt"


def memory(pid):
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(value.split()[0]) * 1024
    return values["VmRSS"], values["VmHWM"]


def measure(directory, kind, size, epochs, galleyd):
    import galley
    from galley import transforms as T
    sample, field = members(kind, size)
    shard = directory / f"{kind}.tar"
    with tarfile.open(shard, "w") as tar:
        for extension, data in sample.items():
            info = tarfile.TarInfo(f"k0.{extension}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path = str(directory / f"{kind}.sock")
    log = open(directory / f"{kind}.log", "w")
    # The node probe is skipped (rates given) so that only the job's work
    # shows in the peak.
    proc = subprocess.Popen([galleyd, "--socket", path, "--allowed-root", str(directory),
                             "--tar-index-dir", str(directory / "index"),
                             "--decode-per-core-per-s", "400", "--augment-per-core-per-s", "4000",
                             "--memory-bytes-per-s", "5e9", "--cache-prefault", "false"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"galleyd exited with {proc.returncode}; see {log.name}")
            if os.path.exists(path):
                with socket.socket(socket.AF_UNIX) as probe:
                    if probe.connect_ex(path) == 0:
                        break
            time.sleep(0.02)
        before, _ = memory(proc.pid)
        options = dict(batch_size=1, socket=path, label_key=None,
                       transform=T.Compose([T.Resize(32), T.CenterCrop(32)]))
        if field is not None:
            options.update(fields=("jpg", field), decode_fields=False, max_member_bytes=size + MIB)
        loader = galley.DataLoader([str(shard)], **options)
        for _ in range(epochs):
            for _batch in loader:
                pass
        ring = loader.info["segment_bytes"]
        loader.close()
        _, peak = memory(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        log.close()
    return before, peak, ring


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="the member's size in MiB")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--kinds", default="txt,json,npy,image,image+txt")
    args = parser.parse_args()
    galleyd = os.environ.get("GALLEYD", str(ROOT / "build" / "server" / "daemon" / "galleyd"))
    size = args.mb * MIB
    print(f"{'member':<10} {'VmHWM MiB':>10} {'ring MiB':>9} {'beyond ring':>12}")
    with tempfile.TemporaryDirectory(prefix="galley-member-") as tmp:
        for kind in args.kinds.split(","):
            directory = pathlib.Path(tmp) / kind.replace("+", "_")
            directory.mkdir()
            before, peak, ring = measure(directory, kind, size, args.epochs, galleyd)
            beyond = peak - before - ring
            print(f"{kind:<10} {peak / MIB:>10.0f} {ring / MIB:>9.0f} "
                  f"{beyond / size:>11.2f}x", flush=True)


if __name__ == "__main__":
    sys.exit(main())
