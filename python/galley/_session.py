"""A loader's session with galleyd: the connection, the loader's own job and
the jobs of its passes, and what galleyd said of the dataset.

JobSession finds the daemon as the loader finds it (``socket=``,
``autostart=``; docs/autostart.md), opens a job at an epoch (with a resume
point and a DistributedSampler's list), keeps the loader's job open across
epochs, finds the daemon again when it restarts, and closes the job, keeping
its info and final counters so that ``len()``, ``classes`` and ``stats()``
answer once it has ended. It also holds the dataset galleyd lists for the
loader (``loader.dataset`` for a path) and checks what can only be checked
against it: a dataset object's files as item ids, a sampler's list.

Thread-safety: none; used by the thread that iterates the loader, as the
loader is.
"""

from __future__ import annotations

import operator
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _autostart
from . import _galley
from . import datasets as _datasets
from . import dataset_objects
from . import _s3_refresh
from . import s3_access as _s3_access
from . import shards as _shards
from ._config import LoaderConfig
from ._warn import warn_once, warn_user

__all__ = ["JobSession", "listing_pages"]

# The most bytes an OpenJob or SeekEpoch body may take (galley/job_spec.h),
# less room for the rest of the body: an epoch's list must fit in it.
_LIST_BYTES = _galley.max_request_bytes - (64 << 10)
# How long a job's pass waits for a restarted galleyd when timeout= is 0.
_RECONNECT_SECONDS = 30.0


def listing_pages(spec: Dict[str, Any], socket: Optional[str], autostart: Optional[bool],
                  timeout: float) -> Callable[[int, Optional[int]], Dict[str, Any]]:
    """Reads a page of the listing of the dataset `spec` names from galleyd
    (the "listing" request), found as the loader finds its daemon."""
    named = {key: spec[key] for key in _galley.listing_fields if spec.get(key) is not None}

    def fetch(begin: int, count: Optional[int]) -> Dict[str, Any]:
        client = _autostart.client(socket, autostart, timeout)
        with _shards.IndexingProgress(lambda: _autostart.client(socket, False, 5.0),
                                      named.get("shards") or named["dataset"]):
            return client.listing(named, begin, count)

    return fetch


class JobSession:
    """The loader's connection to galleyd and its jobs (module docstring)."""

    def __init__(self, config: LoaderConfig) -> None:
        self.config = config
        # The OpenJob body; a dataset object's files are added to it as ids
        # once galleyd's listing is known (resolve_subset).
        self.spec: Dict[str, Any] = dict(config.spec)
        # What loader.dataset is for a path, as torch has it: the dataset
        # galleyd lists there (galley.datasets).
        self.listing = _datasets.ListedDataset(
            config.root, listing_pages(self.spec, config.socket, config.autostart,
                                       config.request_seconds), config.shards)
        self.client: Any = None
        # The loader's own job in galleyd: main passes take their batches from
        # it, one epoch after the other (side passes open their own).
        self.job: Any = None
        self.job_pid: Optional[int] = None  # the galleyd serving it
        self.job_epoch: Optional[int] = None  # the epoch of its next batch
        # A listed loader's job: the epoch whose list it was last given, and
        # that list (a listed epoch is served only once its list is sent).
        self.job_listed_epoch: Optional[int] = None
        self.job_listed: Optional[List[int]] = None
        # The last job's info and, once it is closed, its final counters:
        # len(), classes, info and stats() answer from them without a job.
        self.info: Optional[Dict[str, Any]] = None
        self.final_stats: Optional[Dict[str, Any]] = None
        self.dataset_size: Optional[int] = None  # as the last job opened saw it
        # The dataset's resume key and figures, as the last job opened saw it.
        self.dataset_seen: Optional[Dict[str, Any]] = None
        self._left_out_warned = False  # shard samples the listing left out: warned once
        # A dataset object's galleyd item ids by dataset position, when a
        # DistributedSampler's positions are mapped to them.
        self._subset: Optional[List[int]] = None
        self._subset_resolved = config.folder is None

    # -- the loader's job ------------------------------------------------------------

    def open(self, epoch: int, epochs: int, resume: Optional[Dict[str, Any]],
             listed: Optional[List[int]]) -> Any:
        """The loader's job, opened at ``epoch`` for ``epochs`` epochs (and
        ``resume``'s point) when none is open; a listed loader's with
        ``listed``, the epoch's list."""
        if self.job is None:
            self.job, self.job_pid = self.open_job(epoch, epochs, resume, listed)
            self.job_epoch = epoch
            self.job_listed_epoch, self.job_listed = epoch, listed
            self.info = dict(self.job.info)
            self.final_stats = None
        return self.job

    def close_job(self, final_stats: bool = True) -> None:
        """Ends the loader's job, keeping its final counters for stats()."""
        if self.job is not None:
            if final_stats:
                try:
                    self.final_stats = self.job.stats()
                except _galley.GalleyError:
                    pass  # ended by galleyd: the counters before stay
            self.job.close()
            self.job = None
        self.job_epoch = None
        self.job_listed_epoch = self.job_listed = None

    def send_epoch_list(self, epoch: int, listed: List[int]) -> None:
        """Gives the loader's job ``listed``, epoch ``epoch``'s list, unless
        it has it: a job serves a listed epoch only once it has its list, and
        waits for it, so this seek drops nothing prepared."""
        if self.job_listed_epoch == epoch and self.job_listed == listed:
            return
        self.job.seek_epoch(epoch, listed)
        self.job_listed_epoch, self.job_listed = epoch, listed

    def epoch_ended(self, epoch: int) -> None:
        """The loader's job served the last batch of ``epoch``: it goes on
        with the next one."""
        self.job_epoch = epoch + 1

    def drop_job(self) -> None:
        """Forgets the loader's job, which galleyd no longer serves (its
        daemon went away), without asking it for anything."""
        self.job = None
        self.job_epoch = None

    def adopt_job(self, job: Any, pid: Optional[int], epoch: int,
                  listed: Optional[List[int]]) -> None:
        """Takes ``job``, reopened at ``epoch`` on a restarted daemon, as the
        loader's job."""
        self.job, self.job_pid, self.job_epoch = job, pid, epoch
        self.job_listed_epoch, self.job_listed = epoch, listed

    def close(self) -> None:
        """Ends the loader's job and forgets the daemon: the next job finds
        one again."""
        self.close_job()
        self.client = None

    # -- any job ------------------------------------------------------------------

    def open_job(self, start_epoch: int, epochs: int,
                 resume: Optional[Dict[str, Any]] = None,
                 items: Optional[List[int]] = None) -> Tuple[Any, Optional[int]]:
        """A job in galleyd from ``start_epoch`` for ``epochs`` epochs (0:
        endless), and the pid of the galleyd serving it. ``resume`` leaves out
        the first epoch's items yielded before (``batches``, and the
        ``consumed`` bitmap as hex). A listed loader's job takes ``items``,
        the first epoch's whole list; on a resume it goes on from the
        position the state stopped at (the list's items up to there were
        yielded, repeats included)."""
        config = self.config
        if self.client is None:
            self.client = _autostart.client(config.socket, config.autostart,
                                            config.request_seconds)
        self.resolve_subset()
        # The OpenJob body (docs/protocol.md), where an absent field takes
        # its default.
        spec = {key: value for key, value in self.spec.items() if value is not None}
        expires = None
        if "s3" in spec:  # resolved afresh: temporary credentials may have been renewed
            spec["s3"], expires = _s3_access.resolve_timed(
                what=(spec.get("shards") or [spec["dataset"]])[0])
        spec["start_epoch"] = start_epoch
        spec["epochs"] = epochs
        if resume is not None:
            spec["start_batch"] = resume["batches"]
            if items is None:  # a listed epoch leaves them out of its list
                spec["resume_consumed"] = resume["consumed"]
        if items is not None:
            spec["epoch_items"] = (items if resume is None
                                   else items[resume["batches"] * config.batch_size:])
        try:
            with _shards.IndexingProgress(
                    lambda: _autostart.client(config.socket, False, 5.0),
                    spec.get("shards") or spec["dataset"]):
                job = self.client.open_job(spec)
        except (_galley.ServerUnavailable, _galley.JobCancelled):
            # A daemon galley chose may have been exiting for idleness:
            # find (or start) one again, once.
            if not _autostart.may_retry(config.socket):
                raise
            self.client = _autostart.client(config.socket, config.autostart,
                                            config.request_seconds)
            job = self.client.open_job(spec)
        if "s3" in spec:
            # Resolved again while the job runs and sent to galleyd, so that
            # credentials that expire do not end an epoch (docs/access.md).
            _s3_refresh.CredentialRefresher(job, spec["s3"], expires,
                                            (spec.get("shards") or [spec["dataset"]])[0])
        info = job.info
        self.dataset_size = int(info["dataset_size"])
        self.dataset_seen = {
            "path": config.root, "content_key": info["content_key"],
            "mtimes_key": info["mtimes_key"], "items": self.dataset_size,
            "bytes": int(info["dataset_bytes"]), "classes": list(info["classes"])}
        self._notice_shared_order(job)
        self._notice_left_out(info)
        if config.fields is not None:
            config.fields.place_image(info.get("image_key", ""))
            config.fields.set_collations(info.get("field_collations", []))
        return job, self.daemon_pid(self.client)

    def daemon_pid(self, client: Any) -> Optional[int]:
        try:
            return int(client.query("status")["pid"])
        except _galley.GalleyError:
            return None

    def await_restarted_daemon(self, old_pid: Optional[int], lost: Exception,
                               epoch: int) -> Optional[int]:
        """A job's daemon went away: waits for a new galleyd on the same
        socket, within the loader's timeout (30 s when it is 0), and returns
        its pid, its client taken as the session's; None when none answered
        in time. ``lost`` is raised when the daemon that ended the job still
        runs: a real cancel (``galleyctl cancel``), not a restart."""
        deadline = time.monotonic() + (self.config.timeout or _RECONNECT_SECONDS)
        while True:
            try:
                candidate = _autostart.client(self.config.socket, self.config.autostart, 5.0)
                pid = self.daemon_pid(candidate)
            except _galley.ServerUnavailable:
                candidate, pid = None, None
            if pid is not None and pid == old_pid:
                raise lost
            if pid is not None:
                break
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.2)
        warn_once("reconnect", f"galley: galleyd restarted (pid {old_pid} -> {pid}); the job "
                               f"continues epoch {epoch} on the new daemon")
        self.client = candidate
        return pid

    @property
    def reconnect_seconds(self) -> float:
        return self.config.timeout or _RECONNECT_SECONDS

    # -- what only the listing can check ----------------------------------------------

    def resolve_subset(self) -> None:
        """A torchvision dataset object's files (its ``extensions=`` and
        ``is_valid_file=`` applied by torchvision, in the user's process) as
        galleyd's item ids, once, before the first job: the job is served
        exactly the files torch's DataLoader would read."""
        if self._subset_resolved:
            return
        ids = dataset_objects.subset_ids(self.config.folder, self.listing.samples)
        self._subset_resolved = True
        if ids is None:
            return
        if self.spec["ids"] is not None or self.spec["classes"]:
            raise ValueError(f"the {type(self.config.dataset).__name__} given holds {len(ids)} "
                             f"of the {len(self.listing)} files galleyd lists (its extensions= "
                             f"or is_valid_file=); give either it or classes=/indices=, not "
                             f"both")
        if self.config.listed:
            self._subset = ids  # a DistributedSampler yields positions in the dataset
        else:
            self.spec["ids"] = ids

    def sampler_items(self) -> List[int]:
        """list(sampler) of the loader's DistributedSampler for its current
        epoch, checked: ids of this dataset, in a list that fits one
        message."""
        self.resolve_subset()
        items = [operator.index(i) for i in self.config.distributed_sampler]
        # Checked here once a job told the dataset's size; else galleyd
        # refuses an id out of range, naming it.
        size = self.dataset_size
        if self._subset is not None:  # positions in the dataset object given
            size = len(self._subset)
            if items and not 0 <= min(items) <= max(items) < size:
                bad = next(i for i in items if not 0 <= i < size)
                raise ValueError(f"the DistributedSampler yields item {bad} but the dataset has "
                                 f"{size} items; build the sampler over loader.dataset")
            items = [self._subset[i] for i in items]
            size = self.dataset_size
        if items and size is not None and not 0 <= min(items) <= max(items) < size:
            bad = next(i for i in items if not 0 <= i < size)
            raise ValueError(f"the DistributedSampler yields item {bad} but the dataset has "
                             f"{size} items; build the sampler over loader.dataset (or a "
                             f"dataset of the same length)")
        if not items:
            raise ValueError("the DistributedSampler yields no items for this rank")
        # A decimal id and its comma per item: the list must fit one frame.
        if len(items) * (len(str(max(items))) + 1) > _LIST_BYTES:
            raise ValueError(f"the DistributedSampler yields {len(items)} items per epoch, more "
                             f"than one protocol message carries (each epoch's list travels in "
                             f"one of at most {_galley.max_request_bytes >> 20} MiB); give "
                             f"rank= and world_size= (galley's own split) instead of the "
                             f"sampler")
        return items

    def item_path(self, item: int) -> str:
        """An item's file (or shard member), for a message."""
        try:
            return self.listing.samples[item][0]
        except Exception:  # the listing is only the message's: never a second error
            return "path unknown"

    # -- notices ---------------------------------------------------------------------

    def _notice_left_out(self, info: Dict[str, Any]) -> None:
        """Shard samples the listing left out are never served: one warning
        per loader naming how many and the first ones."""
        count = int(info.get("left_out", 0))
        if not count or self._left_out_warned:
            return
        self._left_out_warned = True
        named = list(info.get("left_out_samples", []))
        more = f" and {count - 3} more" if count > 3 else ""
        warn_user(f"galley: {count} sample(s) of the shards are left out and never served "
                  f"(a member fields= names, the image or the label is missing or unusable, "
                  f"or a member is there twice): "
                  f"{'; '.join(named[:3])}{more}. loader.left_out_samples lists them; "
                  f"on_error='raise' refuses the dataset instead")

    def _notice_shared_order(self, job: Any) -> None:
        """Warns once per process when the job just opened joined jobs with
        other seeds under a policy that gives them one order (galleyd's
        sampler group: ``job_seeds``, ``orders_follow_seeds``)."""
        if not self.config.shuffle:
            return
        try:
            stats = job.stats()
        except _galley.GalleyError:
            return  # only a notice: never a reason to fail the job
        policy = stats.get("job", {}).get("policy")
        for group in stats.get("samplers", []):
            if (group.get("policy") == policy and group.get("jobs", 0) > 1
                    and group.get("job_seeds", 0) > 1
                    and group.get("orders_follow_seeds") is False):
                warn_once("shared_order", (
                    f"galley.DataLoader: this job (seed={self.config.seed}) runs beside "
                    f"{group['jobs'] - 1} other job(s) on {self.config.root} with other seeds, "
                    f"and policy {policy!r} gives jobs on the same items one shared order "
                    f"whatever their seeds: that is how each item is read and decoded once for "
                    f"all of them. seed= still decides this job's augmentations, not its order. "
                    f"For an order of its own per seed (a seed sweep that should vary the data "
                    f"order), pass policy=\"independent\"; the jobs then share only through the "
                    f"cache (docs/sampling.md, section 1.2, gives the cost)"))
                return
