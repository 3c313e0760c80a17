"""fields= behaves like the data it came from, against a real galleyd, on
real shards and manifests, beside webdataset, Python's csv module and
pandas where they apply: samples left out are announced, a column has one
type in every batch, a bad member is a bad sample under on_error, CSV as
RFC 4180 writes it, duplicate members are refused, and what the job is
told (labels, loads) is what the data holds."""

import tarfile
import warnings

import pytest
import torch

import galley
from galley import transforms as T

from conftest import write_folder
from test_fields import FIXED, add_member


@pytest.fixture(scope="module")
def images(workdir):
    """20 small real JPEGs, as bytes, and their paths under workdir."""
    root = workdir / "fields_data_images"
    paths = write_folder(root, classes=1, per_class=20, sizes=(40, 50), seed=11)
    return [p.read_bytes() for p in paths], [str(p.relative_to(workdir)) for p in paths]


def write_shard(path, images, members):
    """A shard of len(images) samples k00..; members(i) gives sample i's
    other members as (extension, bytes)."""
    with tarfile.open(path, "w") as tar:
        for i, data in enumerate(images):
            add_member(tar, f"k{i:02d}.jpg", data)
            for extension, value in members(i):
                add_member(tar, f"k{i:02d}.{extension}", value)
    return str(path)


# -- 1. samples missing a named member --------------------------------------------------


@pytest.fixture(scope="module")
def gappy_shard(workdir, images):
    """20 samples of jpg + txt + cls; k03 and k11 have no .txt."""
    return write_shard(workdir / "gappy.tar", images[0],
                       lambda i: ([] if i in (3, 11) else [("txt", f"caption {i}".encode())])
                       + [("cls", str(i % 4).encode())])


def test_samples_missing_a_named_member_are_announced(daemon, gappy_shard):
    loader = galley.DataLoader(gappy_shard, batch_size=6, transform=FIXED,
                               fields=("jpg", "txt"), socket=daemon.socket)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        served = [text for _images, captions in loader for text in captions]
    loader.close()
    assert len(served) == 18
    said = [str(w.message) for w in caught if "left out" in str(w.message)]
    assert len(said) == 1, [str(w.message) for w in caught]
    assert said[0].startswith("galley: 2 sample(s) of the shards are left out and never served")
    assert "gappy.tar: k03 (no .txt member)" in said[0] and "k11 (no .txt member)" in said[0]
    assert loader.left_out == 2
    assert [s.rsplit("/", 1)[-1] for s in loader.left_out_samples] == [
        "gappy.tar: k03 (no .txt member)", "gappy.tar: k11 (no .txt member)"]


def test_webdataset_refuses_what_galley_leaves_out_and_names(gappy_shard):
    wds = pytest.importorskip("webdataset", reason="installed by scripts/setup_venv.sh")
    with pytest.raises(ValueError, match=r"didn't find \['txt'\]"):
        list(wds.WebDataset(gappy_shard, shardshuffle=False).to_tuple("jpg", "txt"))


def test_on_error_raise_refuses_at_open_naming_the_missing_member(daemon, gappy_shard):
    loader = galley.DataLoader(gappy_shard, batch_size=6, transform=FIXED, on_error="raise",
                               fields=("jpg", "txt"), socket=daemon.socket)
    with pytest.raises(galley.InvalidRequest) as raised:
        len(loader)
    message = str(raised.value)
    assert "2 sample(s) of the shards are left out: 2 have no .txt member" in message
    assert "gappy.tar: k03 (no .txt member)" in message
    assert "no usable image or label" not in message


def test_a_misspelt_member_lists_the_members_the_samples_have(daemon, gappy_shard):
    loader = galley.DataLoader(gappy_shard, batch_size=6, transform=FIXED,
                               fields=("jpg", "txtt"), socket=daemon.socket)
    with pytest.raises(galley.InvalidRequest,
                       match=r"no sample has a \.txtt member \(the samples' members: cls, jpg, "
                             r"txt\)"):
        len(loader)
