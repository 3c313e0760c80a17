"""S3 credentials that change while a job runs, end to end: a real `rclone
serve s3`, restarted with another access key in the middle of an epoch (on
the same listening socket, handed over by socket activation, so no request
is refused for want of a listener), a real galleyd, and a loader whose
credentials come from a credential_process whose output the test changes.
The job's client resolves them again before they expire and sends them
over the job's connection; galleyd HEADs every shard with them and signs
the rest of the epoch's reads with them: no item lost or repeated, the
refresh counted, and neither secret in galleyd's log, galleyctl's output or
the metrics.
"""

import json
import os
import pathlib
import socket as socketlib
import subprocess
import sys

import pytest

from conftest import GALLEYD, start_daemon, stop_daemon
from test_s3_datasets import DATASET, PER_SHARD, SHARDS, find_rclone, write_shards

OLD = ("GALLEYREFRESHOLDKEY", "galley-refresh-old-secret")
NEW = ("GALLEYREFRESHNEWKEY", "galley-refresh-new-secret")

# Prints the credentials the test left in current.json, expiring just past
# the client's refresh margin (10 minutes), so that it resolves them again
# at its shortest interval.
CREDENTIAL_PROCESS = """
import datetime, json, sys
key, secret = json.load(open(sys.argv[1]))
expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=602)
print(json.dumps({"Version": 1, "AccessKeyId": key, "SecretAccessKey": secret,
                  "SessionToken": "token-of-" + key,
                  "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}))
"""


class Rclone:
    """`rclone serve s3` on a listener this object keeps, so that it can be
    stopped and started again with other keys on the same port."""

    def __init__(self, root):
        self.root = root
        self.listener = socketlib.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(256)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.proc = None
        self.log = open(root / "rclone.log", "a")

    def start(self, key):
        self.proc = subprocess.Popen(
            ["sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$@" 3<&0 0</dev/null', "sh",
             find_rclone(), "serve", "s3", "--auth-key", f"{key[0]},{key[1]}",
             "--config", str(self.root / "rclone.conf"), str(self.root / "data")],
            stdin=self.listener.fileno(), stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)

    def close(self):
        self.stop()
        self.listener.close()
        self.log.close()


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "s3"
    write_shards(root / "data" / "galley" / "in")
    rclone = Rclone(root)
    rclone.start(OLD)
    yield rclone
    rclone.close()


@pytest.fixture
def process_env(monkeypatch, tmp_path, store):
    """The job's AWS setup: a profile whose credential_process prints what
    current.json holds; no keys in the environment."""
    current = tmp_path / "current.json"
    current.write_text(json.dumps(OLD))
    script = tmp_path / "credentials.py"
    script.write_text(CREDENTIAL_PROCESS)
    config = tmp_path / "aws-config"
    config.write_text(f"[default]\ncredential_process = {sys.executable} {script} {current}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", store.url)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    return current


def epoch_loader(daemon, seed):
    """One epoch that fails on any sample it cannot read; small batches and
    ring, so that most of the epoch is read after the test's change."""
    import galley
    from galley import transforms as T
    return galley.DataLoader(DATASET, batch_size=4, prefetch=1, shuffle=True, seed=seed,
                             epochs=1, on_error="raise", socket=daemon.socket,
                             transform=T.Compose([T.Resize(32), T.CenterCrop(32)]))


def test_credentials_replaced_during_an_epoch_carry_it_on_exactly_once(tmp_path, store,
                                                                      process_env, monkeypatch):
    import urllib.request
    monkeypatch.setenv("GALLEY_TEST_LOG_LEVEL", "info")  # the refresh is logged at info
    with socketlib.socket() as probe:  # a port for the metrics endpoint
        probe.bind(("127.0.0.1", 0))
        metrics_port = probe.getsockname()[1]
    # The set keeps none of its listing's bytes: the epoch's reads sign with
    # the credentials of the moment.
    daemon = start_daemon(tmp_path, "--allowed-s3-endpoint", store.url,
                          "--metrics-address", f"127.0.0.1:{metrics_port}",
                          "--s3-listing-keep-bytes", "0")
    try:
        loader = epoch_loader(daemon, seed=9)
        batches = loader.iter_with_ids()
        seen = []
        for _ in range(3):
            seen += next(batches)[2].tolist()
        # The store now takes only the new key: every read signed with the
        # old one is refused (InvalidAccessKeyId) and waits for a refresh,
        # which comes once the credential_process prints the new key.
        store.stop()
        # What galleyd had read with the old key, now that nothing can
        # answer a request signed with it.
        before = daemon.query("status")["object_store"]
        store.start(NEW)
        process_env.write_text(json.dumps(NEW))
        for _images, _labels, ids in batches:
            seen += ids.tolist()
        after = daemon.query("status")["object_store"]
        print(f"before the switch: {before}; after: {after}; {len(seen)} items")
        # Bytes read after the switch: signed with the new key, the only
        # one the restarted store takes.
        assert after["bytes"] > before["bytes"], (before, after)
        stats = loader.stats()["job"]
        assert sorted(seen) == list(range(SHARDS * PER_SHARD))  # the epoch, once
        assert stats["credential_refreshes"] >= 1, stats
        assert stats["skipped"] == 0, stats
        galleyctl = pathlib.Path(GALLEYD).parent / "galleyctl"
        for what in ("status", "jobs", "datasets"):
            shown = subprocess.run([str(galleyctl), "--socket", daemon.socket, what, "--json"],
                                   capture_output=True, text=True, check=True).stdout
            for secret in (OLD[1], NEW[1], "token-of-"):
                assert secret not in shown, what
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                    timeout=30) as reply:
            metrics = reply.read().decode()
        assert "galley_" in metrics
        for secret in (OLD[1], NEW[1], "token-of-"):
            assert secret not in metrics
    finally:
        stop_daemon(daemon)
    log = open(daemon.log.name).read()
    assert "S3 credentials refreshed" in log
    for secret in (OLD[1], NEW[1], "token-of-"):
        assert secret not in log


def await_refused(loader, count):
    """Waits until galleyd has refused `count` of the job's refreshes."""
    import time
    deadline = time.monotonic() + 120  # bounds a hang only
    while loader.stats()["job"]["credential_refreshes_refused"] < count:
        assert time.monotonic() < deadline, "no refresh reached galleyd"
        time.sleep(0.1)


def test_credentials_the_store_refuses_are_not_taken_and_the_job_goes_on(tmp_path, store,
                                                                         monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", OLD[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", OLD[1])
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", store.url)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    daemon = start_daemon(tmp_path, "--allowed-s3-endpoint", store.url)
    try:
        loader = epoch_loader(daemon, seed=4)
        batches = loader.iter_with_ids()
        seen = next(batches)[2].tolist()
        # The job's environment now names a key the store does not know: the
        # client sends it (the environment changed), galleyd's HEADs are
        # refused, and the job keeps signing with the key it had.
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "GALLEYUNKNOWNKEY")
        await_refused(loader, 1)
        # Nor may a refresh name another endpoint: it is refused before any
        # request, and galleyd's log says why.
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", OLD[0])
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
        await_refused(loader, 2)
        for _images, _labels, ids in batches:
            seen += ids.tolist()
        assert sorted(seen) == list(range(SHARDS * PER_SHARD))
        stats = loader.stats()["job"]
        assert stats["credential_refreshes"] == 0 and stats["skipped"] == 0, stats
    finally:
        stop_daemon(daemon)
    log = open(daemon.log.name).read()
    assert "refreshed S3 credentials refused, the job keeps its own: PermissionDenied" in log
    assert "a refresh replaces the credentials only" in log
    assert OLD[1] not in log and "GALLEYUNKNOWNKEY" not in log
