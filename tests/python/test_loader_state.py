"""galley._resume alone, without a daemon: whether a state fits the loader
it is loaded into, and what the refusal says when it does not."""

import warnings

import pytest

from galley import _resume

pytestmark = pytest.mark.compat

DATASET = {"path": "/data/a", "content_key": "c1", "mtimes_key": "m1", "items": 10,
           "bytes": 1000, "classes": ["cat", "dog"]}


def state_over(dataset, **changes):
    state = {"version": 2, "dataset": dict(dataset), "dataset_size": dataset["items"],
             "batch_size": 4, "shuffle": True, "seed": 1, "rank": 0, "world_size": 1,
             "shard_seed": 1, "local_world_size": 0, "drop_last": False,
             "shard_drop_last": False, "subset": [None, None], "split": "galley",
             "epoch_list": None}
    state.update(changes)
    return state


def test_an_epochs_list_is_named_with_its_order():
    assert _resume.list_digest([1, 2, 3]) == _resume.list_digest([1, 2, 3])
    assert _resume.list_digest([1, 2, 3]) != _resume.list_digest([3, 2, 1])
    state = {"epoch_list": _resume.list_digest([1, 2, 3])}
    _resume.check_same_list(state, [1, 2, 3], 0)
    with pytest.raises(ValueError, match="yields another list for epoch 5"):
        _resume.check_same_list(state, [3, 2, 1], 5)


def test_only_known_versions_load():
    _resume.check_version({"version": 1})
    _resume.check_version({"version": _resume.STATE_VERSION})
    with pytest.raises(ValueError, match="unknown galley.DataLoader state version 3"):
        _resume.check_version({"version": 3})


def test_a_state_of_another_loader_names_what_differs():
    mine = state_over(DATASET)
    for key in _resume.MATCHED_KEYS:
        other = state_over(DATASET, **{key: "other"})
        with pytest.raises(ValueError, match=f"saved by a loader with {key}='other'"):
            _resume.check_same_loader(other, mine)
    # A state saved before shard_seed and local_world_size existed.
    old = state_over(DATASET)
    del old["shard_seed"], old["local_world_size"], old["split"], old["epoch_list"]
    assert _resume.check_same_loader(old, mine)["shard_seed"] == 1


@pytest.mark.parametrize("change,said", [
    ({"items": 11}, "it has 11 items, the state's had 10"),
    ({"classes": ["cat", "emu"]}, r"its classes differ \(new: emu; gone: dog\)"),
    ({"classes": ["dog", "cat"]}, "its classes are in another order"),
    ({"bytes": 999}, "its files hold 999 bytes, the state's held 1000"),
    ({}, r"the same number of items, classes and bytes, but .* \(files renamed"),
])
def test_another_dataset_is_refused_saying_what_differs(change, said):
    now = dict(DATASET, path="/data/b", content_key="c2", **change)
    with pytest.raises(ValueError, match=f"saved over another dataset \\(/data/a; this loader "
                                         f"reads /data/b\\): {said}"):
        _resume.check_same_dataset(state_over(DATASET), now, warn=True)


def test_a_copy_resumes_and_new_modification_times_warn_at_the_callers_line():
    copy = dict(DATASET, path="/elsewhere/a")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _resume.check_same_dataset(state_over(DATASET), copy, warn=True)
        _resume.check_same_dataset(state_over(DATASET), dict(copy, mtimes_key="m2"), warn=True)
        _resume.check_same_dataset(state_over(DATASET), dict(copy, mtimes_key="m2"), warn=False)
    assert len(caught) == 1 and "modification times differ" in str(caught[0].message)
    assert caught[0].filename == __file__


def test_a_state_named_by_path_resumes_over_as_many_items():
    old = dict(state_over(DATASET), version=1, dataset="/data/a")
    _resume.check_same_dataset(old, DATASET, warn=True)
    with pytest.warns(UserWarning, match=r"version 1\) names its dataset by its path, /data/a"):
        _resume.check_same_dataset(old, dict(DATASET, path="/data/b"), warn=True)
    with pytest.raises(ValueError, match="has 11 items but had 10 when the state was saved"):
        _resume.check_same_dataset(old, dict(DATASET, items=11), warn=True)
