"""galleyctl's text against a real galleyd: what an operator reads."""

import io
import os
import subprocess
import tarfile

import galley

from conftest import GALLEYD, start_daemon, stop_daemon, write_folder

GALLEYCTL = os.path.join(os.path.dirname(GALLEYD), "galleyctl")


def galleyctl(socket, *args):
    done = subprocess.run([GALLEYCTL, "--socket", socket, *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def write_tiny_shards(directory, jpeg, count):
    """`count` shards of one sample each (the same JPEG, label 0)."""
    directory.mkdir()
    for s in range(count):
        with tarfile.open(directory / f"train-{s:06d}.tar", "w") as tar:
            for name, data in ((f"s{s:06d}.jpg", jpeg), (f"s{s:06d}.cls", b"0")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def test_datasets_gives_a_thousand_shards_one_line_and_verbose_names_each(tmp_path):
    image, = write_folder(tmp_path / "one", classes=1, per_class=1, sizes=(8, 8))
    write_tiny_shards(tmp_path / "in1k", image.read_bytes(), 1024)
    daemon = start_daemon(tmp_path)
    try:
        loader = galley.DataLoader(str(tmp_path / "in1k"), batch_size=8, socket=daemon.socket)
        assert len(loader) == 128  # lists the set
        loader.close()

        summary = galleyctl(daemon.socket, "datasets").splitlines()
        # One line for the set, not one per shard.
        assert len(summary) == 4, summary
        assert summary[0] == "datasets: 1 (--verbose lists every shard)"
        folder = tmp_path / "in1k"
        assert summary[1].startswith(f"  {folder}/train-000000.tar .. train-001023.tar: "
                                     f"1024 shards, 1024 items, ")
        assert summary[2] == "sampler groups: 1"

        verbose = galleyctl(daemon.socket, "datasets", "--verbose")
        for s in range(1024):
            assert f"| {folder}/train-{s:06d}.tar\n" in verbose
        assert "fingerprint: " in verbose
    finally:
        stop_daemon(daemon)
