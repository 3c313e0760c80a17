"""galley.DataLoader against a real galleyd, with real JPEGs and real torch."""

import collections
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch
import torchvision
from torchvision import transforms as TV

import galley
from galley import transforms as T

from stats import first_pair_p, position_table_p

FIXED = T.Compose([T.Resize(64), T.CenterCrop(56)])


def flip_in_the_job(image):
    """An op galleyd does not know: the rest of the transform runs in the job."""
    return image.flip(-1)


# How the tests of the sampler's guarantees run: the transform wholly in
# galleyd; with a Python part in the main process; with it in two workers.
PYTHON_STAGES = {
    "galleyd": dict(),
    "python": dict(python_tail=True),
    "workers": dict(python_tail=True, num_workers=2, persistent_workers=True),
}


def staged(transform, python_tail=False, **workers):
    """The loader arguments for ``transform`` in one of PYTHON_STAGES."""
    if python_tail:
        transform = T.Compose([transform, T.PILToTensor(), TV.Lambda(flip_in_the_job)])
    return dict(transform=transform, **workers)


def epoch_ids(loader):
    ids = []
    for _images, _labels, item_ids in loader.iter_with_ids():
        ids.extend(item_ids.tolist())
    return ids


@pytest.mark.compat
def test_deterministic_pipeline_matches_torchvision_pixels(daemon, folder):
    # Reference: torchvision's own ImageFolder + Resize + CenterCrop on PIL
    # images. Both sides decode with libjpeg-turbo's islow IDCT and resize
    # with the same antialiased bilinear arithmetic, so the pixels agree
    # exactly on this machine; one level is allowed because a different CPU
    # may take another SIMD path in either library.
    reference = torchvision.datasets.ImageFolder(
        str(folder), transform=TV.Compose([TV.Resize(64), TV.CenterCrop(56), TV.PILToTensor()]))
    loader = galley.DataLoader(folder, batch_size=7, transform=FIXED, socket=daemon.socket)
    seen = 0
    worst = 0
    total_diff = 0.0
    for images, labels, ids in loader.iter_with_ids():
        assert images.dtype == torch.uint8 and images.shape[1:] == (3, 56, 56)
        for image, label, item in zip(images, labels, ids.tolist()):
            expected, expected_label = reference[item]
            diff = (image.int() - expected.int()).abs()
            worst = max(worst, int(diff.max()))
            total_diff += float(diff.float().mean())
            assert int(label) == expected_label
            seen += 1
    assert seen == len(reference)
    mean_diff = total_diff / seen
    assert worst <= 1, f"max |galley - torchvision| = {worst} levels"
    assert mean_diff < 0.01, f"mean |galley - torchvision| = {mean_diff:.4f} levels"
    loader.close()


@pytest.mark.compat
def test_labels_and_classes_match_torchvision_imagefolder(daemon, folder):
    reference = torchvision.datasets.ImageFolder(str(folder))
    loader = galley.DataLoader(folder, batch_size=16, transform=FIXED, socket=daemon.socket)
    assert loader.classes == reference.classes
    labels_by_id = {}
    for _images, labels, ids in loader.iter_with_ids():
        labels_by_id.update(zip(ids.tolist(), labels.tolist()))
    assert labels_by_id == {i: label for i, (_path, label) in enumerate(reference.samples)}
    loader.close()


@pytest.mark.parametrize("stage", PYTHON_STAGES)
@pytest.mark.parametrize("batch_size,drop_last", [(7, False), (7, True), (60, False), (1, False)])
def test_every_item_exactly_once_per_epoch(daemon, folder, batch_size, drop_last, stage):
    loader = galley.DataLoader(folder, batch_size=batch_size, drop_last=drop_last,
                               socket=daemon.socket, seed=3, shuffle=True,
                               **staged(FIXED, **PYTHON_STAGES[stage]))
    n = 60
    expected_batches = n // batch_size if drop_last else -(-n // batch_size)
    assert len(loader) == expected_batches
    orders = []
    for _ in range(3):
        batches = 0
        ids = []
        for images, labels, item_ids in loader.iter_with_ids():
            batches += 1
            assert images.shape[0] == labels.shape[0] == item_ids.shape[0]
            if drop_last:
                assert images.shape[0] == batch_size
            ids.extend(item_ids.tolist())
        assert batches == expected_batches
        assert len(set(ids)) == len(ids), "an item was delivered twice in one epoch"
        if drop_last:
            assert len(ids) == expected_batches * batch_size
        else:
            assert sorted(ids) == list(range(n))
        orders.append(ids)
    assert orders[0] != orders[1], "two epochs had the same order"
    loader.close()


def test_ddp_ranks_get_disjoint_complete_shards(daemon, folder):
    world = 3
    loaders = [galley.DataLoader(folder, batch_size=8, transform=FIXED, socket=daemon.socket,
                                 seed=11, rank=r, world_size=world, shuffle=True)
               for r in range(world)]
    # 20 items per rank, batch 8: 3 batches each (the last one short).
    assert [len(l) for l in loaders] == [3, 3, 3]
    shards_by_epoch = []
    for epoch in range(2):
        shards = [set(epoch_ids(l)) for l in loaders]
        for a in range(world):
            for b in range(a + 1, world):
                assert not shards[a] & shards[b], "ranks overlap"
        assert set().union(*shards) == set(range(60))
        assert all(len(s) == 20 for s in shards)
        shards_by_epoch.append(shards)
    assert shards_by_epoch[0] != shards_by_epoch[1], "the split should change every epoch"
    for l in loaders:
        l.close()


@pytest.mark.parametrize("stage", PYTHON_STAGES)
def test_order_is_uniformly_random(daemon, tiny_folder, stage):
    # 12 items, 3,600 epochs over 4 jobs: each item x position cell expects
    # 300 hits, each ordered first pair 27. At alpha = 0.001 a 5% bias in one
    # item's position probability shifts the statistic by far more than the
    # test's noise; tests/python/test_stats.py shows the same test rejecting
    # a sampler with such a bias.
    n = 12
    orders = []
    for seed in range(4):
        loader = galley.DataLoader(tiny_folder, batch_size=n, seed=seed, shuffle=True,
                                   socket=daemon.socket,
                                   **staged(T.Resize([8, 8]), **PYTHON_STAGES[stage]))
        for _ in range(900):
            order = epoch_ids(loader)
            assert sorted(order) == list(range(n))
            orders.append(order)
        loader.close()
    p_position, p_pair = position_table_p(orders, n), first_pair_p(orders, n)
    assert p_position > 0.001, f"positions not uniform: p = {p_position:.2e}"
    assert p_pair > 0.001, f"first pairs not uniform: p = {p_pair:.2e}"


def test_augmentation_is_a_pure_function_of_seed_epoch_item(daemon, folder):
    aug = T.Compose([T.RandomResizedCrop(48), T.RandomHorizontalFlip()])

    def by_id(seed):
        loader = galley.DataLoader(folder, batch_size=9, transform=aug, seed=seed,
                                   socket=daemon.socket)
        loader.set_epoch(4)
        out = {}
        for images, _labels, ids in loader.iter_with_ids():
            out.update({i: img.clone() for i, img in zip(ids.tolist(), images)})
        loader.close()
        return out

    a, b, c = by_id(5), by_id(5), by_id(6)
    assert all(torch.equal(a[i], b[i]) for i in a)
    assert sum(not torch.equal(a[i], c[i]) for i in a) > 50


@pytest.mark.compat
def test_normalised_float_output(daemon, folder):
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    raw = galley.DataLoader(folder, batch_size=60, transform=FIXED, socket=daemon.socket)
    norm = galley.DataLoader(
        folder, batch_size=60, socket=daemon.socket,
        transform=T.Compose([T.Resize(64), T.CenterCrop(56), T.Normalize(mean, std)]))
    (x, _l, ids_x), = list(raw.iter_with_ids())
    (y, _m, ids_y), = list(norm.iter_with_ids())
    assert y.dtype == torch.float32 and y.shape == x.shape
    x = x[ids_x.argsort()].float() / 255
    y = y[ids_y.argsort()]
    expected = (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    assert torch.allclose(y, expected, atol=1e-5)
    raw.close()
    norm.close()


@pytest.mark.compat
def test_batches_are_zero_copy_and_freed_slots_return(daemon, folder):
    loader = galley.DataLoader(folder, batch_size=4, prefetch=2, transform=FIXED,
                               socket=daemon.socket, timeout=30.0, epochs=None)
    it = iter(loader)
    # prefetch=2: two batches ahead of the one in hand, three slots in all.
    held = [next(it), next(it), next(it)]
    with pytest.raises(RuntimeError, match=r"\.clone\(\)"):
        next(it)  # at once, not after the timeout
    del held[0]  # frees one slot: the daemon can fill it again
    it = iter(loader)  # the failed generator is finished; a new loop continues
    images, labels = next(it)
    assert images.shape == (4, 3, 56, 56)
    assert images.is_contiguous()
    del held, images, labels, it
    loader.close()


def test_prefetch_one_double_buffers_a_plain_loop(daemon, folder):
    # prefetch=1 once deadlocked after the first batch: the only slot was the
    # one the loop body held.
    loader = galley.DataLoader(folder, batch_size=4, prefetch=1, transform=FIXED,
                               socket=daemon.socket, timeout=30.0, epochs=1)
    seen = 0
    for images, labels in loader:
        seen += len(labels)
    assert seen == 4 * 15  # the whole folder fixture, once
    loader.close()


def test_corrupt_truncated_and_empty_files_are_skipped_and_counted(daemon, workdir):
    from conftest import write_folder
    root = workdir / "damaged"
    paths = write_folder(root, classes=2, per_class=10, seed=9)
    (root / "class_00" / "bad.jpg").write_bytes(b"definitely not a jpeg")
    (root / "class_01" / "empty.jpg").write_bytes(b"")
    data = paths[0].read_bytes()
    (root / "class_01" / "truncated.jpg").write_bytes(data[: len(data) // 2])

    loader = galley.DataLoader(root, batch_size=5, transform=FIXED, socket=daemon.socket,
                               drop_last=True)
    assert len(loader) == 4  # 23 files, 3 of them broken: batch count is exact
    good = set(range(23)) - {10, 21, 22}  # bad.jpg, empty.jpg, truncated.jpg sort last
    for epoch in range(2):
        batches = list(loader.iter_with_ids())
        assert [len(b[2]) for b in batches] == [5, 5, 5, 5]  # substitutes fill the gaps
        ids = [i for b in batches for i in b[2].tolist()]
        assert set(ids) <= good
        del batches  # their slots go back to the daemon
    assert loader.skipped > 0
    loader.close()
    loader = galley.DataLoader(root, batch_size=5, transform=FIXED, socket=daemon.socket)
    ids = epoch_ids(loader)
    assert len(ids) == 23 and set(ids) == good  # every good file once, 3 substitutes
    assert loader.skipped == 3
    loader.close()

    strict = galley.DataLoader(root, batch_size=23, on_error="raise", transform=FIXED,
                               socket=daemon.socket)
    with pytest.raises(galley.SampleError, match=r"\.jpg"):
        for _ in strict:
            pass
    strict.close()


def test_an_image_folder_deleted_mid_run_raises_instead_of_empty_epochs(tmp_path):
    from conftest import start_daemon, stop_daemon, write_folder
    root = tmp_path / "vanishing"
    write_folder(root, classes=2, per_class=10, seed=6)
    daemon = start_daemon(tmp_path, "--cache-bytes", "0")  # nothing to serve it from but the files
    try:
        loader = galley.DataLoader(root, batch_size=4, prefetch=1, transform=FIXED,
                                   socket=daemon.socket, epochs=5)
        it = loader.iter_with_ids()
        delivered = next(it)[2].tolist()
        shutil.rmtree(root)
        # galleyd may have read part of a batch before the folder went: 1 to 4
        # of its samples are unreadable, and that batch ends the job.
        message = (r"dataset changed under the job: [1-4] samples? of epoch 0, batch (\d) of 5 "
                   r"unreadable; iterate again to re-list it\. First: "
                   + re.escape(str(root)) + r"/class_0[01]/\d{4}\.jpg: .*no such file")
        with pytest.raises(galley.SampleError, match=message) as raised:
            for batch in it:
                delivered.extend(batch[2].tolist())
                del batch  # its slot goes back to the daemon
        failed_batch = int(re.search(message, str(raised.value)).group(1))
        assert delivered == list(range(4 * (failed_batch - 1))), "whole batches, then none"
        # The next epoch is no empty epoch either: the folder is gone.
        with pytest.raises(galley.DatasetNotFound, match=re.escape(str(root))):
            for _ in loader:
                pass
        loader.close()
    finally:
        stop_daemon(daemon)


def test_failed_samples_without_a_substitute_raise_instead_of_a_short_epoch(daemon, workdir):
    root = workdir / "all_broken"
    (root / "class_00").mkdir(parents=True)
    for i in range(6):
        (root / "class_00" / f"{i}.jpg").write_bytes(b"not a jpeg at all")
    loader = galley.DataLoader(root, batch_size=3, transform=FIXED, socket=daemon.socket)
    with pytest.raises(galley.SampleError,
                       match=r"3 of 3 samples of epoch 0, batch 1 of 2 failed and none could "
                             r"be replaced\. First: .*all_broken/class_00/\d\.jpg"):
        epoch_ids(loader)
    loader.close()


def test_a_file_name_that_is_not_utf8_is_shown_escaped(daemon, workdir):
    # The skip-mode error text once raised UnicodeDecodeError instead.
    from conftest import write_folder
    root = workdir / "latin1_file"
    write_folder(root, classes=1, per_class=3, seed=4)
    with open(os.path.join(os.fsencode(root / "class_00"), b"caf\xe9.jpg"), "wb") as f:
        f.write(b"not a jpeg")
    strict = galley.DataLoader(root, batch_size=4, on_error="raise", transform=FIXED,
                               socket=daemon.socket)
    with pytest.raises(galley.SampleError, match=r"caf\\xe9\.jpg"):
        for _ in strict:
            pass
    strict.close()


CHILD = textwrap.dedent("""
    import os, signal, sys
    import galley
    from galley import transforms as T
    loader = galley.DataLoader(sys.argv[1], batch_size=4, socket=sys.argv[2],
                               transform=T.Compose([T.Resize(64), T.CenterCrop(56)]))
    it = iter(loader)
    batch = next(it)
    print("got", batch[0].shape, flush=True)
    os.kill(os.getpid(), signal.SIGKILL if sys.argv[3] == "kill" else signal.SIGTERM)
""")


@pytest.mark.parametrize("how", ["kill", "exit"])
def test_client_dying_mid_epoch_leaves_daemon_serving_and_no_segment(daemon, folder, how):
    other = galley.DataLoader(folder, batch_size=4, transform=FIXED, socket=daemon.socket)
    it = iter(other)
    next(it)
    before = daemon.query()["jobs"]
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(folder), daemon.socket, how],
                          env=env, capture_output=True, text=True, timeout=60)
    assert "got" in proc.stdout, proc.stderr
    # galleyd learns of the dead client when it reads the closed connection;
    # the deadline bounds a hang only.
    deadline = time.monotonic() + 60
    while daemon.query()["jobs"] != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert daemon.query()["jobs"] == before
    assert not [f for f in os.listdir("/dev/shm") if f.startswith("galley-")]
    for _ in range(10):
        images, _labels = next(it)
        assert images.shape[0] == 4
    del it
    other.close()


def test_unreachable_daemon_is_a_clear_error(tmp_path):
    loader = galley.DataLoader(tmp_path, batch_size=2, transform=FIXED,
                               socket=str(tmp_path / "nobody.sock"))
    with pytest.raises(galley.ServerUnavailable, match="galleyd"):
        len(loader)


def test_bad_requests_raise_python_exceptions(daemon, folder, workdir):
    with pytest.raises(galley.DatasetNotFound):
        len(galley.DataLoader(workdir / "missing", batch_size=2, transform=FIXED,
                              socket=daemon.socket))
    with pytest.raises(galley.InvalidRequest, match="size"):
        len(galley.DataLoader(folder, batch_size=2, transform=T.Resize(64), socket=daemon.socket))
    with pytest.raises(galley.AccessDenied):
        len(galley.DataLoader("/usr/share", batch_size=2, transform=FIXED, socket=daemon.socket))
    with pytest.raises(ValueError):
        galley.DataLoader(folder, batch_size=0, transform=FIXED, socket=daemon.socket)


def test_region_decode_gives_the_same_samples_as_a_full_decode(daemon, folder, workdir):
    # Without a cache galleyd decodes only the rectangle each random crop
    # reads; with room in the decoded tier it decodes whole images. A sample
    # is a pure function of (seed, epoch, item), so both must agree exactly.
    from conftest import start_daemon, stop_daemon
    aug = T.Compose([T.RandomResizedCrop(48), T.RandomHorizontalFlip()])

    def samples(socket):
        loader = galley.DataLoader(folder, batch_size=10, transform=aug, seed=21, socket=socket)
        out = {}
        for images, _labels, ids in loader.iter_with_ids():
            out.update({i: img.clone() for i, img in zip(ids.tolist(), images)})
        loader.close()
        return out

    uncached_dir = workdir / "uncached"
    uncached_dir.mkdir()
    uncached = start_daemon(uncached_dir, "--cache-bytes", "0", "--allowed-root", str(folder))
    try:
        partial = samples(uncached.socket)
        pipeline = uncached.query()["pipeline"]
        # The daemon also prepares the next epoch's first batches ahead.
        assert pipeline["region_decodes"] >= len(partial)
        assert pipeline["region_decodes"] == pipeline["decodes"]
    finally:
        stop_daemon(uncached)
    whole = samples(daemon.socket)
    assert partial.keys() == whole.keys()
    assert all(torch.equal(partial[i], whole[i]) for i in whole)
