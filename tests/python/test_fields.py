"""Every member of a sample reaches the job (fields=), against a real galleyd:
shards written by webdataset's ShardWriter, checked against webdataset's
own loader; manifests with a header row; members that do not parse; size
limits."""

import io
import json
import tarfile

import pytest
import torch

import galley
from galley import transforms as T

from conftest import job_context, job_process, start_daemon, stop_daemon, write_folder

FIXED = T.Compose([T.Resize(40), T.CenterCrop(32)])


def jpegs(root):
    return [p.read_bytes() for p in sorted(root.rglob("*.jpg"))]


def caption(i):
    # Non-ASCII on purpose: a caption is text, decoded as UTF-8.
    return f"sample {i}: a photo of thing {i % 7} – ünïcode"


def meta(i):
    return {"caption": caption(i), "i": i, "tags": [i % 3, i % 5], "score": i / 10}


@pytest.fixture(scope="module")
def clip_shards(workdir):
    """48 samples of jpg + txt + json in 3 shards, as webdataset's ShardWriter
    writes them."""
    wds = pytest.importorskip("webdataset", reason="installed by scripts/setup_venv.sh")
    root = workdir / "clip_folder"
    write_folder(root, classes=1, per_class=48, sizes=(40, 60), seed=5)
    out = workdir / "clip"
    out.mkdir()
    with wds.ShardWriter(str(out / "c-%06d.tar"), maxcount=16) as sink:
        for i, data in enumerate(jpegs(root)):
            sink.write({"__key__": f"k{i:04d}", "jpg": data, "txt": caption(i), "json": meta(i)})
    shards = sorted(str(p) for p in out.glob("c-*.tar"))
    assert len(shards) == 3
    return shards


def webdataset_samples(shards):
    """What webdataset's own loader returns per key: (caption, dict, shard)."""
    wds = pytest.importorskip("webdataset")
    dataset = wds.WebDataset(shards, shardshuffle=False).decode()
    return {s["__key__"]: (s["txt"], s["json"], s["__url__"]) for s in dataset}


def test_captions_and_dicts_match_webdatasets_loader(daemon, clip_shards):
    truth = webdataset_samples(clip_shards)
    loader = galley.DataLoader(clip_shards, batch_size=10, shuffle=True, transform=FIXED,
                               fields=("__key__", "jpg", "txt", "json", "__url__"),
                               socket=daemon.socket)
    seen = []
    for keys, images, captions, dicts, urls in loader:
        assert isinstance(keys, list) and isinstance(captions, list) and isinstance(dicts, list)
        assert images.shape[1:] == (3, 32, 32) and images.shape[0] == len(captions)
        for key, text, record, url in zip(keys, captions, dicts, urls):
            want_text, want_record, want_url = truth[key]
            assert text == want_text and record == want_record
            assert url.endswith(want_url.rsplit("/", 1)[-1])
            seen.append(key)
    loader.close()
    assert sorted(seen) == sorted(truth), "every sample exactly once per epoch"


def test_without_fields_batches_stay_images_and_labels(daemon, clip_shards):
    loader = galley.DataLoader(clip_shards, batch_size=48, label_key=None, transform=FIXED,
                               socket=daemon.socket)
    batch = next(iter(loader))
    loader.close()
    assert len(batch) == 2 and batch[1].dtype == torch.int64 and batch[1].tolist() == [-1] * 48


def test_raw_fields_and_collation(daemon, clip_shards):
    loader = galley.DataLoader(clip_shards, batch_size=8, transform=FIXED,
                               fields=("jpg", "txt", "__key__"), decode_fields=False,
                               socket=daemon.socket)
    images, raw, keys = next(iter(loader))
    loader.close()
    assert all(isinstance(v, bytes) for v in raw + keys)
    assert [v.decode() for v in raw] == [caption(int(k.decode()[1:])) for k in keys]


def test_collate_fn_receives_each_sample_as_torch_would(daemon, clip_shards):
    truth = webdataset_samples(clip_shards)
    received = []

    def collate(samples):
        received.append(samples)
        return torch.utils.data.default_collate([image for image, _, _ in samples]), \
            [(key, text) for _, text, key in samples]

    loader = galley.DataLoader(clip_shards, batch_size=6, transform=FIXED,
                               fields=("jpg", "txt", "__key__"), collate_fn=collate,
                               socket=daemon.socket)
    images, pairs = next(iter(loader))
    loader.close()
    samples, = received
    assert isinstance(samples, list) and len(samples) == 6
    assert all(isinstance(sample, tuple) and len(sample) == 3 for sample in samples)
    assert samples[0][0].shape == (3, 32, 32) and images.shape == (6, 3, 32, 32)
    assert all(text == truth[key][0] for key, text in pairs)


@pytest.mark.parametrize("workers", [0, 2])
def test_fields_beside_a_transform_that_goes_on_in_the_job(daemon, clip_shards, workers):
    truth = webdataset_samples(clip_shards)
    # galleyd crops; the job's own function runs after it, on each sample.
    transform = T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor(),
                           lambda image: image.flip(-1) * 2])
    plain = galley.DataLoader(clip_shards, batch_size=8, transform=FIXED,
                              fields=("__key__", "jpg"), socket=daemon.socket)
    reference = {key: image.clone() for keys, images in plain for key, image in zip(keys, images)}
    plain.close()
    loader = galley.DataLoader(clip_shards, batch_size=8, transform=transform,
                               fields=("__key__", "jpg", "txt", "json"), num_workers=workers,
                               socket=daemon.socket)
    assert "lambda" in loader.transform_split
    seen = []
    for keys, images, captions, dicts in loader:
        assert images.dtype == torch.float32 and images.shape[1:] == (3, 32, 32)
        for key, image, text, record in zip(keys, images, captions, dicts):
            assert (text, record) == truth[key][:2]
            want = reference[key].float().div(255).flip(-1) * 2
            assert torch.allclose(image, want), key
            seen.append(key)
    loader.close()
    assert sorted(seen) == sorted(truth), "every sample exactly once per epoch"


def test_refusals_say_which_wins(daemon, clip_shards, folder):
    with pytest.raises(ValueError, match="label_key=.*does not apply with fields="):
        galley.DataLoader(clip_shards, fields=("jpg", "txt"), label_key="json:i",
                          socket=daemon.socket)
    with pytest.raises(ValueError, match="image_key= names it; with fields= the two must agree"):
        galley.DataLoader(clip_shards, fields=("jpg", "txt"), image_key="png",
                          socket=daemon.socket)
    with pytest.raises(ValueError, match="does not name the image"):
        galley.DataLoader(clip_shards, fields=("txt", "json"), socket=daemon.socket)
    with pytest.raises(ValueError, match="needs tar shards or a manifest with a header row"):
        galley.DataLoader(str(folder), fields=("jpg", "txt"), socket=daemon.socket)
    # image_key= naming the same member as fields= is consistent, and works.
    loader = galley.DataLoader(clip_shards, batch_size=4, fields=("jpg", "txt"),
                               image_key="jpg", transform=FIXED, socket=daemon.socket)
    images, captions = next(iter(loader))
    loader.close()
    assert len(captions) == 4


def run_clip_job(socket, shards, seed, epochs, barrier, out):
    loader = galley.DataLoader(shards, batch_size=8, seed=seed, shuffle=True, socket=socket,
                               transform=T.Compose([T.RandomResizedCrop(32)]),
                               fields=("jpg", "txt", "json", "__key__"))
    len(loader)  # opens the job
    barrier.wait()
    result = []
    for _ in range(epochs):
        epoch = []
        for _images, captions, dicts, keys in loader:
            epoch.extend((key, text, record) for key, text, record in zip(keys, captions, dicts))
        result.append(epoch)
    out.put((seed, result))
    loader.close()


def test_two_jobs_share_the_fields_with_the_images(tmp_path, clip_shards):
    # A daemon of its own, so its counters only see these two jobs; the
    # shards lie under its allowed root through symlinks it resolves.
    data = tmp_path / "shards"
    data.mkdir()
    local = []
    for shard in clip_shards:
        target = data / shard.rsplit("/", 1)[-1]
        target.write_bytes(open(shard, "rb").read())
        local.append(str(target))
    truth = webdataset_samples(local)
    daemon = start_daemon(tmp_path, "--cache-bytes", "0")
    try:
        ctx = job_context()
        barrier, out = ctx.Barrier(2), ctx.Queue()
        procs = [job_process(run_clip_job, (daemon.socket, local, seed, 2, barrier, out))
                 for seed in (0, 1)]
        for p in procs:
            p.start()
        results = dict(out.get(timeout=300) for _ in procs)
        assert [p.join(timeout=60) or p.exitcode for p in procs] == [0, 0]
        for seed, epochs_seen in results.items():
            for epoch in epochs_seen:
                assert sorted(k for k, _, _ in epoch) == sorted(truth), f"job {seed}"
                for key, text, record in epoch:
                    assert (text, record) == truth[key][:2]
        status = daemon.query("status")
        group, = status["samplers"]
        ratio = group["loads"] / group["requests"]
        # Two jobs started together share each item's read and decode (ideal
        # 0.5), the fields coming with the image's read: no read of its own.
        assert ratio < 0.7, f"loads per request {ratio:.3f} (ideal 0.5)"
        assert status["pipeline"]["field_reads"] == 0
    finally:
        stop_daemon(daemon)


def add_member(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def broken_shard(workdir):
    """8 samples; k0003's .json and k0005's .cls do not parse."""
    root = workdir / "broken_folder"
    write_folder(root, classes=1, per_class=8, sizes=(40, 50), seed=6)
    path = workdir / "broken.tar"
    with tarfile.open(path, "w") as tar:
        for i, data in enumerate(jpegs(root)):
            add_member(tar, f"k{i:04d}.jpg", data)
            add_member(tar, f"k{i:04d}.json", b"{not json" if i == 3 else json.dumps({"i": i}).encode())
            add_member(tar, f"k{i:04d}.cls", b"five" if i == 5 else str(i).encode())
            add_member(tar, f"k{i:04d}.txt", b"x" * (100 if i == 6 else 10))
    return str(path)


def test_a_member_that_does_not_parse_names_shard_and_key(daemon, broken_shard):
    loader = galley.DataLoader(broken_shard, batch_size=8, transform=FIXED, on_error="raise",
                               fields=("jpg", "json", "cls"), socket=daemon.socket)
    with pytest.raises(galley.SampleError) as raised:
        list(loader)
    loader.close()
    message = str(raised.value)
    assert "broken.tar" in message and ("member k0003.json is not valid JSON" in message
                                        or "member k0005.cls is not an integer" in message)
    # Under on_error="skip" the others are served, each once, the two bad
    # ones replaced by substitutes.
    loader = galley.DataLoader(broken_shard, batch_size=8, transform=FIXED,
                               fields=("jpg", "json", "cls"), socket=daemon.socket)
    _images, dicts, labels = next(iter(loader))
    assert loader.skipped == 2
    loader.close()
    assert {d["i"] for d in dicts} <= {0, 1, 2, 4, 6, 7} and len(dicts) == 8
    assert all(isinstance(v, int) for v in labels.tolist()) and labels.dtype == torch.int64


def test_an_oversized_member_is_refused_by_name(daemon, broken_shard):
    loader = galley.DataLoader(broken_shard, batch_size=8, transform=FIXED, on_error="raise",
                               fields=("jpg", "txt"), max_member_bytes=64, socket=daemon.socket)
    with pytest.raises(galley.SampleError, match=r"k0006.*field 'txt' is 100 bytes, more than "
                                                 r"max_member_bytes=64"):
        list(loader)
    loader.close()


def test_a_batch_over_field_batch_bytes_ends_the_job_saying_so(daemon, broken_shard):
    # 8 records of 8 + 10 bytes (one 8 + 100) do not fit 100 bytes.
    loader = galley.DataLoader(broken_shard, batch_size=8, transform=FIXED,
                               fields=("jpg", "txt"), field_batch_bytes=100, socket=daemon.socket)
    with pytest.raises(galley.SampleError, match="more than field_batch_bytes=100"):
        list(loader)
    loader.close()


def galleyd_memory(daemon):
    """galleyd's resident bytes now and at their peak so far (VmRSS, VmHWM)."""
    status = {}
    with open(f"/proc/{daemon.proc.pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            status[key] = value
    return tuple(int(status[key].split()[0]) * 1024 for key in ("VmRSS", "VmHWM"))


@pytest.mark.parametrize("member", ["txt", "json", "jpg"])
def test_a_large_member_is_in_galleyds_memory_once(workdir, member):
    """A 64 MiB member raises galleyd's peak memory by about its size beside
    the job's ring: a caption, a JSON document (one long string, checked in
    place), or the image itself (a JPEG followed by 64 MiB of other bytes,
    read with a small caption)."""
    size = 64 << 20
    root = workdir / f"large_{member}"
    write_folder(root, classes=1, per_class=1, sizes=(40, 50), seed=9)
    image, = jpegs(root)
    if member == "txt":
        members = {"jpg": image, "txt": b"x" * size}
    elif member == "json":
        members = {"jpg": image, "json": b'{"caption": "' + b"x" * (size - 16) + b'"}'}
    else:
        members = {"jpg": image + b"\0" * (size - len(image)), "txt": b"caption"}
    field = "json" if member == "json" else "txt"
    path = root / "large.tar"
    with tarfile.open(path, "w") as tar:
        for extension, data in members.items():
            add_member(tar, f"k0.{extension}", data)
    daemon = start_daemon(root)
    try:
        before, _ = galleyd_memory(daemon)
        loader = galley.DataLoader(str(path), batch_size=1, prefetch=1, transform=FIXED,
                                   fields=("jpg", field), decode_fields=False,
                                   max_member_bytes=size + (1 << 20), socket=daemon.socket)
        images, values = next(iter(loader))
        ring = loader.info["segment_bytes"]
        loader.close()
        _, peak = galleyd_memory(daemon)
    finally:
        stop_daemon(daemon)
    assert images.shape == (1, 3, 32, 32) and values == [members[field]]
    # The ring (its slots' field areas hold a member each) is committed
    # whole when the job opens; beyond it, the member is in memory once:
    # read into the buffer that keeps it, copied only into the slot. Two
    # copies (a joint read copied out, a record grown from a member's own
    # buffer, a JSON string gathered to be checked, a second read by the
    # cache planner) would be 2x.
    growth = peak - before - ring
    assert growth < 1.5 * size, (
        f"galleyd's peak grew by {growth / size:.2f}x the member beside its {ring >> 20} MiB ring")


@pytest.fixture(scope="module")
def manifest_rows(workdir):
    """12 images and, per row: the path, a multi-label list, a caption with
    a comma and quotes, a float."""
    root = workdir / "table_images"
    paths = write_folder(root, classes=1, per_class=12, sizes=(40, 50), seed=7)
    return [(str(p.relative_to(workdir)), [i % 4, (i * 7) % 10][: 1 + i % 2],
             f'photo {i}, "quoted"', i * 0.25) for i, p in enumerate(paths)]


def test_csv_manifest_with_a_multi_label_column(daemon, workdir, manifest_rows):
    path = workdir / "table.csv"
    with open(path, "w", newline="") as f:
        writer = __import__("csv").writer(f)
        writer.writerow(["image", "labels", "caption", "score"])
        for image, labels, text, score in manifest_rows:
            writer.writerow([image, json.dumps(labels), text, score])
    loader = galley.DataLoader(str(path), batch_size=5, shuffle=True, transform=FIXED,
                               fields=("image", "labels", "caption", "score"),
                               socket=daemon.socket)
    seen = []
    for images, labels, captions, scores, ids in loader.iter_with_ids():
        assert images.shape[1:] == (3, 32, 32)
        assert scores.dtype == torch.float64
        for item, multi, text, score in zip(ids.tolist(), labels, captions, scores.tolist()):
            _, want_labels, want_text, want_score = manifest_rows[item]
            assert (multi, text, score) == (want_labels, want_text, want_score)
            seen.append(item)
    loader.close()
    assert sorted(seen) == list(range(len(manifest_rows)))
    # Column names pick and order the fields, as webdataset's to_tuple does.
    loader = galley.DataLoader(str(path), batch_size=12, transform=FIXED,
                               fields=("caption", "image"), socket=daemon.socket)
    captions, images = next(iter(loader))
    loader.close()
    assert captions == [row[2] for row in manifest_rows] and images.shape[0] == 12
    with pytest.raises(galley.InvalidRequest, match="has no field 'colour'; its fields: labels, "
                                                    "caption, score"):
        next(iter(galley.DataLoader(str(path), fields=("image", "colour"),
                                    socket=daemon.socket)))


def test_jsonl_and_headed_tsv_manifests_and_headerless_ones_keep_working(daemon, workdir,
                                                                          manifest_rows):
    jsonl = workdir / "table.jsonl"
    with open(jsonl, "w") as f:
        for image, labels, text, score in manifest_rows:
            f.write(json.dumps({"labels": labels, "file": image, "meta": {"text": text},
                                "id": score}) + "\n")
    loader = galley.DataLoader(str(jsonl), batch_size=12, transform=FIXED, image_key="file",
                               fields=("file", "meta", "labels"), socket=daemon.socket)
    images, metas, labels = next(iter(loader))
    loader.close()
    assert metas == [{"text": row[2]} for row in manifest_rows]
    assert labels == [row[1] for row in manifest_rows]
    # A .tsv is read with a header row only when the job names fields.
    tsv = workdir / "table.tsv"
    with open(tsv, "w") as f:
        f.write("path\tcls\n")
        for i, (image, *_rest) in enumerate(manifest_rows):
            f.write(f"{image}\t{i % 3}\n")
    loader = galley.DataLoader(str(tsv), batch_size=12, transform=FIXED, fields=("path", "cls"),
                               socket=daemon.socket)
    _images, classes = next(iter(loader))
    loader.close()
    assert classes.tolist() == [i % 3 for i in range(12)]
    plain = workdir / "plain.tsv"
    plain.write_text("".join(f"{row[0]}\t{i % 3}\n" for i, row in enumerate(manifest_rows)))
    loader = galley.DataLoader(str(plain), batch_size=12, transform=FIXED, socket=daemon.socket)
    _images, labels = next(iter(loader))
    loader.close()
    assert labels.tolist() == [i % 3 for i in range(12)]


def test_npy_is_an_array_and_pickles_stay_bytes_unless_asked(daemon, workdir):
    np = pytest.importorskip("numpy")
    import pickle
    root = workdir / "npy_folder"
    write_folder(root, classes=1, per_class=4, sizes=(40, 50), seed=8)
    path = workdir / "npy.tar"
    with tarfile.open(path, "w") as tar:
        for i, data in enumerate(jpegs(root)):
            array = io.BytesIO()
            np.save(array, np.full((2, 3), i, dtype=np.float32))
            add_member(tar, f"k{i}.jpg", data)
            add_member(tar, f"k{i}.npy", array.getvalue())
            add_member(tar, f"k{i}.pyd", pickle.dumps({"i": i}))
    kwargs = dict(batch_size=4, transform=FIXED, fields=("jpg", "npy", "pyd"),
                  socket=daemon.socket)
    loader = galley.DataLoader(str(path), **kwargs)
    _images, arrays, pickled = next(iter(loader))
    loader.close()
    assert arrays.shape == (4, 2, 3) and arrays.dtype == torch.float32
    assert sorted(arrays[:, 0, 0].tolist()) == [0, 1, 2, 3]
    assert all(isinstance(p, bytes) for p in pickled), "never unpickled by default"
    loader = galley.DataLoader(str(path), unpickle_fields=True, **kwargs)
    _images, _arrays, unpickled = next(iter(loader))
    loader.close()
    assert sorted(d["i"] for d in unpickled) == [0, 1, 2, 3]
