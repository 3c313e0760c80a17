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
        with pytest.raises(ValueError, match=r"saved over another dataset .*it has 12 items, "
                                             r"the state's had 6"):
            loader.load_state_dict(state)
        loader.close()
    finally:
        stop_daemon(daemon)


def as_version_1(state):
    """The state the previous release saved at the same point: the dataset
    named by its path, no split or epoch list."""
    old = {key: value for key, value in state.items() if key not in ("split", "epoch_list")}
    old.update(version=1, dataset=state["dataset"]["path"])
    return old


def test_a_state_resumes_under_another_path_of_the_same_content(daemon, folder, workdir):
    """A copy of the dataset under another path (cp -r, which does not keep
    modification times; cp -rp, which does) resumes the epoch exactly once
    across the two loaders: with a warning for the plain copy only. A
    different dataset is refused, naming what differs; a version-1 state
    (named by path) still resumes, and under a new path with a warning."""
    import pytest
    import shutil
    import warnings

    def make(root):
        return galley.DataLoader(str(root), batch_size=7, shuffle=True, seed=9,
                                 transform=T.Resize([8, 8]), socket=daemon.socket)

    def first_batches(root, k):
        loader = make(root)
        seen = []
        for _x, _y, ids in loader.iter_with_ids():
            seen += ids.tolist()
            if len(seen) == 7 * k:
                state = loader.state_dict()
                break
        loader.close()
        return seen, state

    def rest(root, state):
        loader = make(root)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loader.load_state_dict(state)
        seen = [i for _x, _y, ids in loader.iter_with_ids() for i in ids.tolist()]
        loader.close()
        return seen, [str(w.message) for w in caught]

    seen, state = first_batches(folder, k=3)
    copies = workdir / "resume_copies"  # under the daemon's allowed root
    copies.mkdir()
    plain, kept = copies / "copied", copies / "copied_with_times"
    subprocess.run(["cp", "-r", str(folder), str(plain)], check=True)
    subprocess.run(["cp", "-rp", str(folder), str(kept)], check=True)
    for root, warned in ((plain, True), (kept, False), (folder, False)):
        after, messages = rest(root, state)
        assert sorted(seen + after) == list(range(60)), root  # every item once, across both
        times = [m for m in messages if "modification times differ" in m]
        assert len(times) == (1 if warned else 0), messages
        assert len(messages) == len(times), messages

    # Another dataset is refused, saying what differs.
    def variant(name, change):
        root = copies / name
        shutil.copytree(folder, root)
        change(root)
        return root

    grown = variant("grown", lambda r: shutil.copy(r / "class_00" / "0000.jpg",
                                                   r / "class_00" / "9999.jpg"))
    renamed_class = variant("renamed_class", lambda r: (r / "class_03").rename(r / "class_zz"))
    rewritten = variant("rewritten", lambda r: (r / "class_01" / "0002.jpg").write_bytes(
        (r / "class_01" / "0002.jpg").read_bytes() + b"\0"))
    swapped = variant("swapped", lambda r: (
        (r / "class_02" / "0001.jpg").rename(r / "class_02" / "tmp.jpg"),
        (r / "class_02" / "0002.jpg").rename(r / "class_02" / "0001.jpg"),
        (r / "class_02" / "tmp.jpg").rename(r / "class_02" / "0002.jpg")))
    for root, says in ((grown, "it has 61 items, the state's had 60"),
                       (renamed_class, r"its classes differ \(new: class_zz; gone: class_03\)"),
                       (rewritten, r"its files hold \d+ bytes, the state's held \d+"),
                       (swapped, "relative paths, sizes or labels differ")):
        with pytest.raises(ValueError, match="saved over another dataset .*" + says):
            make(root).load_state_dict(state)

    # The previous release's state: named by path. It resumes at that path
    # as before, and under another path with as many items, with a warning.
    old = as_version_1(state)
    for root, warned in ((folder, False), (plain, True)):
        after, messages = rest(root, old)
        assert sorted(seen + after) == list(range(60)), root
        assert [("version 1" in m) for m in messages] == ([True] if warned else []), messages
    with pytest.raises(ValueError, match="has 61 items but had 60"):
        make(grown).load_state_dict(old)
