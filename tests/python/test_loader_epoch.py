"""galley._epoch and galley._iteration alone, against a real galleyd: the
passes over a loader's epochs (main and side, finished and abandoned), what
they count, the state a main pass leaves and the pass that resumes it, and
the batches a pass yields, prepared here or in worker processes."""

import gc
import warnings

import pytest
import torch
from torchvision import transforms as TV

import galley
from galley import transforms as T
from galley._config import LoaderConfig
from galley._epoch import EpochPass, Epochs
from galley._iteration import Batches, pin_tensors
from galley._session import JobSession

FIXED = T.Compose([T.Resize([8, 8])])


class Parts:
    """A loader's parts, put together as DataLoader puts them."""

    def __init__(self, root, socket, **kwargs):
        kwargs.setdefault("batch_size", 4)
        kwargs.setdefault("transform", FIXED)
        self.config = LoaderConfig.build(root, socket=socket, **kwargs)
        self.session = JobSession(self.config)
        self.epochs = Epochs(self.config, self.session)
        self.batches = Batches(self.config, self.session, self.epochs)

    def close(self):
        self.session.close()
        self.batches.close()


def ids_of(batches):
    return [i for batch in batches for i in batch[-1].tolist()]


def test_each_pass_yields_its_epoch_once_and_the_main_pass_counts(daemon, tiny_folder):
    parts = Parts(tiny_folder, daemon.socket, shuffle=True, seed=4, epochs=2)
    for epoch in range(2):
        assert parts.epochs.epoch == epoch
        items = ids_of(parts.batches.iterate(with_ids=True))
        assert sorted(items) == list(range(12))
        assert parts.epochs.completed == epoch + 1 and parts.epochs.main is None
    assert parts.epochs.done and parts.session.job is None  # closed after the last epoch
    assert parts.epochs.stats()["job"]["epochs_completed"] == 2  # its final counters
    assert list(parts.batches.iterate(with_ids=False)) == []
    parts.close()


def test_a_pass_started_while_the_main_one_runs_is_a_side_pass(daemon, tiny_folder):
    parts = Parts(tiny_folder, daemon.socket)
    main = parts.epochs.start_pass()
    assert main.main and parts.epochs.main is main and parts.epochs.epoch == 1
    side = parts.epochs.start_pass()
    assert not side.main and side.epoch == 1  # the epoch the next loop takes
    assert side.job.info["job_id"] != main.job.info["job_id"]
    parts.epochs.abandon_pass(side)
    assert side.finished and parts.epochs.main is main
    parts.epochs.abandon_pass(main)
    assert parts.epochs.main is None and parts.epochs.recorded is None
    assert parts.session.job is None and parts.epochs.completed == 0
    parts.close()


def test_a_state_taken_mid_epoch_resumes_exactly_the_rest(daemon, tiny_folder):
    first = Parts(tiny_folder, daemon.socket, shuffle=True, seed=9)
    stream = first.batches.iterate(with_ids=True)
    yielded = ids_of([next(stream), next(stream)])
    state = first.epochs.state_dict()
    assert (state["epoch"], state["batches_yielded"], state["split"]) == (0, 2, "galley")
    assert state["dataset"]["content_key"] and state["dataset_size"] == 12
    stream.close()
    first.close()

    again = Parts(tiny_folder, daemon.socket, shuffle=True, seed=9)
    checked = again.epochs.checked_state(state)
    again.session.close()
    again.epochs.resume_from(checked)
    assert again.epochs.state_dict() == state  # loaded, not iterated: passed on unchanged
    rest = ids_of(again.batches.iterate(with_ids=True))
    assert sorted(yielded + rest) == list(range(12)) and not set(yielded) & set(rest)
    assert again.epochs.completed == 1 and again.epochs.epoch == 1
    again.close()

    other = Parts(tiny_folder, daemon.socket, shuffle=True, seed=10)
    with pytest.raises(ValueError, match="saved by a loader with seed=9, this one has 10"):
        other.epochs.checked_state(state)
    other.close()


def test_substituted_samples_are_counted_and_warned_once_per_pass(daemon, tiny_folder):
    parts = Parts(tiny_folder, daemon.socket)
    walk = parts.epochs.start_pass()
    parts.epochs.note_skipped(walk, 2, "/data/a.jpg: truncated")
    parts.epochs.note_skipped(walk, 1, "/data/b.jpg: not an image")
    assert parts.epochs.skipped == 3 and walk.first_skipped == "/data/a.jpg: truncated"
    assert list(parts.epochs.skipped_files) == ["/data/a.jpg", "/data/b.jpg"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parts.epochs.abandon_pass(walk)
    assert [str(w.message).split(";")[0] for w in caught] == [
        "galley: 3 sample(s) of epoch 0 could not be read or decoded and were replaced by "
        "other items of the epoch (on_error='skip')"]
    assert caught[0].filename == __file__
    parts.close()

    raising = Parts(tiny_folder, daemon.socket, on_error="raise")
    walk = raising.epochs.start_pass()
    with pytest.raises(galley.SampleError, match="1 sample.s. of epoch 0 failed: /x.jpg: bad"):
        raising.epochs.note_skipped(walk, 1, "/x.jpg: bad")
    raising.epochs.abandon_pass(walk)
    raising.close()


def test_a_pass_records_what_reached_the_loop(daemon, tiny_folder):
    parts = Parts(tiny_folder, daemon.socket)
    walk = parts.epochs.start_pass()
    assert isinstance(walk, EpochPass) and walk.dataset_size == 12
    walk.count_yielded([0, 9, 11])
    assert walk.batches == 1 and bytes(walk.consumed) == bytes([0b00000001, 0b00001010])
    parts.epochs.abandon_pass(walk)
    parts.close()


def test_an_iterator_keeps_its_loader_and_the_loaders_job(daemon, folder):
    # More batches than the ring holds: the rest must still come from the job.
    loader = galley.DataLoader(folder, batch_size=4, prefetch=1, transform=FIXED, epochs=1,
                               socket=daemon.socket)
    stream = loader.iter_with_ids()
    first = next(stream)[-1].tolist()  # the loader's job is open
    del loader
    gc.collect()  # the loader is referenced only by its iterator now
    rest = [i for batch in stream for i in batch[-1].tolist()]
    assert sorted(first + rest) == list(range(60))


def flip(image):
    return image.transpose(0)  # PIL's FLIP_LEFT_RIGHT


@pytest.mark.parametrize("workers", [0, 2])
def test_a_python_part_runs_here_or_in_persistent_workers(daemon, tiny_folder, workers):
    pipeline = TV.Compose([TV.Resize([8, 8]), flip, TV.PILToTensor()])
    parts = Parts(tiny_folder, daemon.socket, transform=pipeline, num_workers=workers,
                  persistent_workers=True, epochs=2)
    pools = []
    for _ in range(2):
        items = []
        for images, labels, ids in parts.batches.iterate(with_ids=True):
            assert images.dtype == torch.uint8 and images.shape[1:] == (3, 8, 8)
            assert labels.tolist() == [i // 4 for i in ids.tolist()]  # 4 per class
            items += ids.tolist()
        assert sorted(items) == list(range(12))
        pools.append(parts.batches.pool)
    if workers:
        assert pools[0] is not None and pools[0] is pools[1] and pools[0].alive
    else:
        assert pools == [None, None]
    parts.close()
    assert parts.batches.pool is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="page-locked memory needs CUDA")
def test_pinning_keeps_the_batchs_structure():
    batch = {"x": (torch.zeros(2), [torch.ones(1)]), "name": "kept"}
    pinned = pin_tensors(batch)
    assert pinned["name"] == "kept" and isinstance(pinned["x"], tuple)
    assert isinstance(pinned["x"][1], list)
    assert pinned["x"][0].is_pinned() and pinned["x"][1][0].is_pinned()
    assert torch.equal(pinned["x"][1][0], torch.ones(1))
