"""A loader's state_dict(): what it holds and the checks that a state fits
the loader it is loaded into (docs/python.md §6).

The state names the dataset by its content (galleyd's resume key: relative
paths, sizes, labels), so a copy under another path resumes; another
dataset is refused, saying what differs. Pure functions of their arguments.
"""

from __future__ import annotations

import array
import hashlib
from typing import Any, Dict, List

from ._warn import warn_user

__all__ = ["STATE_VERSION", "MATCHED_KEYS", "list_digest", "check_same_list",
           "check_same_dataset", "check_same_loader", "check_version"]

# Version 2 names the dataset by its content (a copy under another path
# resumes) and resumes a DistributedSampler's epoch by position; states of
# version 1, which named it by path, still load.
STATE_VERSION = 2
# What a state and the loader it is loaded into must agree on.
MATCHED_KEYS = ("batch_size", "shuffle", "seed", "rank", "world_size", "shard_seed",
                "local_world_size", "drop_last", "shard_drop_last", "subset", "split")


def list_digest(items: List[int]) -> str:
    """A short name for an epoch's list of item ids, order included."""
    return hashlib.blake2b(array.array("Q", items).tobytes(), digest_size=16).hexdigest()


def check_same_list(state: Dict[str, Any], items: List[int], epoch: int) -> None:
    """A state taken inside a listed epoch resumes it by position: the
    sampler must yield the list it yielded then."""
    if state.get("epoch_list") is not None and state["epoch_list"] != list_digest(items):
        raise ValueError(f"the DistributedSampler yields another list for epoch {epoch} than "
                         f"the one the state was saved in (its seed, num_replicas, rank, "
                         f"shuffle, drop_last or dataset length differ); build it as it was")


def check_version(state: Dict[str, Any]) -> None:
    """Refuses a state of a version this release does not read."""
    if state.get("version") not in (1, STATE_VERSION):
        raise ValueError(f"unknown galley.DataLoader state version {state.get('version')!r}")


def check_same_loader(state: Dict[str, Any], mine: Dict[str, Any]) -> Dict[str, Any]:
    """``state`` completed with the defaults of states saved before a key
    existed, once it agrees with ``mine`` (the loader's own state) on every
    key of MATCHED_KEYS and on the dataset."""
    # States saved before shard_seed and local_world_size existed split as
    # seed and an unknown layout do; those of version 1 by galley's split.
    state = {"shard_seed": state.get("seed"), "local_world_size": 0, "split": "galley",
             "epoch_list": None, **state}
    for key in MATCHED_KEYS:
        if state[key] != mine[key]:
            raise ValueError(f"the state was saved by a loader with {key}={state[key]!r}, "
                             f"this one has {mine[key]!r}; build the loader as it was")
    check_same_dataset(state, mine["dataset"], warn=True)
    return state


def _dataset_difference(saved: Dict[str, Any], now: Dict[str, Any]) -> str:
    """What tells two datasets' listings apart, in words, first things first."""
    if saved["items"] != now["items"]:
        return f"it has {now['items']} items, the state's had {saved['items']}"
    if saved["classes"] != now["classes"]:
        added = [c for c in now["classes"] if c not in saved["classes"]]
        gone = [c for c in saved["classes"] if c not in now["classes"]]
        if added or gone:
            return (f"its classes differ (new: {', '.join(added[:5]) or 'none'}; gone: "
                    f"{', '.join(gone[:5]) or 'none'})")
        return "its classes are in another order"
    if saved["bytes"] != now["bytes"]:
        return (f"its files hold {now['bytes']} bytes, the state's held {saved['bytes']} "
                f"(files rewritten or replaced)")
    return ("the same number of items, classes and bytes, but the files' relative paths, sizes "
            "or labels differ (files renamed, swapped or relabelled)")


def check_same_dataset(state: Dict[str, Any], now: Dict[str, Any], warn: bool) -> None:
    """Refuses a state saved over another dataset, saying what differs. A
    copy of the dataset under another path is the same dataset; with `warn`,
    a warning says when only its modification times differ. A state of
    version 1 names the dataset by path (as does any state when a galleyd of
    an earlier release sent no content key): another path is taken when the
    item count agrees, with a warning that the content could not be
    compared."""
    saved = state["dataset"]
    # A daemon that sends no resume key leaves the path and count to compare.
    unkeyed = not isinstance(saved, dict) or not saved["content_key"] or not now["content_key"]
    if unkeyed:
        saved = saved["path"] if isinstance(saved, dict) else saved
        if state["dataset_size"] != now["items"]:
            raise ValueError(f"the dataset has {now['items']} items but had "
                             f"{state['dataset_size']} when the state was saved; it cannot be "
                             f"resumed exactly")
        if warn and saved != now["path"]:
            why = (f"this state (version 1) names its dataset by its path, {saved}"
                   if not isinstance(state["dataset"], dict) else
                   f"a galleyd of an earlier release listed {saved} or {now['path']}, without "
                   f"a content key")
            warn_user(f"galley.DataLoader: {why}; it resumes over {now['path']}, which has "
                      f"as many items, but their content could not be compared")
        return
    if saved["content_key"] != now["content_key"] or saved["items"] != now["items"]:
        raise ValueError(f"the state was saved over another dataset ({saved['path']}; this "
                         f"loader reads {now['path']}): {_dataset_difference(saved, now)}; "
                         f"build the loader over the dataset the state was saved with")
    if warn and saved["mtimes_key"] != now["mtimes_key"]:
        warn_user(f"galley.DataLoader: {now['path']} holds the dataset the state was saved "
                  f"over ({saved['path']}: the same relative paths, sizes and labels), but "
                  f"the files' modification times differ (a copy that did not keep them, "
                  f"or files touched since); resuming")
