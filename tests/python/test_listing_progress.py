"""Progress while galleyd lists a large ImageFolder or manifest: the waiting
job prints it (files listed and rate; lines of the manifest's total), and a
`datasets` query made during the listing shows the entry."""

import io
import os

from PIL import Image

import galley
from galley import transforms as T
from galley.shards import IndexingProgress, format_progress

from conftest import start_daemon, stop_daemon

FILES = 20000


def test_format_of_folder_and_manifest_entries():
    folder = {"path": "/data/train", "kind": "folder", "unit": "files", "done": 1234,
              "total": None, "seconds": 2.5, "rate": 493.6, "seconds_left": -1.0,
              "classes": 1000, "classes_done": 12}
    assert format_progress(folder) == \
        "galley: listing train: 1234 files [00:02, 493.6 files/s, class folder 12/1000]"
    manifest = {"path": "/data/train.tsv", "kind": "manifest", "unit": "lines", "done": 250,
                "total": 1000, "seconds": 1.0, "rate": 250.0, "seconds_left": 3.0}
    assert format_progress(manifest) == \
        "galley: listing train.tsv: 250/1000 lines [25%, 250.0 lines/s, 00:03 left]"


class RecordingClient:
    """A client whose `datasets` replies are kept, to see what a query made
    while the listing ran returned."""

    def __init__(self, client):
        self.client, self.replies = client, []

    def query(self, what):
        reply = self.client.query(what)
        self.replies.append(reply)
        return reply


def watch(daemon, dataset):
    """Opens a job on `dataset` while a watcher prints progress; returns the
    printed lines, the `indexing` entries seen, and the job's batches."""
    watcher = RecordingClient(galley._galley.Client(daemon.socket, 10.0))
    stream = io.StringIO()
    os.environ["GALLEY_PROGRESS"] = "1"
    try:
        with IndexingProgress(lambda: watcher, dataset, stream=stream, delay=0, interval=0.005):
            loader = galley.DataLoader(dataset, batch_size=8, transform=T.Resize([8, 8]),
                                       socket=daemon.socket)
            batches = len(loader)
    finally:
        os.environ.pop("GALLEY_PROGRESS", None)
    loader.close()
    lines = [line for line in stream.getvalue().split("\r") if line.strip()]
    seen = [e for reply in watcher.replies for e in reply.get("indexing", [])]
    return lines, seen, batches


def test_progress_while_a_large_imagefolder_and_manifest_are_listed(tmp_path):
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 10, 10)).save(buffer, format="JPEG")
    jpeg = buffer.getvalue()
    root = tmp_path / "big"
    for c in range(4):
        d = root / f"class_{c}"
        d.mkdir(parents=True)
        for i in range(FILES // 4):
            with open(d / f"{i:05d}.jpg", "wb") as f:
                f.write(jpeg)
    manifest = tmp_path / "big.tsv"
    with open(manifest, "w") as f:
        f.write("# path<TAB>label\n")
        for c in range(4):
            for i in range(FILES // 4):
                f.write(f"big/class_{c}/{i:05d}.jpg\t{c}\n")

    daemon = start_daemon(tmp_path, "--cache-bytes", "0")
    try:
        lines, seen, batches = watch(daemon, str(root))
        assert batches == FILES // 8
        folder = [e for e in seen if e["kind"] == "folder"]
        assert folder, "no query made during the walk showed it"
        assert all(e["path"] == str(root.resolve()) and e["unit"] == "files" for e in folder)
        assert all(e["total"] is None and e["classes"] in (0, 4) for e in folder)
        assert all(0 <= e["done"] <= FILES for e in folder)
        assert any(e["done"] > 0 for e in folder), [e["done"] for e in folder]
        assert lines, "no progress printed"
        assert lines[-1].startswith("galley: listing big: ") and "files/s" in lines[-1], lines[-1]

        lines, seen, batches = watch(daemon, str(manifest))
        assert batches == FILES // 8
        entries = [e for e in seen if e["kind"] == "manifest"]
        assert entries, "no query made while the manifest was read showed it"
        assert all(e["path"] == str(manifest.resolve()) and e["unit"] == "lines" for e in entries)
        # The total is unknown (None) while galleyd counts the lines, and
        # nothing is done before it is known.
        assert all(e["total"] in (None, FILES + 1) for e in entries), entries
        assert all(e["done"] <= FILES + 1 if e["total"] else e["done"] == 0 for e in entries)
        assert lines and f"/{FILES + 1} lines [" in lines[-1], lines[-1]

        assert daemon.query("datasets")["indexing"] == [], "finished listings are gone"
    finally:
        stop_daemon(daemon)
