"""Datasets in tar shards (WebDataset layout) against a real galleyd: tars made
by Python's tarfile, GNU tar and webdataset's ShardWriter, served like an
ImageFolder of the same JPEGs."""

import io
import json
import os
import re
import resource
import shutil
import subprocess
import tarfile

import pytest
import torch

import galley
from galley import transforms as T
from galley.shards import expand_braces, resolve_dataset

from conftest import start_daemon, stop_daemon, write_folder
from stats import position_table_p

FIXED = T.Compose([T.Resize(64), T.CenterCrop(56)])


def Loader(dataset, **kwargs):
    """A galley loader in random order (torch's DataLoader defaults to
    shuffle=False, and so does galley's)."""
    return galley.DataLoader(dataset, shuffle=True, **kwargs)


def epoch_ids(loader):
    ids = []
    for _images, _labels, item_ids in loader.iter_with_ids():
        ids.extend(item_ids.tolist())
    return ids


def folder_samples(root):
    """(jpeg bytes, label) in ImageFolder order."""
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    return [(f.read_bytes(), label) for label, c in enumerate(classes)
            for f in sorted((root / c).iterdir())]


def add_member(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_shards(directory, samples, shards, fmt=tarfile.GNU_FORMAT, prefix="train"):
    """Samples in order, split into consecutive shards; key s00012 -> .jpg + .cls."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    per = -(-len(samples) // shards)
    for s in range(shards):
        path = directory / f"{prefix}-{s:06d}.tar"
        with tarfile.open(path, "w", format=fmt) as tar:
            for i in range(s * per, min(len(samples), (s + 1) * per)):
                data, label = samples[i]
                add_member(tar, f"s{i:05d}.jpg", data)
                add_member(tar, f"s{i:05d}.cls", str(label).encode())
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def corpus(workdir):
    """The 60-image ImageFolder and the same samples in 4 tarfile shards."""
    root = workdir / "shard_folder"
    write_folder(root, classes=4, per_class=15, seed=21)
    shards = write_shards(workdir / "shards4", folder_samples(root), 4)
    return root, shards


def test_patterns_expand_to_the_same_sorted_list(corpus):
    _, shards = corpus
    d = shards[0].parent
    as_list = [str(p) for p in shards]
    assert resolve_dataset(as_list)[1] == as_list
    assert resolve_dataset(str(d / "train-*.tar"))[1] == as_list
    assert resolve_dataset(str(d / "train-{000000..000003}.tar"))[1] == as_list
    assert resolve_dataset(str(d))[1] == as_list
    assert resolve_dataset(str(shards[1]))[1] == [str(shards[1])]
    assert expand_braces("a{1..3}b{x,y}") == ["a1bx", "a1by", "a2bx", "a2by", "a3bx", "a3by"]
    assert expand_braces("t-{008..010}") == ["t-008", "t-009", "t-010"]


def test_pixel_identical_to_the_same_images_in_an_imagefolder(daemon, corpus):
    root, shards = corpus
    aug = T.Compose([T.RandomResizedCrop(48), T.RandomHorizontalFlip()])
    results = []
    for dataset in (root, [str(p) for p in shards]):
        loader = Loader(dataset, batch_size=7, transform=aug, seed=5,
                                   socket=daemon.socket)
        by_id = {}
        for images, labels, ids in loader.iter_with_ids():
            for image, label, i in zip(images, labels, ids.tolist()):
                by_id[i] = (image.clone(), int(label))
        loader.close()
        results.append(by_id)
    assert sorted(results[0]) == list(range(60))
    assert results[0].keys() == results[1].keys()
    for i in results[0]:
        assert results[0][i][1] == results[1][i][1], f"label of item {i}"
        assert torch.equal(results[0][i][0], results[1][i][0]), f"pixels of item {i}"


def test_exactly_once_and_uniform_order_across_shards(daemon, workdir):
    # 12 tiny samples in 3 shards; 4 jobs x 450 epochs: each item x position
    # cell expects 150 hits, so a bias toward shard order would show.
    root = workdir / "tiny_for_shards"
    write_folder(root, classes=3, per_class=4, sizes=(8, 12), seed=6)
    shards = write_shards(workdir / "tiny_shards", folder_samples(root), 3)
    n, orders = 12, []
    for seed in range(4):
        loader = Loader([str(p) for p in shards], batch_size=n, seed=seed,
                                   transform=T.Resize([8, 8]), socket=daemon.socket)
        for _ in range(450):
            order = epoch_ids(loader)
            assert sorted(order) == list(range(n))
            orders.append(order)
        loader.close()
    p = position_table_p(orders, n)
    assert p > 0.001, f"positions not uniform: p = {p:.2e}"
    # Correlation between an item's place in the shards and in the epoch.
    pos = torch.tensor([[o.index(i) for i in range(n)] for o in orders], dtype=torch.float64)
    item = torch.arange(n, dtype=torch.float64).expand_as(pos)
    r = torch.corrcoef(torch.stack([pos.flatten(), item.flatten()]))[0, 1].item()
    assert abs(r) < 0.05, f"order correlates with shard position: r = {r:.3f}"


def test_indices_classes_and_ddp_over_shards(daemon, corpus):
    _, shards = corpus
    dataset = [str(p) for p in shards]
    subset = [3, 17, 18, 40, 59]
    loader = Loader(dataset, batch_size=2, indices=subset, transform=FIXED,
                               socket=daemon.socket)
    assert sorted(epoch_ids(loader)) == subset
    loader.close()
    # classes= names label values on shards.
    loader = Loader(dataset, batch_size=8, classes=["2"], transform=FIXED,
                               socket=daemon.socket)
    labels = [int(x) for _, lab in loader for x in lab]
    assert labels == [2] * 15
    loader.close()
    world = 3
    loaders = [Loader(dataset, batch_size=8, transform=FIXED, seed=4, rank=r,
                                 world_size=world, socket=daemon.socket) for r in range(world)]
    parts = [set(epoch_ids(l)) for l in loaders]
    assert all(len(p) == 20 for p in parts)
    assert set().union(*parts) == set(range(60))
    for l in loaders:
        l.close()


def test_glob_and_list_jobs_share_one_dataset(tmp_path, corpus):
    root, _ = corpus
    shards = write_shards(tmp_path / "s", folder_samples(root), 4)
    daemon = start_daemon(tmp_path, "--cache-bytes", "0", "--tar-index-dir", str(tmp_path / "ix"))
    try:
        a = Loader(str(tmp_path / "s" / "train-*.tar"), batch_size=60, seed=1,
                              transform=FIXED, socket=daemon.socket)
        b = Loader([str(p) for p in shards], batch_size=60, seed=2,
                              transform=FIXED, socket=daemon.socket)
        ita, itb = a.iter_with_ids(), b.iter_with_ids()
        ia, ib = next(ita)[2].tolist(), next(itb)[2].tolist()
        assert sorted(ia) == sorted(ib) == list(range(60))
        datasets = daemon.query("datasets")["datasets"]
        assert len(datasets) == 1, "one dataset for both spellings"
        assert datasets[0]["shards"]["shards"] == 4
        assert datasets[0]["shards"]["samples"] == 60
        a.close()
        b.close()
    finally:
        stop_daemon(daemon)


def test_index_reused_after_restart_and_stale_idx_detected(tmp_path, corpus):
    root, _ = corpus
    shards = write_shards(tmp_path / "s", folder_samples(root), 4)
    # A DALI wds2idx file that agrees with shard 0, and a stale one for shard 1.
    with tarfile.open(shards[0]) as tar:
        members = tar.getmembers()
    lines = []
    for jpg, cls in zip(members[0::2], members[1::2]):
        lines.append(f"jpg {jpg.offset_data} {jpg.size} {jpg.name} "
                     f"cls {cls.offset_data} {cls.size} {cls.name}")
    shards[0].with_suffix(".idx").write_text(f"v1.2 {len(lines)}\n" + "\n".join(lines) + "\n")
    shards[1].with_suffix(".idx").write_text("v1.2 1\njpg 1536 999 s00015.jpg\n")
    index_dir = tmp_path / "index"
    spec = dict(batch_size=10, transform=FIXED)
    counts = []
    for _ in range(2):
        daemon = start_daemon(tmp_path, "--tar-index-dir", str(index_dir))
        try:
            loader = Loader([str(p) for p in shards], socket=daemon.socket, **spec)
            assert sorted(epoch_ids(loader)) == list(range(60))
            loader.close()
            counts.append(daemon.query("datasets")["datasets"][0]["shards"])
        finally:
            stop_daemon(daemon)
    first, second = counts
    assert first["daemon_shards_scanned"] == 3 and first["daemon_index_cache_hits"] == 0
    assert first["daemon_idx_hints_used"] == 1 and first["from_idx"] == 1
    assert first["stale_idx"] == 1, "the .idx that disagrees is counted; the good one is not"
    assert second["daemon_shards_scanned"] == 0, "the restarted daemon rescanned"
    assert second["daemon_index_cache_hits"] == 4
    assert (index_dir.stat().st_mode & 0o777) == 0o700
    assert all((f.stat().st_mode & 0o777) == 0o600 for f in index_dir.iterdir())


def write_idx(shard, version="v1.2", shift=0):
    """A DALI wds2idx index beside `shard`, as its format describes: one line
    per sample (adjacent members sharing a key), "ext offset size name"
    groups (no name in v1.1), the offset being the member's first payload
    byte. `shift` moves every offset, as the pre-2022 wds2idx formula did on
    archives with a PAX header before each member."""
    lines, last = [], None
    with tarfile.open(shard) as tar:
        for m in tar.getmembers():
            if not m.isreg():
                continue
            key, ext = m.name.split(".", 1)
            group = f"{ext} {m.offset_data + shift} {m.size}"
            group += f" {m.name}" if version == "v1.2" else ""
            if key == last:
                lines[-1] += " " + group
            else:
                lines.append(group)
            last = key
    path = shard.with_suffix(".idx")
    path.write_text(f"{version} {len(lines)}\n" + "\n".join(lines) + "\n")
    return path


def write_pax_shard(path, samples, first):
    """Samples first.. with a PAX header before every member (a float mtime),
    as webdataset's ShardWriter writes them."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for i, (data, label) in enumerate(samples, start=first):
            for ext, payload in (("jpg", data), ("cls", str(label).encode())):
                info = tarfile.TarInfo(f"s{i:05d}.{ext}")
                info.size, info.mtime = len(payload), 1700000000.25
                tar.addfile(info, io.BytesIO(payload))


def served_by_id(daemon, shards):
    """{item id: (label, image)} over one epoch, and the dataset's counters."""
    loader = Loader([str(p) for p in shards], batch_size=16, transform=FIXED,
                    socket=daemon.socket)
    by_id = {}
    for images, labels, ids in loader.iter_with_ids():
        for image, label, i in zip(images, labels, ids.tolist()):
            by_id[i] = (int(label), image.clone())
    loader.close()
    entry, = daemon.query("datasets")["datasets"]
    return by_id, entry["shards"]


def test_good_idx_saves_the_scan_and_a_stale_one_is_rescanned(tmp_path, corpus):
    # Index cache off, so each daemon lists every shard: from its .idx when
    # that describes the shard, else header by header.
    root, _ = corpus
    samples = folder_samples(root)
    d = tmp_path / "s"
    d.mkdir()
    shards = write_shards(d, samples[:30], 2)  # GNU headers, no PAX
    for s, first in ((2, 30), (3, 45)):
        shards.append(d / f"train-{s:06d}.tar")
        write_pax_shard(shards[-1], samples[first:first + 15], first)
    for shard in shards[:3]:
        write_idx(shard)
    write_idx(shards[3], version="v1.1")

    def run():
        daemon = start_daemon(tmp_path, "--tar-index-dir", "none")
        try:
            return served_by_id(daemon, shards)
        finally:
            stop_daemon(daemon)

    hinted, counts = run()
    assert counts["daemon_shards_scanned"] == 0, "a shard with a good .idx was scanned"
    assert counts["daemon_idx_hints_used"] == 4 and counts["from_idx"] == 4
    assert counts["stale_idx"] == 0
    for shard in shards:
        shard.with_suffix(".idx").unlink()
    scanned, counts = run()
    assert counts["daemon_shards_scanned"] == 4 and counts["daemon_idx_hints_used"] == 0
    assert sorted(hinted) == sorted(scanned) == list(range(60))
    for i in scanned:
        assert hinted[i][0] == scanned[i][0] == samples[i][1], f"label of item {i}"
        assert torch.equal(hinted[i][1], scanned[i][1]), f"pixels of item {i}"

    # Stale: shard 1 rewritten (other samples, other sizes) after its .idx was
    # made; shard 2's .idx has offsets one PAX header too far.
    for shard in shards[:2]:
        write_idx(shard)
    write_idx(shards[2], shift=1024)
    write_idx(shards[3], version="v1.1")
    (d / "new").mkdir()
    new = write_shards(d / "new", samples[40:45] + samples[15:25], 1)[0]
    os.replace(new, shards[1])
    served, counts = run()
    assert counts["stale_idx"] == 2 and counts["daemon_stale_idx"] == 2
    assert counts["daemon_shards_scanned"] == 2 and counts["daemon_idx_hints_used"] == 2
    truth = samples[:15] + samples[40:45] + samples[15:25] + samples[30:60]
    assert sorted(served) == list(range(60))
    assert [served[i][0] for i in range(60)] == [label for _, label in truth]


def test_gnu_tar_with_and_without_sort_and_long_names(daemon, workdir, corpus):
    root, _ = corpus
    samples = folder_samples(root)[:20]
    stage = workdir / "gnu_stage"
    long_dir = stage / ("d" * 120)  # past ustar's 100-byte name: @LongLink
    long_dir.mkdir(parents=True)
    for i, (data, label) in enumerate(samples):
        (long_dir / f"k{i:03d}.jpg").write_bytes(data)
        (long_dir / f"k{i:03d}.cls").write_text(str(label))
    outputs = []
    for sort in ([], ["--sort=name"]):
        out = workdir / f"gnu{len(sort)}.tar"
        subprocess.run(["tar", "--format=gnu", *sort, "-cf", str(out), "-C", str(stage), "."],
                       check=True)
        loader = Loader(str(out), batch_size=20, transform=FIXED,
                                   socket=daemon.socket)
        _, labels, ids = next(loader.iter_with_ids())
        loader.close()
        assert sorted(ids.tolist()) == list(range(20))
        outputs.append(sorted(int(x) for x in labels))
    assert outputs[0] == outputs[1] == sorted(label for _, label in samples)


def test_webdataset_shardwriter_output_is_served(daemon, workdir, corpus):
    wds = pytest.importorskip("webdataset", reason="installed by scripts/setup_venv.sh")
    root, _ = corpus
    samples = folder_samples(root)
    out = workdir / "wds"
    out.mkdir()
    with wds.ShardWriter(str(out / "w-%06d.tar"), maxcount=25) as sink:
        for i, (data, label) in enumerate(samples):
            sink.write({"__key__": f"s{i:05d}", "jpg": data, "cls": label,
                        "json": {"label": label, "i": i}})
    found = sorted(out.glob("w-*.tar"))
    assert len(found) == 3
    for shard in found:  # DALI .idx files beside ShardWriter's PAX output
        write_idx(shard)
    for label_key in ("cls", "json:label"):
        loader = Loader(str(out / "w-{000000..000002}.tar"), batch_size=60,
                                   label_key=label_key, transform=FIXED, socket=daemon.socket)
        _, labels, ids = next(loader.iter_with_ids())
        loader.close()
        truth = [samples[i][1] for i in ids.tolist()]
        assert labels.tolist() == truth
    listed = [d["shards"] for d in daemon.query("datasets")["datasets"]
              if d["root"] == str(found[0].resolve())]
    assert len(listed) == 2 and all(s["stale_idx"] == 0 for s in listed)
    assert sum(s["from_idx"] for s in listed) == 3, "listed once with the .idx, then cached"


def test_unlabelled_and_image_key(daemon, workdir, corpus):
    root, _ = corpus
    samples = folder_samples(root)[:6]
    path = workdir / "pngkey.tar"
    with tarfile.open(path, "w") as tar:
        for i, (data, _) in enumerate(samples):
            add_member(tar, f"x{i}.jpg", b"not this one")
            add_member(tar, f"x{i}.photo", data)
    loader = Loader(str(path), batch_size=6, image_key="photo", label_key=None,
                               transform=FIXED, socket=daemon.socket)
    images, labels = next(iter(loader))
    assert images.shape[0] == 6 and labels.tolist() == [-1] * 6
    loader.close()


def test_refusals(daemon, workdir, corpus):
    _, shards = corpus
    # (s3:// shards are datasets: tests/python/test_s3_datasets.py.)
    for url in ("http://x/y.tar", "pipe:curl x"):
        with pytest.raises(ValueError, match="URL"):
            Loader(url, transform=FIXED, socket=daemon.socket)
    with pytest.raises(ValueError, match="decompress"):
        Loader(str(workdir / "train.tar.gz"), transform=FIXED, socket=daemon.socket)
    # A gzip file named .tar is refused by the daemon from its magic bytes.
    fake = workdir / "gz_named.tar"
    subprocess.run(f"gzip -c {shards[0]} > {fake}", shell=True, check=True)
    loader = Loader(str(fake), transform=FIXED, socket=daemon.socket)
    with pytest.raises(galley.InvalidRequest, match="decompress"):
        len(loader)
    with pytest.raises(ValueError, match="tar shard"):
        Loader(str(workdir), image_key="png", transform=FIXED, socket=daemon.socket)


def damaged_shard(path, samples):
    """Every kind of bad input in one shard, with 4 good samples."""
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(4):
            add_member(tar, f"good{i}.jpg", samples[i][0])
            add_member(tar, f"good{i}.cls", b"1")
        add_member(tar, "nolabel.jpg", samples[5][0])        # no .cls: skipped
        add_member(tar, "noimage.cls", b"2")                  # no image: skipped
        add_member(tar, "badlabel.jpg", samples[6][0])
        add_member(tar, "badlabel.cls", b"one")               # not an integer
        add_member(tar, "../escape.jpg", samples[7][0])       # unsafe names
        add_member(tar, "/abs/olute.jpg", samples[7][0])
        add_member(tar, ".hidden.jpg", samples[7][0])          # dotfile
        add_member(tar, "good0.jpg", b"duplicate")            # duplicate key.ext: left out
        for kind, name in ((tarfile.SYMTYPE, "link.jpg"), (tarfile.LNKTYPE, "hard.jpg"),
                           (tarfile.CHRTYPE, "dev.jpg"), (tarfile.DIRTYPE, "dir")):
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = "/etc/passwd"
            tar.addfile(info)
        add_member(tar, "late.jpg", samples[8][0])
        add_member(tar, "late.cls", b"0")


def test_bad_input_is_counted_and_never_crashes_the_daemon(daemon, workdir, corpus):
    root, _ = corpus
    samples = folder_samples(root)
    d = workdir / "bad"
    d.mkdir()
    good = d / "a.tar"
    damaged_shard(good, samples)
    data = good.read_bytes()
    # Truncated inside the 'late' sample's image; a header with a bad checksum.
    truncated = d / "b.tar"
    cut = data.index(b"late.jpg") + 700
    truncated.write_bytes(data[:cut])
    bad_sum = bytearray(data)
    at = data.index(b"late.jpg")
    bad_sum[at + 148: at + 156] = b"0000000\0"
    (d / "c.tar").write_bytes(bytes(bad_sum))
    # A header whose size runs far past the end of the file.
    past = bytearray(data)
    past[at + 124: at + 136] = b"77777777777\0"
    past[at + 148: at + 156] = b"        "
    past[at + 148: at + 155] = (f"{sum(past[at:at + 512]):06o}\0").encode()
    (d / "d.tar").write_bytes(bytes(past))
    (d / "empty.tar").write_bytes(b"")
    (d / "garbage.tar").write_bytes(os.urandom(3000))

    loader = Loader(str(good), batch_size=10, transform=FIXED, socket=daemon.socket)
    assert sorted(epoch_ids(loader)) == list(range(4))  # good1..3 and late
    loader.close()
    stats = {s["root"]: s["shards"] for s in daemon.query("datasets")["datasets"]
             if s["shards"]}[str(good)]
    assert stats["skipped_samples"] == 4  # good0 (a member twice), nolabel, noimage, badlabel
    # ../, /abs, dotfile, symlink, hard link, device, directory
    assert stats["skipped_members"] == 7
    for name in ("b.tar", "c.tar", "d.tar"):
        loader = Loader(str(d / name), batch_size=10, transform=FIXED,
                                   socket=daemon.socket)
        assert sorted(epoch_ids(loader)) == list(range(3)), name  # up to the damage
        loader.close()
        strict = Loader(str(d / name), batch_size=10, on_error="raise",
                                   transform=FIXED, socket=daemon.socket)
        with pytest.raises(galley.InvalidRequest, match=name):
            len(strict)
    strict = Loader(str(good), batch_size=10, on_error="raise", transform=FIXED,
                               socket=daemon.socket)
    with pytest.raises(galley.InvalidRequest,
                       match=r"1 have no \.cls member.*a\.tar: good0 \(two members named "
                             r"good0\.jpg\)"):
        len(strict)
    for name in ("empty.tar", "garbage.tar"):
        with pytest.raises(galley.InvalidRequest):
            len(Loader(str(d / name), transform=FIXED, socket=daemon.socket))
    assert daemon.proc.poll() is None, "galleyd died"


@pytest.mark.parametrize("change", ["truncate", "rewrite", "delete"])
def test_a_shard_that_changes_mid_epoch_raises_in_the_job(tmp_path, corpus, change):
    """A shard truncated, rewritten (replaced by rename, as a copy tool does)
    or deleted under a running loop is a dataset that changed, not a bad
    sample: the loop raises with the count and the shard instead of
    delivering a short epoch, and the next loop lists the shards afresh."""
    root, _ = corpus
    samples = folder_samples(root)
    shards = write_shards(tmp_path / "s", samples, 4)  # 15 samples each, ids in order
    daemon = start_daemon(tmp_path, "--cache-bytes", "0", "--tar-index-dir", "none")
    try:
        dataset = [str(p) for p in shards]
        # In id order, one batch prepared ahead: shard 3 (ids 45..59) is read
        # only from batch 10 of 12 on.
        loader = galley.DataLoader(dataset, batch_size=5, prefetch=1, transform=FIXED,
                                   socket=daemon.socket)
        it = loader.iter_with_ids()
        delivered = next(it)[2].tolist()
        assert delivered == [0, 1, 2, 3, 4]
        changed = shards[3]
        if change == "truncate":
            os.truncate(changed, changed.stat().st_size // 2)
        elif change == "rewrite":
            new = write_shards(tmp_path / "n", samples[:10], 1)[0]
            os.replace(new, changed)
        else:
            changed.unlink()
        message = (r"dataset changed under the job: 5 samples of epoch 0, batch 10 of 12 "
                   r"unreadable; iterate again to re-list it\. First: "
                   + re.escape(str(changed)))
        with pytest.raises(galley.SampleError, match=message):
            for batch in it:
                delivered.extend(batch[2].tolist())
                del batch  # its slot goes back to the daemon
        assert delivered == list(range(45)), "every batch before the change, whole, then none"
        assert loader.skipped == 0, "not counted as skipped samples"
        if change == "delete":
            with pytest.raises(galley.DatasetNotFound, match=re.escape(changed.name)):
                epoch_ids(loader)
        else:
            again = sorted(epoch_ids(loader))
            if change == "rewrite":
                assert again == list(range(55)), "re-indexed: 45 + 10 samples"
            else:  # the truncated shard serves what precedes the damage
                assert again == list(range(len(again))) and 45 < len(again) < 60
        loader.close()
        assert daemon.proc.poll() is None
    finally:
        stop_daemon(daemon)


def test_1100_shards_under_a_1024_descriptor_limit(tmp_path, corpus):
    root, _ = corpus
    samples = folder_samples(root)
    d = tmp_path / "many"
    d.mkdir()
    for s in range(1100):
        with tarfile.open(d / f"m-{s:06d}.tar", "w") as tar:
            add_member(tar, f"k{s}.jpg", samples[s % 60][0])
            add_member(tar, f"k{s}.cls", str(s % 7).encode())
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    try:
        daemon = start_daemon(tmp_path, "--cache-bytes", "0", "--tar-index-dir",
                              str(tmp_path / "ix"))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        limit = open(f"/proc/{daemon.proc.pid}/limits").read()
        assert any(l.startswith("Max open files") and " 1024 " in l for l in limit.splitlines())
        loader = Loader(str(d / "m-{000000..001099}.tar"), batch_size=100,
                                   transform=T.Resize([16, 16]), socket=daemon.socket)
        assert sorted(epoch_ids(loader)) == list(range(1100))
        assert loader.skipped == 0
        loader.close()
        open_fds = len(os.listdir(f"/proc/{daemon.proc.pid}/fd"))
        assert open_fds < 400, f"{open_fds} descriptors open"
    finally:
        stop_daemon(daemon)


def test_progress_while_a_large_set_is_indexed(tmp_path):
    # 100 copies of a shard of 4,000 empty members (400,000 headers, cache
    # off): indexing lasts long enough for the waiting side to print the
    # daemon's progress. GALLEY_PROGRESS=1 stands in for a terminal.
    from galley.shards import IndexingProgress, format_progress
    assert format_progress({"first_shard": "/x/p-000000.tar", "shards": 1024, "done": 512,
                            "rate": 85.3, "seconds_left": 6.0}) == \
        "galley: indexing p-000000.tar…: 512/1024 shards [50%, 85.3 shards/s, 00:06 left]"
    one = io.BytesIO()
    with tarfile.open(fileobj=one, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for k in range(4000):
            add_member(tar, f"k{k:05d}.jpg", b"")
    d = tmp_path / "p"
    d.mkdir()
    shards = [str(d / f"p-{s:06d}.tar") for s in range(100)]
    for path in shards:
        with open(path, "wb") as f:
            f.write(one.getvalue())
    daemon = start_daemon(tmp_path, "--cache-bytes", "0", "--tar-index-dir", "none")
    try:
        os.environ["GALLEY_PROGRESS"] = "1"
        watcher = galley._galley.Client(daemon.socket, 10.0)
        stream = io.StringIO()
        with IndexingProgress(lambda: watcher, shards, stream=stream, delay=0, interval=0.01):
            loader = Loader(shards, batch_size=8, label_key=None, transform=FIXED,
                                       socket=daemon.socket)
            assert len(loader) == 100 * 4000 // 8
        lines = [l for l in stream.getvalue().split("\r") if l.strip()]
        assert lines, "no progress printed"
        assert "/100 shards" in lines[-1] and "shards/s" in lines[-1], lines[-1]
        assert daemon.query("datasets")["indexing"] == []
        loader.close()
    finally:
        os.environ.pop("GALLEY_PROGRESS", None)
        stop_daemon(daemon)


def test_index_cache_keeps_under_its_size_cap(tmp_path, corpus):
    root, _ = corpus
    shards = write_shards(tmp_path / "s", folder_samples(root), 6)
    index_dir = tmp_path / "index"
    daemon = start_daemon(tmp_path, "--tar-index-dir", str(index_dir),
                          "--tar-index-max-bytes", "2500")
    try:
        loader = Loader([str(p) for p in shards], batch_size=60, transform=FIXED,
                                   socket=daemon.socket)
        assert len(loader) == 1
        loader.close()
    finally:
        stop_daemon(daemon)
    sizes = [f.stat().st_size for f in index_dir.iterdir()]
    assert 0 < len(sizes) < 6, "the cap removed some, kept the newest"
    assert sum(sizes) <= 2500


def test_grouping_follows_webdataset_key_rules(daemon, workdir, corpus):
    root, _ = corpus
    samples = folder_samples(root)
    path = workdir / "keys.tar"
    with tarfile.open(path, "w") as tar:
        # Members of one sample far apart, mixed-case extensions, keys with
        # dots in directories and multi-dot extensions.
        add_member(tar, "v1.0/a.JPG", samples[0][0])
        add_member(tar, "v1.0/b.seg.png", b"ignored: not an image key")
        add_member(tar, "v1.0/b.jpeg", samples[1][0])
        add_member(tar, "v1.0/a.CLS", b"3")
        add_member(tar, "v1.0/b.cls", b" 4\n")
    loader = Loader(str(path), batch_size=2, transform=FIXED, socket=daemon.socket)
    _, labels, ids = next(loader.iter_with_ids())
    assert dict(zip(ids.tolist(), labels.tolist())) == {0: 3, 1: 4}
    loader.close()


def test_resume_mid_epoch_over_shards(daemon, corpus):
    _, shards = corpus
    pattern = str(shards[0].parent / "train-*.tar")

    def make():
        return Loader(pattern, batch_size=7, seed=9, transform=FIXED,
                                 socket=daemon.socket)

    loader = make()
    it = loader.iter_with_ids()
    first = []
    for _ in range(3):
        first.extend(next(it)[2].tolist())
    state = loader.state_dict()
    del it
    loader.close()
    resumed = make()
    resumed.load_state_dict(state)
    rest = []
    for _images, _labels, ids in resumed.iter_with_ids():
        rest.extend(ids.tolist())
    resumed.close()
    assert len(first) == 21
    assert sorted(first + rest) == list(range(60)), "the epoch resumed exactly once"


def test_the_dataset_of_shards_and_a_resume_from_a_copied_set(daemon, workdir, corpus):
    """loader.dataset over shards names each item shard:key, with its label
    and no class names; a state resumes over a copy of the shards made with
    cp -r (new modification times) elsewhere, with a warning, exactly once."""
    root, shards = corpus
    pattern = str(shards[0].parent / "train-*.tar")

    def make(dataset):
        return Loader(dataset, batch_size=7, seed=4, transform=FIXED, socket=daemon.socket)

    loader = make(pattern)
    dataset = loader.dataset
    assert len(dataset) == 60 and dataset.classes == [] and dataset.class_to_idx == {}
    assert dataset.shards == [str(p) for p in shards]
    assert dataset.samples == [(f"{os.path.realpath(shards[i // 15])}:s{i:05d}.jpg", label)
                               for i, (_data, label) in enumerate(folder_samples(root))]
    it = loader.iter_with_ids()
    first = [i for _ in range(3) for i in next(it)[2].tolist()]
    state = loader.state_dict()
    del it
    loader.close()
    copy = workdir / "shards4_copied"
    subprocess.run(["cp", "-r", str(shards[0].parent), str(copy)], check=True)
    resumed = make(str(copy / "train-*.tar"))
    with pytest.warns(UserWarning, match="modification times differ"):
        resumed.load_state_dict(state)
    rest = [i for _x, _y, ids in resumed.iter_with_ids() for i in ids.tolist()]
    resumed.close()
    assert sorted(first + rest) == list(range(60))
