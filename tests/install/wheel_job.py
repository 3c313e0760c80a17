"""The job the wheel checks run where nothing but the wheel is installed.

    python3 wheel_job.py make DIR   # the dataset (needs Pillow; run on the build machine)
    python3 wheel_job.py run DIR    # one epoch of it through the low-level client, no torch

`run` starts the wheel's own galleyd (autostart; GALLEYD names another) and
checks that every item arrives exactly once.
"""
import array
import pathlib
import sys


def make(root):
    from PIL import Image
    # One class per decoder in the wheel: TurboJPEG, libpng, the BMP reader.
    for c, ext in enumerate(("jpg", "png", "bmp")):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(7):
            Image.new("RGB", (40 + 3 * i, 36), (80 * c, 30 * i, 120)).save(root / f"c{c}" / f"{i}.{ext}")


def run(root):
    import galley
    from galley import _autostart, transforms as T
    client = _autostart.client(None, True)
    spec = {"dataset": str(root), "batch_size": 5, "epochs": 1, "shuffle": True,
            "transform": T.build_spec(T.Compose([T.Resize(32), T.CenterCrop(32)]))}
    job = client.open_job(spec)
    ids = []
    while True:
        memory, labels, item_ids, meta = job.next(600)
        ids.extend(array.array("q", bytes(item_ids)))
        assert memoryview(memory).nbytes == len(labels) // 8 * 3 * 32 * 32
        if meta["last_in_epoch"]:
            break
    assert sorted(ids) == list(range(21)), ids
    status = galley.query("status")
    print("ok", sys.version.split()[0], galley.__version__, status["version"], status["socket"])


if __name__ == "__main__":
    {"make": make, "run": run}[sys.argv[1]](pathlib.Path(sys.argv[2]))
