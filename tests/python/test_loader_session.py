"""galley._session alone, against a real galleyd: a JobSession opens the
loader's job at an epoch and keeps it, opens other jobs with a resume point
or a sampler's list, keeps the last job's info and final counters once it is
closed, finds a restarted daemon on the same socket, and checks what only
galleyd's listing can tell (a dataset object's files, a sampler's ids)."""

import time
import warnings

import pytest
import torchvision
from torch.utils.data import DistributedSampler

import galley
from galley import _galley
from galley import transforms as T
from galley._config import LoaderConfig
from galley._session import JobSession, listing_pages

from conftest import start_daemon, stop_daemon, write_folder

FIXED = T.Compose([T.Resize([8, 8])])


def session_for(root, socket, **kwargs):
    kwargs.setdefault("batch_size", 4)
    return JobSession(LoaderConfig.build(root, transform=FIXED, socket=socket, **kwargs))


def take_epoch(job, epoch):
    """The item ids of the rest of ``epoch`` from ``job``, batch by batch."""
    batches = []
    while True:
        _memory, _labels, ids, meta = job.next(30.0)
        assert meta["epoch"] == epoch
        if len(ids):
            batches.append(galley._tensors.int64_tensor(ids).tolist())
        if meta["last_in_epoch"]:
            return batches


def open_job_ids(daemon):
    return {job["job_id"] for job in daemon.query("jobs")["jobs"]}


def wait_until_closed(daemon, job_id):
    """A job's close is a message galleyd handles on its own thread: the
    client does not wait for it, so the job leaves the list a moment later."""
    while job_id in open_job_ids(daemon):
        time.sleep(0.01)


def test_the_loaders_job_is_opened_once_and_its_final_counters_kept(daemon, tiny_folder):
    session = session_for(tiny_folder, daemon.socket)
    job = session.open(epoch=2, epochs=1, resume=None, listed=None)
    assert session.open(epoch=5, epochs=1, resume=None, listed=None) is job  # already open
    assert session.job_epoch == 2 and session.job_pid == daemon.proc.pid
    assert session.info["dataset_size"] == 12 and session.dataset_size == 12
    seen = session.dataset_seen
    assert seen["path"] == str(tiny_folder) and seen["items"] == 12 and seen["content_key"]
    assert seen["classes"] == ["class_00", "class_01", "class_02"]
    job_id = session.info["job_id"]
    assert job_id in open_job_ids(daemon)
    batches = take_epoch(job, 2)
    assert sorted(i for batch in batches for i in batch) == list(range(12))
    session.close_job()
    assert session.job is None and session.job_epoch is None
    assert session.final_stats["job"]["job_id"] == job_id
    assert session.info["job_id"] == job_id  # len(), classes answer from it
    wait_until_closed(daemon, job_id)
    session.close()
    assert session.client is None


def test_a_job_opened_with_a_resume_point_serves_the_rest_of_its_epoch(daemon, tiny_folder):
    session = session_for(tiny_folder, daemon.socket, shuffle=True, seed=11)
    first, _pid = session.open_job(0, epochs=1)
    taken = take_epoch(first, 0)[0:1]
    first.close()
    consumed = bytearray(2)
    for item in taken[0]:
        consumed[item >> 3] |= 1 << (item & 7)
    rest, _pid = session.open_job(0, epochs=1, resume={"batches": 1,
                                                        "consumed": bytes(consumed).hex()})
    served = [i for batch in take_epoch(rest, 0) for i in batch]
    rest.close()
    assert sorted(served + taken[0]) == list(range(12)), (taken, served)
    session.close()


def test_a_samplers_list_is_served_as_listed_and_checked_against_the_dataset(daemon,
                                                                              tiny_folder):
    sampler = DistributedSampler(range(12), num_replicas=2, rank=1, shuffle=True, seed=3)
    session = session_for(tiny_folder, daemon.socket, batch_size=3, sampler=sampler)
    listed = session.sampler_items()
    assert listed == list(sampler)
    job = session.open(0, 2, None, listed)
    assert [i for batch in take_epoch(job, 0) for i in batch] == listed
    session.epoch_ended(0)
    assert session.job_epoch == 1
    # The next epoch's list goes to the same job, which serves it as listed.
    sampler.set_epoch(1)
    next_list = session.sampler_items()
    assert next_list != listed
    session.send_epoch_list(1, next_list)
    assert (session.job_listed_epoch, session.job_listed) == (1, next_list)
    assert [i for batch in take_epoch(job, 1) for i in batch] == next_list
    session.close()

    too_long = DistributedSampler(range(20), num_replicas=1, rank=0, shuffle=False)
    session = session_for(tiny_folder, daemon.socket, sampler=too_long)
    session.open_job(0, epochs=1, items=list(range(12)))[0].close()  # galleyd told the size
    with pytest.raises(ValueError, match="yields item 12 but the dataset has 12 items"):
        session.sampler_items()
    session.close()


def test_a_dataset_objects_files_become_item_ids_once(daemon, tiny_folder):
    keep = torchvision.datasets.ImageFolder(str(tiny_folder),
                                            is_valid_file=lambda p: not p.endswith("0001.jpg"))
    session = session_for(keep, daemon.socket)
    assert session.spec["ids"] is None
    job, _pid = session.open_job(0, epochs=1)
    wanted = [i for i, (path, _l) in enumerate(session.listing.samples)
              if not path.endswith("0001.jpg")]
    assert session.spec["ids"] == wanted and len(wanted) == 9
    assert sorted(i for batch in take_epoch(job, 0) for i in batch) == wanted
    job.close()
    session.close()

    both = session_for(keep, daemon.socket, indices=[0, 1])
    with pytest.raises(ValueError, match=r"the ImageFolder given holds 9 of the 12 files galleyd "
                                         r"lists .*give either it or classes=/indices="):
        both.resolve_subset()


def test_listing_pages_name_the_dataset_by_the_extensions_fields(daemon, tiny_folder):
    assert _galley.listing_fields == ("dataset", "shards", "image_key", "label_key", "fields",
                                      "s3")
    session = session_for(tiny_folder, daemon.socket)
    # The spec's other fields (batch_size, transform...) are not sent.
    fetch = listing_pages(session.spec, daemon.socket, False, 30.0)
    page = fetch(0, None)
    assert page["dataset_size"] == 12 and len(page["names"]) == 12
    assert len(session.listing) == 12 and session.listing.classes == ["class_00", "class_01",
                                                                      "class_02"]
    assert session.item_path(0) == str(tiny_folder / "class_00" / "0000.jpg")
    assert session.item_path(99) == "path unknown"


def test_a_restarted_daemon_is_found_and_a_running_one_is_a_real_cancel(tmp_path):
    root = tmp_path / "data"
    write_folder(root, classes=2, per_class=3, sizes=(8, 10), seed=2)
    daemon = start_daemon(tmp_path)
    restarted = None
    try:
        session = session_for(root, daemon.socket, timeout=20)
        session.open(0, 1, None, None)
        old = session.job_pid
        lost = galley.JobCancelled("cancelled")
        with pytest.raises(galley.JobCancelled) as raised:  # the same daemon still runs
            session.await_restarted_daemon(old, lost, epoch=0)
        assert raised.value is lost
        session.drop_job()
        stop_daemon(daemon)
        restarted = start_daemon(tmp_path)
        galley.loader._WARNED.discard("reconnect")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pid = session.await_restarted_daemon(old, galley.ServerUnavailable("gone"), epoch=4)
        assert pid == restarted.proc.pid != old
        assert session.client.daemon_pid == pid
        ours = [str(w.message) for w in caught if "galleyd restarted" in str(w.message)]
        assert ours == [f"galley: galleyd restarted (pid {old} -> {pid}); the job continues "
                        f"epoch 4 on the new daemon"]
        session.close()
    finally:
        stop_daemon(restarted or daemon)


def test_with_no_daemon_coming_back_the_wait_ends_with_none(tmp_path):
    root = tmp_path / "data"
    write_folder(root, classes=1, per_class=2, sizes=(8, 10), seed=1)
    session = session_for(root, str(tmp_path / "nobody.sock"), timeout=0.3)
    assert session.reconnect_seconds == 0.3
    assert session.await_restarted_daemon(123, galley.ServerUnavailable("gone"), 0) is None
    assert session.client is None
