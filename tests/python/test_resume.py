"""Mid-epoch resume (torchdata StatefulDataLoader style): a process killed
after k batches of an epoch, restored from loader.state_dict() in a new
process, yields exactly the items of that epoch it had not yielded, then the
next epoch whole; under every sampling policy, sequential order and DDP."""

import json
import pathlib
import subprocess
import sys

import pytest

import galley
from galley import transforms as T

pytestmark = pytest.mark.compat

HERE = pathlib.Path(__file__).resolve().parent

CASES = [
    # policy, shuffle, k, DDP (rank, world), drop_last, full epochs before the checkpoint
    dict(policy="dsa", shuffle=True, k=1, rank=0, world_size=1, drop_last=False, full_epochs=0),
    dict(policy="ods", shuffle=True, k=3, rank=0, world_size=1, drop_last=False, full_epochs=0),
    dict(policy="lockstep", shuffle=True, k=2, rank=0, world_size=1, drop_last=True,
         full_epochs=0),
    dict(policy="independent", shuffle=True, k=4, rank=0, world_size=1, drop_last=False,
         full_epochs=1),
    dict(policy=None, shuffle=False, k=2, rank=0, world_size=1, drop_last=False, full_epochs=0),
    dict(policy="dsa", shuffle=True, k=2, rank=1, world_size=2, drop_last=False, full_epochs=0),
    dict(policy="dsa", shuffle=True, k=1, rank=0, world_size=3, drop_last=True, full_epochs=1),
]


def reference_epoch(case, socket, epoch):
    """The items an uninterrupted loader with the same settings yields in `epoch`."""
    loader = galley.DataLoader(case["root"], batch_size=case["batch_size"],
                               shuffle=case["shuffle"], policy=case["policy"], seed=case["seed"],
                               rank=case["rank"], world_size=case["world_size"],
                               drop_last=case["drop_last"], transform=T.Resize([8, 8]),
                               socket=socket)
    loader.set_epoch(epoch)
    batches = [ids.tolist() for _x, _y, ids in loader.iter_with_ids()]
    loader.close()
    return batches


def test_killed_job_resumes_exactly_once(daemon, folder, tmp_path):
    cases = [dict(c, root=str(folder), batch_size=7, seed=41 + i) for i, c in enumerate(CASES)]
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    for index in range(len(cases) + 1):
        proc = subprocess.run([sys.executable, str(HERE / "resume_child.py"), str(spec),
                               str(index), daemon.socket, str(tmp_path)],
                              capture_output=True, text=True, timeout=300)
        # Every process but the last dies by SIGKILL after saving its state.
        expected = 0 if index == len(cases) else -9
        assert proc.returncode == expected, proc.stdout + proc.stderr
    for i, case in enumerate(cases):
        first = json.loads((tmp_path / f"first{i}.json").read_text())
        second = json.loads((tmp_path / f"second{i}.json").read_text())
        epoch = case["full_epochs"]
        ref = reference_epoch(case, daemon.socket, epoch)
        ref_next = reference_epoch(case, daemon.socket, epoch + 1)
        got = first["first"] + second["rest"]
        label = f"case {i} {case}"
        assert len(first["first"]) == case["k"], label
        assert len(got) == len(ref) == second["len"], label  # the same number of batches
        flat = sorted(x for b in got for x in b)
        assert len(set(flat)) == len(flat), label  # nothing twice
        if case["drop_last"]:
            # As many items as the epoch's full batches hold, all from the shard (which
            # items the dropped tail holds depends on the order).
            shard = reference_epoch(dict(case, drop_last=False), daemon.socket, epoch)
            assert len(flat) == sum(len(b) for b in ref), label
            assert set(flat) <= set(x for b in shard for x in b), label
        else:
            assert flat == sorted(x for b in ref for x in b), label  # exactly once, all
        if not case["shuffle"]:
            assert got == ref, label  # the sequential order carries on where it stopped
        following = sorted(x for b in second["following"] for x in b)
        assert len(second["following"]) == len(ref_next), label
        if not case["drop_last"]:
            assert following == sorted(x for b in ref_next for x in b), label


def test_a_state_resumes_only_the_loader_and_dataset_it_came_from(tmp_path):
    import pytest
    from conftest import start_daemon, stop_daemon, write_folder
    root = tmp_path / "growing"
    write_folder(root, classes=1, per_class=6, sizes=(8, 8), seed=6)

    def make(socket, batch_size=2):
        return galley.DataLoader(root, batch_size=batch_size, shuffle=True,
                                 transform=T.Resize([8, 8]), socket=socket)

    daemon = start_daemon(tmp_path)
    try:
        loader = make(daemon.socket)
        it = loader.iter_with_ids()
        next(it)
        state = loader.state_dict()
        del it
        loader.close()
        with pytest.raises(ValueError, match="batch_size"):
            make(daemon.socket, batch_size=3).load_state_dict(state)
    finally:
        stop_daemon(daemon)
    write_folder(root, classes=2, per_class=6, sizes=(8, 8), seed=7)  # the dataset grows
    daemon = start_daemon(tmp_path)  # (a daemon reads a dataset's listing once)
    try:
        loader = make(daemon.socket)
        loader.load_state_dict(state)
        with pytest.raises(ValueError, match="cannot be resumed exactly"):
            next(iter(loader))
        loader.close()
    finally:
        stop_daemon(daemon)
