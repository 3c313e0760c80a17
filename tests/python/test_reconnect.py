"""A loader whose galleyd goes away mid-epoch: when a new galleyd answers on
the same socket, the epoch goes on there with every item exactly once; a job
cancelled by a daemon that is still up is not reopened; with no daemon
coming back, the loader raises once, clearly, and its state_dict resumes."""

import os
import signal

import pytest

import galley
from galley import transforms as T

from conftest import start_daemon, stop_daemon, write_folder


@pytest.fixture
def data(tmp_path):
    root = tmp_path / "data"
    write_folder(root, classes=3, per_class=10, sizes=(8, 12), seed=7)
    return root


def loader_for(data, socket, **kwargs):
    return galley.DataLoader(str(data), batch_size=4, shuffle=True, seed=3,
                             transform=T.Resize([8, 8]), socket=socket, timeout=20, **kwargs)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_the_epoch_goes_on_exactly_once_on_a_restarted_daemon(data, tmp_path, how):
    daemon = start_daemon(tmp_path)
    loader = loader_for(data, daemon.socket)
    seen = []
    restarted = None
    try:
        for epoch in range(2):
            for _x, _y, ids in loader.iter_with_ids():
                seen.append((epoch, ids.tolist()))
                if epoch == 0 and len(seen) == 3 and restarted is None:
                    os.kill(daemon.proc.pid, how)
                    daemon.proc.wait(timeout=20)
                    daemon.log.close()
                    restarted = start_daemon(tmp_path)
        for epoch in range(2):
            items = [i for e, batch in seen if e == epoch for i in batch]
            assert sorted(items) == list(range(30)), f"epoch {epoch}: {sorted(items)}"
        status = restarted.query("status")
        assert status["jobs_opened"] == 1  # the job, reopened on the new daemon
    finally:
        loader.close()
        if restarted is not None:
            stop_daemon(restarted)


def test_a_job_cancelled_by_a_running_daemon_is_not_reopened(data, tmp_path):
    daemon = start_daemon(tmp_path)
    try:
        loader = loader_for(data, daemon.socket)
        with pytest.raises(galley.JobCancelled, match="cancelled by uid"):
            for n, _batch in enumerate(loader):
                if n == 1:
                    client = galley._galley.Client(daemon.socket, 10.0)
                    job_id = client.query("jobs")["jobs"][0]["job_id"]
                    galley._galley.Client(daemon.socket, 10.0).cancel(job_id)
        loader.close()
        assert daemon.query("status")["jobs_opened"] == 1
    finally:
        stop_daemon(daemon)


def test_no_daemon_coming_back_raises_once_and_the_state_resumes(data, tmp_path):
    daemon = start_daemon(tmp_path)
    loader = galley.DataLoader(str(data), batch_size=4, shuffle=True, seed=3,
                               transform=T.Resize([8, 8]), socket=daemon.socket, timeout=2)
    first = []
    with pytest.raises(galley.ServerUnavailable, match="state_dict"):
        for _x, _y, ids in loader.iter_with_ids():
            first += ids.tolist()
            if len(first) == 8:
                os.kill(daemon.proc.pid, signal.SIGKILL)
                daemon.proc.wait(timeout=20)
                daemon.log.close()
    state = loader.state_dict()
    loader.close()
    os.unlink(daemon.socket)  # so that start_daemon waits for the new one
    restarted = start_daemon(tmp_path)
    try:
        again = galley.DataLoader(str(data), batch_size=4, shuffle=True, seed=3,
                                  transform=T.Resize([8, 8]), socket=restarted.socket, timeout=20)
        again.load_state_dict(state)
        rest = [i for _x, _y, ids in again.iter_with_ids() for i in ids.tolist()]
        again.close()
        assert sorted(first + rest) == list(range(30))
    finally:
        stop_daemon(restarted)


@pytest.mark.parametrize("prepared", [False, True])
def test_a_sampler_epoch_goes_on_at_its_position_on_a_restarted_daemon(data, tmp_path, prepared):
    """A DistributedSampler's epoch, cut by a daemon killed mid-epoch, goes on
    on the new daemon from its position in list(sampler); killed when the
    epoch's batches were all prepared, the next epoch opens there: the loader
    yields each epoch's list exactly."""
    import time
    from torch.utils.data import DistributedSampler
    sampler = DistributedSampler(list(range(30)), num_replicas=4, rank=3, shuffle=True, seed=2)
    daemon = start_daemon(tmp_path)
    # prepared: the ring holds the whole epoch; else one batch ahead at most,
    # so that the daemon dies with batches of the epoch unmade.
    loader = galley.DataLoader(str(data), batch_size=1, sampler=sampler,
                               prefetch=8 if prepared else 1,
                               transform=T.Resize([8, 8]), socket=daemon.socket, timeout=20)
    restarted = None
    try:
        lists, seen = [], []
        for epoch in range(2):
            sampler.set_epoch(epoch)
            lists.append(list(sampler))
            seen.append([])
            for _x, _y, ids in loader.iter_with_ids():
                seen[-1] += ids.tolist()
                if epoch == 0 and len(seen[-1]) == 2 and restarted is None:
                    deadline = time.monotonic() + 60  # bounds a hang only
                    while prepared and loader.stats()["job"]["batches"] < 8:
                        assert time.monotonic() < deadline
                        time.sleep(0.01)
                    os.kill(daemon.proc.pid, signal.SIGKILL)
                    daemon.proc.wait(timeout=20)
                    daemon.log.close()
                    restarted = start_daemon(tmp_path)
        assert seen == lists  # rank 3's 8 items (one of them the padding's), in order
        assert restarted.query("status")["jobs_opened"] == 1
    finally:
        loader.close()
        if restarted is not None:
            stop_daemon(restarted)
