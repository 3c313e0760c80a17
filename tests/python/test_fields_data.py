"""fields= behaves like the data it came from, against a real galleyd, on
real shards and manifests, beside webdataset, Python's csv module and
pandas where they apply: samples left out are announced, a column has one
type in every batch, a bad member is a bad sample under on_error, CSV as
RFC 4180 writes it, duplicate members are refused, and what the job is
told (labels, loads) is what the data holds."""

import csv
import io
import json
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


# -- 2. one type per column ------------------------------------------------------------

WEIGHTS = ["1", "0.25", "2.0", "3", "1e-3", "0.5"]  # integers and decimals in one column


@pytest.fixture(scope="module")
def typed_csv(workdir, images):
    """12 rows: weight (WEIGHTS twice), count (integers, one cell empty),
    code ("007"-style codes beside plain numbers), tags (JSON lists, one
    empty)."""
    path = workdir / "typed.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["image", "weight", "count", "code", "tags"])
        for i, image in enumerate(images[1][:12]):
            writer.writerow([image, WEIGHTS[i % 6], "" if i == 4 else str(i * 10),
                             f"{i:03d}" if i % 2 else str(i + 10),
                             "" if i == 7 else json.dumps(list(range(i % 3)))])
    return str(path)


def test_a_csv_column_has_one_type_in_every_batch(daemon, typed_csv):
    loader = galley.DataLoader(typed_csv, batch_size=3, transform=FIXED,
                               fields=("image", "weight", "count", "code", "tags"),
                               socket=daemon.socket)
    got = {"weight": [], "count": [], "code": [], "tags": []}
    for _images, weight, count, code, tags, _ids in loader.iter_with_ids():
        # Every batch: the same types, whatever its cells look like.
        assert weight.dtype == torch.float64 and count.dtype == torch.float64
        assert isinstance(code, list) and all(isinstance(c, str) for c in code)
        assert isinstance(tags, list)
        got["weight"] += weight.tolist()
        got["count"] += count.tolist()
        got["code"] += code
        got["tags"] += tags
    loader.close()
    with open(typed_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    assert got["weight"] == [float(r["weight"]) for r in rows]
    nan = got["count"][4]
    assert nan != nan and got["count"][:4] + got["count"][5:] == [
        float(r["count"]) for r in rows if r["count"]]
    # Codes stay strings exactly as Python's csv module reads them.
    assert got["code"] == [r["code"] for r in rows] and "007" in got["code"]
    assert got["tags"] == [json.loads(r["tags"]) if r["tags"] else None for r in rows]


def test_csv_types_beside_pandas(daemon, typed_csv):
    """pandas agrees on the numbers (NaN for the empty cell of an integer
    column, as galley) and reads "007" as 7, where galley follows Python's
    csv module."""
    pandas = pytest.importorskip("pandas", reason="compared where installed")
    frame = pandas.read_csv(typed_csv)
    loader = galley.DataLoader(typed_csv, batch_size=12, transform=FIXED,
                               fields=("image", "weight", "count", "code"), socket=daemon.socket)
    _images, weight, count, code = next(iter(loader))
    loader.close()
    assert str(frame["weight"].dtype) == "float64" and str(frame["count"].dtype) == "float64"
    assert weight.tolist() == frame["weight"].tolist()
    assert torch.equal(count.isnan(), torch.tensor(frame["count"].isna().tolist()))
    assert count.nan_to_num(-1).tolist() == frame["count"].fillna(-1).tolist()
    assert frame["code"].tolist()[1] == 1 and code[1] == "001"


def keeping(samples):
    """A collate_fn that keeps each sample it is given in `samples`."""
    def collate(batch):
        samples.extend(batch)
        return batch
    return collate


def test_collate_fn_sees_the_columns_type(daemon, typed_csv):
    seen = []
    loader = galley.DataLoader(typed_csv, batch_size=6, transform=FIXED,
                               fields=("image", "weight", "code"), collate_fn=keeping(seen),
                               socket=daemon.socket)
    next(iter(loader))
    loader.close()
    assert [type(w) for _, w, _ in seen] == [float] * 6  # "1" and "3" included
    assert [c for _, _, c in seen] == ["10", "001", "12", "003", "14", "005"]


def test_json_lines_keep_their_types_and_batch_alike(daemon, workdir, images):
    path = workdir / "typed.jsonl"
    with open(path, "w") as f:
        for i, image in enumerate(images[1][:12]):
            f.write(json.dumps({"image": image, "score": 1 if i < 6 else 0.5, "n": i,
                                "flag": i % 2 == 0, "code": f"{i:03d}"}) + "\n")
    samples = []
    loader = galley.DataLoader(str(path), batch_size=6, transform=FIXED,
                               fields=("image", "score", "n", "flag", "code"),
                               socket=daemon.socket)
    batches = [batch[1:] for batch in loader]
    loader.close()
    # The first batch holds only the integer 1s, the second only 0.5s: a
    # column of numbers is float64 in both.
    for score, n, flag, code in batches:
        assert score.dtype == torch.float64 and n.dtype == torch.int64
        assert flag.dtype == torch.bool and isinstance(code, list)
    assert batches[0][0].tolist() == [1.0] * 6 and batches[1][0].tolist() == [0.5] * 6
    loader = galley.DataLoader(str(path), batch_size=6, transform=FIXED,
                               fields=("image", "score"), collate_fn=keeping(samples), socket=daemon.socket)
    next(iter(loader))
    loader.close()
    assert [type(score) for _, score in samples] == [int] * 6, "a JSON 1 stays an int"


# -- 3. a bad field is a bad sample under on_error -----------------------------------------


def npy_bytes(array, allow_pickle=False):
    np = pytest.importorskip("numpy")
    out = io.BytesIO()
    np.save(out, array, allow_pickle=allow_pickle)
    return out.getvalue()


@pytest.fixture(scope="module")
def bad_values_shard(workdir, images):
    """12 samples of jpg + txt + json + npy: k02's .txt is not UTF-8, k04's
    .json nests 2,000 deep, k06's .npy is pickled Python objects."""
    np = pytest.importorskip("numpy")
    deep = b"[" * 2000 + b"]" * 2000

    def members(i):
        return [("txt", b"\xff\xfe latin-1 \xe9" if i == 2 else f"caption {i}".encode()),
                ("json", deep if i == 4 else json.dumps({"i": i}).encode()),
                ("npy", npy_bytes(np.array([{"i": i}], dtype=object), allow_pickle=True)
                 if i == 6 else npy_bytes(np.full(3, i, dtype=np.int16)))]
    return write_shard(workdir / "bad_values.tar", images[0][:12], members)


@pytest.mark.parametrize("field, key, reason", [
    ("txt", "k02", "member k02.txt is not UTF-8 text"),
    ("json", "k04", "member k04.json nests deeper than 500 levels"),
    ("npy", "k06", "member k06.npy holds Python objects (a pickled .npy)"),
])
def test_a_bad_member_is_a_bad_sample_under_on_error(daemon, bad_values_shard, field, key,
                                                     reason):
    loader = galley.DataLoader(bad_values_shard, batch_size=4, transform=FIXED,
                               fields=("jpg", field, "__key__"), socket=daemon.socket)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        keys = [k for batch in loader for k in batch[2]]
    loader.close()
    # Every position served; the bad one by a substitute, counted and named.
    assert len(keys) == 12 and key not in keys
    assert loader.skipped == 1 and loader.skipped_files == [f"{bad_values_shard}:{key}.jpg"]
    assert any(reason in str(w.message) for w in caught), [str(w.message) for w in caught]
    loader = galley.DataLoader(bad_values_shard, batch_size=4, transform=FIXED, on_error="raise",
                               fields=("jpg", field), socket=daemon.socket)
    with pytest.raises(galley.SampleError, match=r"bad_values\.tar.*" + reason.replace(
            "(", r"\(").replace(")", r"\)")):
        list(loader)
    loader.close()


def test_webdataset_stops_where_galley_substitutes(bad_values_shard):
    """webdataset's default handler ends the whole iteration at k02's .txt."""
    wds = pytest.importorskip("webdataset", reason="installed by scripts/setup_venv.sh")
    seen = []
    with pytest.raises(wds.autodecode.DecodingError):
        for key, _text in wds.WebDataset(bad_values_shard, shardshuffle=False).decode().to_tuple(
                "__key__", "txt"):
            seen.append(key)
    assert seen == ["k00", "k01"]


def test_a_bad_csv_cell_fails_its_sample_only_for_jobs_naming_its_column(daemon, workdir,
                                                                          images):
    path = workdir / "latin1.csv"
    with open(path, "wb") as f:
        f.write(b"image,caption,n\n")
        for i, image in enumerate(images[1][:8]):
            caption = b"caf\xe9" if i == 5 else f"caption {i}".encode()
            f.write(image.encode() + b"," + caption + b"," + str(i).encode() + b"\n")
    loader = galley.DataLoader(str(path), batch_size=8, transform=FIXED,
                               fields=("image", "caption", "n"), socket=daemon.socket)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _images, captions, n = next(iter(loader))
    assert loader.skipped == 1 and 5 not in n.tolist() and len(captions) == 8
    assert "caf" not in "".join(captions)
    loader.close()
    loader = galley.DataLoader(str(path), batch_size=8, transform=FIXED, fields=("image", "n"),
                               socket=daemon.socket)
    _images, n = next(iter(loader))
    loader.close()
    assert loader.skipped == 0 and sorted(n.tolist()) == list(range(8))
    loader = galley.DataLoader(str(path), batch_size=8, transform=FIXED, on_error="raise",
                               fields=("image", "caption"), socket=daemon.socket)
    with pytest.raises(galley.SampleError, match="manifest column 'caption' is not UTF-8 text"):
        list(loader)
    loader.close()


@pytest.fixture(scope="module")
def bad_pickle_shard(workdir, images):
    """8 samples of jpg + pyd; k05's .pyd is not a pickle."""
    import pickle
    return write_shard(workdir / "bad_pickle.tar", images[0][:8],
                       lambda i: [("pyd", b"\x80\x04 truncated" if i == 5
                                   else pickle.dumps({"i": i}))])


@pytest.mark.parametrize("workers", [0, 2])
def test_a_value_the_job_cannot_decode_is_a_bad_sample_too(daemon, bad_pickle_shard, workers):
    # galleyd cannot check a pickle; the job decodes it, and a failure there
    # follows on_error as galleyd's own checks do.
    transform = T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor(), lambda x: x * 2])
    loader = galley.DataLoader(bad_pickle_shard, batch_size=8, transform=transform,
                               fields=("jpg", "pyd", "__key__"), unpickle_fields=True,
                               num_workers=workers, socket=daemon.socket)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        images, records, keys = next(iter(loader))
    loader.close()
    assert images.shape == (8, 3, 32, 32) and len(records) == 8
    assert "k05" not in keys and {r["i"] for r in records} == {0, 1, 2, 3, 4, 6, 7}
    assert loader.skipped == 1 and loader.skipped_files == [f"{bad_pickle_shard}:k05.jpg"]
    assert any("member k05.pyd cannot be decoded: UnpicklingError" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    loader = galley.DataLoader(bad_pickle_shard, batch_size=8, transform=FIXED, on_error="raise",
                               fields=("jpg", "pyd"), unpickle_fields=True, socket=daemon.socket)
    with pytest.raises(galley.SampleError,
                       match=r"bad_pickle\.tar:k05\.jpg: member k05\.pyd cannot be decoded: "
                             r"UnpicklingError"):
        list(loader)
    loader.close()


# -- 4. CSV as RFC 4180 writes it; a member twice -------------------------------------------


def test_a_csv_cell_spanning_lines_is_read_as_csv_and_pandas_read_it(daemon, workdir, images):
    path = workdir / "multiline.csv"
    captions = [f"line one of {i}\nline two, with a comma" if i % 3 == 0 else
                f'"quoted" {i}\r\nwindows line' if i % 3 == 1 else f"plain {i}"
                for i in range(9)]
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)  # quotes the cells that need it, as RFC 4180 says
        writer.writerow(["image", "caption", "n"])
        for i, image in enumerate(images[1][:9]):
            writer.writerow([image, captions[i], i])
    with open(path, newline="") as f:
        by_csv = [row["caption"] for row in csv.DictReader(f)]
    assert by_csv == captions
    loader = galley.DataLoader(str(path), batch_size=9, transform=FIXED,
                               fields=("image", "caption", "n"), socket=daemon.socket)
    _images, got, n = next(iter(loader))
    loader.close()
    assert n.tolist() == list(range(9)) and got == by_csv
    pandas = pytest.importorskip("pandas", reason="compared where installed")
    assert pandas.read_csv(path)["caption"].tolist() == got


@pytest.fixture(scope="module")
def twice_shard(workdir, images):
    """8 samples of jpg + txt; k05 holds two .txt members."""
    def members(i):
        return [("txt", b"first")] + ([("txt", b"second")] if i == 5 else [])
    return write_shard(workdir / "twice.tar", images[0][:8], members)


def test_a_member_twice_leaves_its_sample_out_naming_it(daemon, twice_shard):
    loader = galley.DataLoader(twice_shard, batch_size=8, transform=FIXED,
                               fields=("jpg", "txt", "__key__"), socket=daemon.socket)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        keys = [k for batch in loader for k in batch[2]]
    loader.close()
    assert sorted(keys) == [f"k{i:02d}" for i in range(8) if i != 5]
    assert [s.rsplit("/", 1)[-1] for s in loader.left_out_samples] == [
        "twice.tar: k05 (two members named k05.txt)"]
    assert any("k05 (two members named k05.txt)" in str(w.message) for w in caught)
    loader = galley.DataLoader(twice_shard, batch_size=8, transform=FIXED, on_error="raise",
                               fields=("jpg", "txt"), socket=daemon.socket)
    with pytest.raises(galley.InvalidRequest, match="1 have two .txt members"):
        len(loader)
    wds = pytest.importorskip("webdataset", reason="installed by scripts/setup_venv.sh")
    with pytest.raises(ValueError, match="duplicate file name"):
        list(wds.WebDataset(twice_shard, shardshuffle=False).to_tuple("jpg", "txt"))


# -- 6. what the job is told ------------------------------------------------------------------


def test_with_fields_the_listing_shows_the_shards_labels(daemon, gappy_shard, workdir, images):
    loader = galley.DataLoader(gappy_shard, batch_size=6, transform=FIXED,
                               fields=("jpg", "txt", "__key__"), socket=daemon.socket)
    samples = loader.dataset.samples
    keys = [k for batch in loader for k in batch[2]]
    loader.close()
    # Items in id order: the samples with a .txt, each labelled by its .cls.
    listed = [int(path.rsplit(":k", 1)[1].split(".")[0]) for path, _ in samples]
    assert sorted(keys) == [f"k{i:02d}" for i in listed]
    assert [label for _, label in samples] == [i % 4 for i in listed]
    assert loader.dataset.targets == [i % 4 for i in listed]
    # A .cls that is no label (-1, "x") leaves its sample in, unlabelled.
    shard = write_shard(workdir / "odd_labels.tar", images[0][:4],
                        lambda i: [("txt", b"t"), ("cls", [b"2", b"-1", b"x", b"0"][i])])
    loader = galley.DataLoader(shard, batch_size=4, transform=FIXED, fields=("jpg", "txt"),
                               socket=daemon.socket)
    assert loader.dataset.targets == [2, -1, -1, 0] and len(loader.dataset) == 4
    loader.close()


def run_shared_job(socket, shards, barrier, out):
    loader = galley.DataLoader(shards, batch_size=8, seed=0, shuffle=True, socket=socket,
                               transform=T.Compose([T.RandomResizedCrop(32)]),
                               fields=("jpg", "txt"))
    len(loader)  # opens the job
    barrier.wait()
    for _ in range(2):
        for _batch in loader:
            pass
    out.put(loader.stats()["samplers"])
    loader.close()


def test_the_group_says_what_its_loads_cost(tmp_path, images):
    """Two same-seed jobs sharing every decode: the sampler's loads count an
    item taken again from the decoded tier, the costs beside them do not."""
    from conftest import job_context, job_process, start_daemon, stop_daemon
    shard = write_shard(tmp_path / "shared.tar", images[0],
                        lambda i: [("txt", f"caption {i}".encode())])
    daemon = start_daemon(tmp_path, "--cache-bytes", "256M")
    try:
        ctx = job_context()
        barrier, out = ctx.Barrier(2), ctx.Queue()
        procs = [job_process(run_shared_job, (daemon.socket, shard, barrier, out))
                 for _ in range(2)]
        for p in procs:
            p.start()
        seen = [out.get(timeout=300) for _ in procs]
        assert [p.join(timeout=60) or p.exitcode for p in procs] == [0, 0]
        group, = daemon.query("status")["samplers"]
    finally:
        stop_daemon(daemon)
    assert all(len(groups) == 1 for groups in seen), seen
    requests = group["requests"]
    # Each item is read and decoded at most once per epoch for both jobs,
    # and the second epoch takes it from the decoded tier.
    assert group["decodes"] <= requests / 2
    assert group["file_reads"] == group["decodes"] == len(images[0])
    assert group["cache_hits"] > 0
    assert group["decodes"] + group["cache_hits"] <= group["loads"]
    for key in ("file_reads", "decodes", "cache_hits"):
        assert group[key + "_per_request"] == pytest.approx(group[key] / requests)


# -- 5. collate_fn where torch runs it -------------------------------------------------------


def tokenize(samples):
    """A collate_fn standing for a tokenizer: it says which process ran it
    and what torch told it there."""
    import os
    info = torch.utils.data.get_worker_info()
    images = torch.stack([sample[0] for sample in samples])
    lengths = torch.tensor([len(sample[1].split()) for sample in samples])
    return images, lengths, [sample[2] for sample in samples], os.getpid(), \
        None if info is None else info.id


@pytest.mark.parametrize("workers", [0, 2])
def test_collate_fn_runs_in_the_workers_as_torch_runs_it(daemon, gappy_shard, workers):
    import os
    loader_module = __import__("galley.loader", fromlist=["_WARNED"])
    loader_module._WARNED.discard("num_workers")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = galley.DataLoader(gappy_shard, batch_size=6, transform=FIXED,
                                   fields=("jpg", "txt", "__key__"), collate_fn=tokenize,
                                   num_workers=workers, socket=daemon.socket)
        batches = list(loader)
    loader.close()
    assert not [w for w in caught if "no effect" in str(w.message)], \
        [str(w.message) for w in caught]
    pids = {pid for *_rest, pid, _worker in batches}
    workers_seen = {worker for *_rest, worker in batches}
    if workers:
        assert os.getpid() not in pids and len(pids) == 2 and workers_seen == {0, 1}
    else:
        assert pids == {os.getpid()} and workers_seen == {None}
    keys = sorted(k for _i, _l, ks, _p, _w in batches for k in ks)
    assert len(keys) == 18 and all(length == 2 for _i, ls, *_r in batches for length in ls)
    assert all(images.shape[1:] == (3, 32, 32) for images, *_rest in batches)


def test_collate_fn_in_workers_sees_what_the_main_process_does(daemon, folder):
    def collate(samples):
        return torch.stack([image for image, _ in samples]), [label for _, label in samples]

    batches = {}
    for workers in (0, 2):
        loader = galley.DataLoader(str(folder), batch_size=10, transform=FIXED, seed=3,
                                   collate_fn=collate, num_workers=workers, socket=daemon.socket)
        batches[workers] = [(images.clone(), [int(label) for label in labels])
                            for images, labels in loader]
        loader.close()
    assert len(batches[0]) == len(batches[2]) == 6
    for (a, la), (b, lb) in zip(batches[0], batches[2]):
        assert torch.equal(a, b) and la == lb
