"""An s3:// prefix read as an ImageFolder against the same folder on disk.

Writes N JPEGs (256x192, 100 classes) to a folder, serves a copy of it with
`rclone serve s3` on 127.0.0.1 (no added latency: a store across a network
answers each GET some milliseconds later), starts galleyd with
a cache too small to hold an epoch (every epoch reads and decodes every
image), and measures images/s of one loader (Resize(64), batch 64) over the
local folder and over the prefix: the first epoch (the listing included) and
the second. Also the store's GETs, LIST pages and HEADs per epoch.

  PYTHONPATH=python ~/.cache/galley/venv-torch2.14/bin/python bench/s3_folder_rate.py [--images 4000]
"""

import argparse
import io
import os
import shutil
import socket as socketlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "tests" / "python"))

from conftest import start_daemon, stop_daemon  # noqa: E402
from test_s3_datasets import find_rclone  # noqa: E402

KEY, SECRET = "GALLEYBENCHKEY", "galley-bench-secret"


def write_folder(root, images, classes=100):
    rng = np.random.default_rng(1)
    for i in range(images):
        folder = root / f"class{i % classes:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, size=(24, 32, 3), dtype=np.uint8)
        out = io.BytesIO()
        Image.fromarray(pixels).resize((256, 192)).save(out, "JPEG", quality=85)
        (folder / f"{i:06d}.jpg").write_bytes(out.getvalue())


def serve(root):
    listener = socketlib.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    port = listener.getsockname()[1]
    proc = subprocess.Popen(
        ["sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$@" 3<&0 0</dev/null', "sh",
         find_rclone(), "serve", "s3", "--auth-key", f"{KEY},{SECRET}",
         "--config", str(root / "rclone.conf"), str(root / "data")],
        stdin=listener.fileno(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    listener.close()
    return proc, f"http://127.0.0.1:{port}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=4000)
    args = parser.parse_args()
    import galley
    from galley import transforms as T
    work = Path(tempfile.mkdtemp(prefix="galley-s3-folder-"))
    try:
        write_folder(work / "local", args.images)
        shutil.copytree(work / "local", work / "s3" / "data" / "bench" / "imgs")
        rclone, url = serve(work / "s3")
        os.environ.update(AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
                          AWS_ENDPOINT_URL_S3=url, AWS_CONFIG_FILE=str(work / "none"),
                          AWS_SHARED_CREDENTIALS_FILE=str(work / "none"))
        daemon = start_daemon(work, "--allowed-s3-endpoint", url, "--cache-bytes", "16M")
        try:
            for name, dataset in (("local folder", str(work / "local")),
                                  ("s3:// prefix", "s3://bench/imgs/")):
                for epoch in (1, 2):
                    before = daemon.query("status")["object_store"]
                    loader = galley.DataLoader(dataset, batch_size=64, epochs=1,
                                               socket=daemon.socket,
                                               transform=T.Compose([T.Resize(64),
                                                                    T.CenterCrop(64)]))
                    start = time.perf_counter()
                    count = sum(len(y) for _x, y in loader)
                    seconds = time.perf_counter() - start
                    after = daemon.query("status")["object_store"]
                    delta = {k: after[k] - before[k] for k in ("gets", "lists", "heads")}
                    print(f"{name}, epoch {epoch}: {count} images in {seconds:.2f} s, "
                          f"{count / seconds:.0f} images/s; store: {delta}")
        finally:
            stop_daemon(daemon)
            rclone.terminate()
            rclone.wait()
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
