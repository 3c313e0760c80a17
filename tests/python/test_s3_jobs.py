"""What jobs over S3 shards rely on beyond the listing, end to end: a real
`rclone serve s3` on a listening socket the test holds (so that it can be
killed and started again on the same port), a real galleyd and real
loaders. Each job's order is uniformly random; a store killed and restarted
during an epoch costs retries, not items; a store left down ends the job
with an error naming the store, after galleyd's bounded retries, while
galleyd goes on serving a local dataset; two DDP ranks split the epoch and
fetch it once between them; and another user whose credentials the store
refuses gets nothing while the first user's job goes on."""

import io
import json
import pathlib
import shutil
import socket as socketlib
import subprocess
import tarfile
import tempfile
import threading
import time

import numpy as np
import pytest
from PIL import Image

from conftest import GALLEYD, ROOT, start_daemon, stop_daemon, write_folder
from stats import first_pair_p, position_table_p
from test_ddp import run_ranks
from test_s3_datasets import ACCESS_KEY, DATASET, PER_SHARD, SECRET, SHARDS, write_shards
from test_s3_refresh import Rclone

ITEMS = SHARDS * PER_SHARD
TINY = "s3://galley/tiny/part-{0..2}.tar"  # 12 tiny samples, 4 per shard


class Store(Rclone):
    """Rclone that can be killed, have its port refuse connections, and be
    started again on the same port."""

    def __init__(self, root):
        super().__init__(root)
        # Listening again on the port needs SO_REUSEADDR on the sockets the
        # killed rclone accepted too (they take it from the listener) while
        # galleyd has not closed its ends of them yet.
        port = self.listener.getsockname()[1]
        self.listener.close()
        self.listen_again(port)

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def refuse(self):
        """Closes the listening socket: a connect is refused, as when nothing
        serves the port (a SIGKILLed rclone whose listener was its own)."""
        self.listener.close()

    def listen_again(self, port=None):
        """The same port, listening again; connections wait in its backlog
        until start() hands it to a new rclone."""
        self.listener = socketlib.socket()
        self.listener.setsockopt(socketlib.SOL_SOCKET, socketlib.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port or int(self.url.rsplit(":", 1)[1])))
        self.listener.listen(256)


def write_tiny_shards(folder):
    """3 shards of 4 samples of 8 x 8 JPEGs."""
    rng = np.random.default_rng(3)
    folder.mkdir(parents=True)
    for s in range(3):
        with tarfile.open(folder / f"part-{s}.tar", "w") as tar:
            for i in range(4):
                jpeg = io.BytesIO()
                pixels = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(jpeg, "JPEG", quality=90)
                for name, data in ((f"t{s}_{i}.jpg", jpeg.getvalue()), (f"t{s}_{i}.cls", b"0")):
                    member = tarfile.TarInfo(name)
                    member.size = len(data)
                    tar.addfile(member, io.BytesIO(data))


def serve_store(root):
    """rclone serving root/data (bucket "galley": the shards of
    test_s3_datasets under in/, the tiny ones under tiny/)."""
    shard_bytes = write_shards(root / "data" / "galley" / "in")
    write_tiny_shards(root / "data" / "galley" / "tiny")
    rclone = Store(root)
    rclone.shard_bytes = shard_bytes
    rclone.start((ACCESS_KEY, SECRET))
    return rclone


def close_store(rclone):
    if rclone.proc.poll() is None:
        rclone.kill()
    rclone.listener.close()
    rclone.log.close()


@pytest.fixture
def store(tmp_path):
    rclone = serve_store(tmp_path / "s3")
    yield rclone
    close_store(rclone)


def aws_environment(url, folder):
    """The job's AWS environment: its key, the store's endpoint, and no AWS
    files of the machine's."""
    return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_ENDPOINT_URL_S3": url, "AWS_CONFIG_FILE": str(folder / "no-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(folder / "no-credentials")}


@pytest.fixture
def aws_env(monkeypatch, tmp_path, store):
    for name, value in aws_environment(store.url, tmp_path).items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)


def s3_loader(daemon, dataset=DATASET, **kwargs):
    import galley
    from galley import transforms as T
    return galley.DataLoader(dataset, socket=daemon.socket,
                             transform=T.Compose([T.Resize(32), T.CenterCrop(32)]), **kwargs)


def store_counts(daemon):
    return daemon.query("status")["object_store"]


def test_each_jobs_order_over_s3_shards_is_uniformly_random(tmp_path, store, aws_env):
    # As over local shards (test_shards.py): 12 samples in 3 shards, 4 jobs
    # x 450 epochs, so each item x position cell expects 150 hits and each
    # ordered first pair 13.6. alpha = 0.001 per statistic: a fair sampler
    # fails one run in a thousand, and a 5% bias in one item's position
    # probability moves the statistic far beyond that (test_stats.py shows
    # the same test rejecting such a sampler). After the first epoch the
    # items come from the cache: the order, not the store, is what is tested.
    daemon = start_daemon(tmp_path, "--allowed-s3-endpoint", store.url)
    try:
        n, orders = 12, []
        for seed in range(4):
            loader = s3_loader(daemon, TINY, batch_size=n, shuffle=True, seed=seed)
            for _ in range(450):
                order = [i for _x, _y, ids in loader.iter_with_ids() for i in ids.tolist()]
                assert sorted(order) == list(range(n))  # each epoch exactly once
                orders.append(order)
            loader.close()
    finally:
        stop_daemon(daemon)
    p_position, p_pair = position_table_p(orders, n), first_pair_p(orders, n)
    assert p_position > 0.001, f"positions not uniform: p = {p_position:.2e}"
    assert p_pair > 0.001, f"first pairs not uniform: p = {p_pair:.2e}"


def started_epoch(daemon, seed, **kwargs):
    """A one-epoch job in small batches (most of its epoch still to read),
    three batches into it: the loader, its iterator and the ids read."""
    loader = s3_loader(daemon, batch_size=4, prefetch=1, shuffle=True, seed=seed, epochs=1,
                       **kwargs)
    batches = loader.iter_with_ids()
    seen = []
    for _ in range(3):
        seen += next(batches)[2].tolist()
    return loader, batches, seen


def wait_for(what, done):
    """Polls `done` (a counter's test) until it holds; the deadline only
    bounds a hang."""
    deadline = time.monotonic() + 120
    while not done():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def test_a_store_killed_and_restarted_mid_epoch_costs_retries_not_items(tmp_path, store,
                                                                       aws_env):
    # Retries enough that the store is back long before they run out: the
    # test restarts it as soon as galleyd is seen retrying.
    # The set keeps none of its listing's bytes: every read goes to the store.
    daemon = start_daemon(tmp_path, "--allowed-s3-endpoint", store.url, "--s3-retries", "20",
                          "--s3-retry-cap-ms", "1000", "--s3-listing-keep-bytes", "0")
    try:
        loader, batches, seen = started_epoch(daemon, 2, on_error="raise")
        before = store_counts(daemon)
        store.kill()
        store.refuse()

        def restart_once_refused():
            # A connect refused and retried: the store was down for a read.
            wait_for("a retry", lambda: store_counts(daemon)["retries"] > before["retries"])
            store.listen_again()
            store.start((ACCESS_KEY, SECRET))

        restarter = threading.Thread(target=restart_once_refused)
        restarter.start()
        for _images, _labels, ids in batches:  # reading on makes galleyd fetch
            seen += ids.tolist()
        restarter.join()
        assert sorted(seen) == list(range(ITEMS))  # the epoch, exactly once
        stats = loader.stats()["job"]
        assert stats["skipped"] == 0, stats
        galleyctl = pathlib.Path(GALLEYD).parent / "galleyctl"
        listed = json.loads(subprocess.run(
            [str(galleyctl), "--socket", daemon.socket, "datasets", "--json"],
            capture_output=True, text=True, check=True).stdout)
        entry, = [d for d in listed["datasets"] if d["root"].startswith("s3://")]
        counts = entry["shards"]["object_store"]
        print(f"store restarted: {before} before, {counts} after")
        assert counts["retries"] > before["retries"], counts
        assert counts["failures"] == before["failures"], counts  # no request gave up
    finally:
        stop_daemon(daemon)
    assert daemon.proc.returncode == 0


def read_local_epoch(daemon, folder):
    import galley
    from galley import transforms as T
    loader = galley.DataLoader(str(folder), batch_size=5, shuffle=True, epochs=1,
                               socket=daemon.socket, transform=T.Resize([8, 8]))
    ids = [i for _x, _y, batch in loader.iter_with_ids() for i in batch.tolist()]
    loader.close()
    return ids


def test_a_store_left_down_ends_the_job_naming_it_while_a_local_job_is_served(
        tmp_path, store, aws_env):
    import galley
    local = tmp_path / "local"
    write_folder(local, classes=2, per_class=10, sizes=(8, 12), seed=2)
    # One retry, at most 50 ms apart: a read of the dead store fails at once.
    # The set keeps none of its listing's bytes: every read goes to the store.
    daemon = start_daemon(tmp_path, "--allowed-s3-endpoint", store.url, "--s3-retries", "1",
                          "--s3-retry-cap-ms", "50", "--s3-listing-keep-bytes", "0")
    try:
        assert sorted(read_local_epoch(daemon, local)) == list(range(20))
        loader, batches, seen = started_epoch(daemon, 3)
        before = store_counts(daemon)
        store.kill()
        store.refuse()
        outcome = {}

        def read_on():
            try:
                for _images, _labels, ids in batches:
                    seen.extend(ids.tolist())
                outcome["ended"] = len(seen)
            except galley.GalleyError as error:
                outcome["error"] = error

        reader = threading.Thread(target=read_on)
        reader.start()
        # galleyd gave up on a request to the dead store; the local dataset
        # is served all the same.
        wait_for("a failed request",
                 lambda: store_counts(daemon)["failures"] > before["failures"])
        assert sorted(read_local_epoch(daemon, local)) == list(range(20))
        reader.join(timeout=120)
        assert not reader.is_alive(), "the job over the dead store hangs"
        assert "ended" not in outcome, f"an epoch of {outcome.get('ended')} items ended"
        error = outcome["error"]
        print(f"the job's error: {error}")
        assert isinstance(error, galley.SampleError), repr(error)
        assert str(error).startswith("the object store stayed unreachable: "), str(error)
        assert f"at {store.url}: " in str(error) and "s3://galley/in/train-" in str(error)
        # No substitute for a store that is down: the items the cache holds
        # would only hide it.
        assert loader.skipped == 0
        assert len(seen) < ITEMS
    finally:
        stop_daemon(daemon)
    assert daemon.proc.returncode == 0  # stopped at once, though the store is down
    log = open(daemon.log.name).read()
    assert f"at {store.url}" in log


def test_ddp_ranks_over_s3_shards_split_each_epoch_and_fetch_it_once(tmp_path, store, aws_env):
    daemon = start_daemon(tmp_path, "--allowed-s3-endpoint", store.url)
    try:
        # tests/python/ddp_rank.py, as test_ddp.py runs it: 2 ranks in
        # processes of their own (gloo), each with and without drop_last,
        # with galley's split and with a DistributedSampler, 2 epochs each.
        reports = run_ranks(2, daemon, DATASET, tmp_path)
        for key in ("default-0", "sampler-0", "default-1", "sampler-1"):
            runs = [r[key] for r in reports]
            assert [r["len"] for r in runs] == [ITEMS // 2 // 2] * 2, key
            for epoch in range(2):
                shares = [[i for batch in r["epochs"][epoch] for i in batch] for r in runs]
                assert [len(s) for s in shares] == [ITEMS // 2] * 2, key
                assert not set(shares[0]) & set(shares[1]), f"{key}: the ranks overlap"
                assert sorted(shares[0] + shares[1]) == list(range(ITEMS)), key
            assert all(r["skipped"] == 0 for r in runs), key
        listed, = [d for d in daemon.query("datasets")["datasets"]
                   if d["root"].startswith("s3://")]
        reads, counts = listed["shards"], listed["shards"]["object_store"]
        print(f"2 ranks, 4 loaders x 2 epochs each: {counts} for {store.shard_bytes} bytes of "
              f"shards; reads: {reads['prefetched_reads']} prefetched, "
              f"{reads['on_demand_reads']} on demand")
        # One listing for both ranks, though they open together: one stream
        # of each shard. Then each item fetched about once for both ranks
        # and all their epochs (the cache serves the rest), as
        # test_s3_datasets.py's two jobs. A second listing, or the epoch
        # fetched again, would pass twice the shards' bytes. (The cache
        # planner's sample, 16 items' heads each time a job opens the
        # dataset after its jobs all closed, is small: the on-demand reads.)
        assert reads["daemon_shards_scanned"] == SHARDS, reads
        assert reads["prefetched_reads"] <= 1.25 * ITEMS, reads
        assert counts["bytes"] < 2 * store.shard_bytes, counts
    finally:
        stop_daemon(daemon)


# Another user's job on the same dataset, with credentials the store refuses:
# what it got, as JSON.
OTHER_USERS_JOB = """
import json, sys, galley
from galley import transforms as T
got = 0
try:
    loader = galley.DataLoader(sys.argv[1], batch_size=4, epochs=1, socket=sys.argv[2],
                               transform=T.Compose([T.Resize(32), T.CenterCrop(32)]))
    for images, _labels in loader:
        got += len(images)
    print(json.dumps({"got": got}))
except galley.GalleyError as error:
    print(json.dumps({"got": got, "error": type(error).__name__, "message": str(error)}))
"""
NOBODY = 65534


@pytest.mark.in_place
def test_another_users_job_with_refused_credentials_gets_nothing_and_the_first_goes_on(
        store, aws_env):
    # galleyd's socket where nobody can reach it: a folder other users may
    # enter, the socket 0666 (tmp_path is root's alone). nobody runs
    # Debian's python3 with galley in place (python/): a venv under root's
    # home is not theirs to run.
    shared = pathlib.Path(tempfile.mkdtemp(prefix="galley-s3-users-", dir="/tmp"))
    shared.chmod(0o755)
    daemon = start_daemon(shared, "--allowed-s3-endpoint", store.url, "--socket-mode", "0666")
    try:
        loader, batches, seen = started_epoch(daemon, 6)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(shared), "PYTHONPATH": str(ROOT / "python"),
               "GALLEY_AUTOSTART": "0", **aws_environment(store.url, shared)}
        env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"  # the store refuses it
        other = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             "/usr/bin/python3", "-c", OTHER_USERS_JOB, DATASET, daemon.socket],
            env=env, capture_output=True, text=True, timeout=300)
        assert other.returncode == 0, other.stderr
        outcome = json.loads(other.stdout.strip().splitlines()[-1])
        print(f"uid {NOBODY}'s job: {outcome}")
        assert outcome["got"] == 0, outcome  # not a batch, not a byte
        assert outcome.get("error") == "AccessDenied", outcome
        assert "s3://galley/in/train-" in outcome["message"], outcome
        assert "not-the-secret" not in outcome["message"]
        # The first user's job goes on: the rest of its epoch, exactly once.
        for _images, _labels, ids in batches:
            seen += ids.tolist()
        assert sorted(seen) == list(range(ITEMS))
        assert loader.stats()["job"]["skipped"] == 0
    finally:
        stop_daemon(daemon)
        log = (shared / "galleyd.log").read_text()
        shutil.rmtree(shared)
    assert "not-the-secret" not in log
