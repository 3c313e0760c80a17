"""max_resolution= against a real galleyd on real JPEGs: shrunk images are
Pillow's BOX resizes of the originals, images within the limit take the
exact path, the decoded tier holds the shrunk pixels and the encoded tier
packs them, every tier serves the same samples, and jobs with another
max_resolution (or none) share nothing. The size arithmetic and the resize
itself are unit-tested in tests/unit/image_max_resolution_test.cc, the
packed form in tests/unit/image_pixel_codec_test.cc, and the remote tier's
forms in tests/unit/daemon_cache_pipeline_test.cc."""

import io
import os
import subprocess
import tarfile

import numpy as np
import PIL
import pytest
import torch
import torchvision
from PIL import Image
from torchvision import transforms as TV

import galley
from conftest import GALLEYD, start_daemon, stop_daemon, write_folder

GALLEYCTL = os.path.join(os.path.dirname(GALLEYD), "galleyctl")

# The decoded tier's bookkeeping per entry (cache/include/galley/cache/blob.h).
ENTRY_OVERHEAD = 256
# Pillow 9 decodes with the system's libjpeg-turbo, as galleyd does
# (test_transforms_parity.py): the pixels are identical there, and these
# tests are marked `compat` so that they also run under Debian's Pillow 9.
# A newer Pillow wheel bundles its own libjpeg-turbo, a level apart at
# most, which an average (BOX) or a crop carries unchanged.
SAME_PILLOW = PIL.__version__.startswith("9.")
LEVELS_APART = 0 if SAME_PILLOW else 1


def same_pixels(a, b):
    return a.shape == b.shape and int((a.int() - b.int()).abs().max()) <= LEVELS_APART


def shrunk_size(width, height, limit):
    """The size galleyd keeps an image at: the longer side at `limit`, the
    shorter one scaled and rounded down (torchvision's Resize(max_size=))."""
    longer = max(width, height)
    if longer <= limit:
        return width, height
    if width >= height:
        return limit, max(1, height * limit // longer)
    return max(1, width * limit // longer), limit


def pil_shrink(limit):
    def load(path):
        with open(path, "rb") as f:
            image = Image.open(f).convert("RGB")
        return image.resize(shrunk_size(*image.size, limit), Image.BOX)
    return load


def by_id(loader):
    out = {}
    for images, _labels, ids in loader.iter_with_ids():
        out.update({i: image.clone() for i, image in zip(ids.tolist(), images)})
    loader.close()
    return out


@pytest.fixture(scope="module")
def large(workdir):
    """3 classes x 6 JPEGs of 300..600 px, landscape and portrait (the demo
    set's sizes): every one is over 256 on its longer side."""
    root = workdir / "max_resolution_large"
    paths = write_folder(root, classes=3, per_class=6, sizes=(300, 600), seed=11)
    assert all(max(Image.open(p).size) > 256 for p in paths)
    return root


@pytest.fixture(scope="module")
def same_size(workdir):
    """6 JPEGs all 480 x 360, for transform=None (the images themselves)."""
    root = workdir / "max_resolution_same"
    rng = np.random.default_rng(3)
    for c in range(2):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(3):
            small = rng.integers(0, 256, size=(45, 60, 3), dtype=np.uint8)
            Image.fromarray(small).resize((480, 360), Image.BICUBIC).save(
                root / f"c{c}" / f"{i}.jpg", quality=90)
    return root


@pytest.mark.compat
def test_the_images_are_pillow_box_resizes_of_the_originals(daemon, same_size):
    loader = galley.DataLoader(same_size, batch_size=6, socket=daemon.socket, epochs=1,
                               shuffle=False, max_resolution=256)
    images, _labels = next(iter(loader))
    loader.close()
    assert images.shape == (6, 3, 192, 256)
    reference = torchvision.datasets.ImageFolder(str(same_size), loader=pil_shrink(256))
    for i in range(6):
        expected = torch.from_numpy(np.array(reference[i][0])).permute(2, 0, 1)
        assert same_pixels(images[i], expected), i


@pytest.mark.compat
def test_the_transform_runs_on_the_shrunk_image_of_every_shape(daemon, large):
    # Mixed sizes and orientations: the shorter side after the shrink is at
    # least 128, so a CenterCrop(120) of it shows its pixels.
    transform = TV.Compose([TV.CenterCrop(120), TV.PILToTensor()])
    shrunk = by_id(galley.DataLoader(large, batch_size=5, transform=transform, epochs=1,
                                     socket=daemon.socket, max_resolution=256))
    reference = torchvision.datasets.ImageFolder(str(large), transform=transform,
                                                 loader=pil_shrink(256))
    assert sorted(shrunk) == list(range(len(reference)))
    for i, image in shrunk.items():
        assert same_pixels(image, reference[i][0]), i
    # The exact path shrinks nothing: its crops are torchvision's of the
    # originals, and differ from the shrunk ones.
    exact = by_id(galley.DataLoader(large, batch_size=5, transform=transform, epochs=1,
                                    socket=daemon.socket))
    original = torchvision.datasets.ImageFolder(str(large), transform=transform)
    assert all(same_pixels(image, original[i][0]) for i, image in exact.items())
    assert all(not torch.equal(exact[i], shrunk[i]) for i in exact)


def test_images_within_the_limit_get_the_exact_samples(daemon, folder):
    # The folder's images are 80..160 px: within 160 and 256 they pass
    # unchanged, so a random crop draws the same geometry on the same pixels.
    recipe = TV.Compose([TV.RandomResizedCrop(48), TV.RandomHorizontalFlip(), TV.PILToTensor()])

    def samples(**extra):
        return by_id(galley.DataLoader(folder, batch_size=7, transform=recipe, seed=9, epochs=1,
                                       socket=daemon.socket, **extra))

    exact = samples()
    for limit in (160, 256):
        within = samples(max_resolution=limit)
        assert within.keys() == exact.keys()
        assert all(torch.equal(within[i], exact[i]) for i in exact)
    # 100 shrinks most of them: the same draws then crop other pixels.
    smaller = samples(max_resolution=100)
    assert any(not torch.equal(smaller[i], exact[i]) for i in exact)


def test_the_exact_path_sends_no_max_resolution(daemon, folder):
    loader = galley.DataLoader(folder, batch_size=4, socket=daemon.socket)
    assert "max_resolution" not in loader._spec and loader.max_resolution is None
    loader.close()
    loader = galley.DataLoader(folder, batch_size=4, socket=daemon.socket, max_resolution=300)
    assert loader._spec["max_resolution"] == 300
    loader.close()


@pytest.mark.parametrize("value, error, message", [
    (0, ValueError, r"max_resolution must lie in \[16, 65535\].*got 0"),
    (-256, ValueError, r"max_resolution must lie in \[16, 65535\].*got -256"),
    (8, ValueError, r"got 8"),
    (70000, ValueError, r"got 70000"),
    (256.0, TypeError, r"max_resolution must be an int .*got 256.0"),
    ("256", TypeError, r"got '256'"),
    (True, TypeError, r"got True"),
])
def test_a_bad_value_is_refused_before_any_job(folder, value, error, message):
    with pytest.raises(error, match=message):
        galley.DataLoader(folder, batch_size=4, socket="/nonexistent", max_resolution=value)


def test_galleyd_refuses_a_bad_value_naming_the_field(daemon, folder):
    from galley import _autostart
    client = _autostart.client(daemon.socket, False)
    spec = {"dataset": str(folder), "batch_size": 2, "transform": {"ops": []},
            "max_resolution": 8}
    with pytest.raises(galley.InvalidRequest,
                       match=r"'max_resolution' is the longest side in pixels images are kept "
                             r"at: 16 to 65535, or 0 .*got 8"):
        client.open_job(spec)


def test_the_decoded_tier_holds_the_shrunk_pixels_and_nothing_is_shared(tmp_path, large):
    # Room for every item's full-resolution pixels in the decoded tier, so
    # what it holds is exactly what each job's epoch left there.
    daemon = start_daemon(tmp_path, "--cache-bytes", "64M", "--cache-split", "0,100,0",
                          "--allowed-root", str(large))
    try:
        transform = TV.Compose([TV.RandomResizedCrop(64), TV.PILToTensor()])
        sizes = [Image.open(path).size
                 for path, _ in torchvision.datasets.ImageFolder(str(large)).samples]
        shrunk_bytes = sum(3 * w * h + ENTRY_OVERHEAD
                           for w, h in (shrunk_size(w, h, 256) for w, h in sizes))
        full_bytes = sum(3 * w * h + ENTRY_OVERHEAD for w, h in sizes)
        assert full_bytes > 2 * shrunk_bytes

        def epoch(**extra):
            by_id(galley.DataLoader(large, batch_size=6, transform=transform, epochs=1,
                                    socket=daemon.socket, **extra))
            cache = daemon.query("cache")
            return cache["tiers"]["decoded"], cache["pipeline"]

        tier, pipeline = epoch(max_resolution=256)
        assert tier["entries"] == len(sizes)
        assert tier["bytes"] == shrunk_bytes
        assert pipeline["file_reads"] == len(sizes) and pipeline["decoded_hits"] == 0
        # The same folder at full resolution is another dataset: read and
        # decoded again, never served the shrunk pixels.
        tier, pipeline = epoch()
        assert pipeline["file_reads"] == 2 * len(sizes) and pipeline["decoded_hits"] == 0
        assert tier["entries"] == 2 * len(sizes)
        assert tier["bytes"] == shrunk_bytes + full_bytes
        # And so is another limit.
        tier, pipeline = epoch(max_resolution=300)
        assert pipeline["file_reads"] == 3 * len(sizes) and pipeline["decoded_hits"] == 0
        # A later job at 256 is served from its group's entries.
        tier, pipeline = epoch(max_resolution=256)
        assert pipeline["file_reads"] == 3 * len(sizes)
        assert pipeline["decoded_hits"] == len(sizes)
        listed = [d for d in daemon.query("datasets")["datasets"] if d["root"] == str(large)]
        assert len(listed) == 3 and len({d["index"] for d in listed}) == 3
    finally:
        stop_daemon(daemon)


def test_every_tier_serves_the_same_samples_and_the_encoded_tier_packs_the_pixels(tmp_path,
                                                                                 large):
    # Two epochs of one seed on three daemons: without a cache, with only a
    # decoded tier and with only an encoded tier, each large enough for the
    # whole set. The second epoch is served by the tier.
    transform = TV.Compose([TV.RandomResizedCrop(64), TV.RandomHorizontalFlip(),
                            TV.PILToTensor()])
    sizes = [Image.open(path).size
             for path, _ in torchvision.datasets.ImageFolder(str(large)).samples]
    shrunk_bytes = sum(3 * w * h for w, h in (shrunk_size(w, h, 256) for w, h in sizes))
    n = len(sizes)

    def two_epochs(name, *flags):
        directory = tmp_path / name
        directory.mkdir()
        daemon = start_daemon(directory, *flags, "--allowed-root", str(large))
        try:
            epochs = [by_id(galley.DataLoader(large, batch_size=6, transform=transform,
                                              epochs=1, seed=7, socket=daemon.socket,
                                              max_resolution=256)) for _ in range(2)]
            return epochs, daemon.query("status")["pipeline"], daemon.query("cache")
        finally:
            stop_daemon(daemon)

    (reference, again), pipeline, _ = two_epochs("uncached", "--cache-bytes", "0")
    assert sorted(reference) == list(range(n))
    assert all(torch.equal(reference[i], again[i]) for i in reference)
    assert pipeline["file_reads"] == 2 * n

    (first, second), pipeline, _ = two_epochs("decoded", "--cache-bytes", "64M",
                                              "--cache-split", "0,100,0")
    assert pipeline["decoded_hits"] == n and pipeline["packs"] == 0
    for epoch in (first, second):
        assert all(torch.equal(epoch[i], reference[i]) for i in reference)

    (first, second), pipeline, cache = two_epochs("encoded", "--cache-bytes", "64M",
                                                  "--cache-split", "100,0,0")
    tier = cache["tiers"]["encoded"]
    # The first epoch decoded each file and packed its shrunk pixels; the
    # second read nothing and decoded nothing: it unpacked them.
    assert pipeline["file_reads"] == n and pipeline["decodes"] == n
    assert pipeline["packs"] == n
    assert pipeline["encoded_hits"] == n and pipeline["unpacks"] == n
    assert pipeline["unpack_failures"] == 0 and pipeline["failures"] == 0
    for epoch in (first, second):
        assert all(torch.equal(epoch[i], reference[i]) for i in reference)
    # What the tier holds is the packed pixels: less than the shrunk pixels,
    # and not the files' bytes.
    files_bytes = sum(os.path.getsize(path) for path, _ in
                      torchvision.datasets.ImageFolder(str(large)).samples)
    assert tier["entries"] == n
    packed_bytes = tier["bytes"] - n * ENTRY_OVERHEAD
    assert packed_bytes < shrunk_bytes
    assert packed_bytes != files_bytes


def test_a_shard_set_at_a_max_resolution_is_a_dataset_of_its_own(daemon, workdir, large):
    directory = workdir / "max_resolution_shards"
    directory.mkdir()
    files = [path for path, _ in torchvision.datasets.ImageFolder(str(large)).samples]
    shards = []
    for s in range(2):
        shards.append(directory / f"part-{s}.tar")
        with tarfile.open(shards[-1], "w") as tar:
            for i, path in enumerate(files[s::2]):
                with open(path, "rb") as f:
                    members = ((f"{i:04d}.jpg", f.read()), (f"{i:04d}.cls", b"0"))
                for name, data in members:
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    transform = TV.Compose([TV.CenterCrop(120), TV.PILToTensor()])
    for limit in (None, 256):
        samples = by_id(galley.DataLoader([str(p) for p in shards], batch_size=6, epochs=1,
                                          transform=transform, socket=daemon.socket,
                                          max_resolution=limit))
        assert len(samples) == len(files)
    listed = [d for d in daemon.query("datasets")["datasets"]
              if d["key"].startswith("shards\n") and str(shards[0]) in d["key"]]
    assert len(listed) == 2 and len({d["index"] for d in listed}) == 2
    # Either way the key ends with the shard paths, one per line, which is
    # how galleyctl names the set.
    for d in listed:
        assert d["key"].split("\n")[3:] == [str(p) for p in shards]
    assert sum("max_resolution:256" in d["key"] for d in listed) == 1
    text = subprocess.run([GALLEYCTL, "--socket", daemon.socket, "datasets"], check=True,
                          capture_output=True, text=True).stdout
    assert text.count(f"{shards[0]} .. {shards[1].name}:") == 2
