"""A loader's epochs: which one the next loop takes, the passes over them,
what they yielded and where a state resumes.

Every ``iter(loader)`` is a pass (EpochPass) over one epoch. The first to
run is the loader's main pass: it takes the loader's next epoch from the
loader's job, counts in ``completed_epochs`` and is what ``state_dict()``
records. One started while it runs is a side pass over a job of its own,
over the epoch the next loop will take. Epochs starts, finishes and abandons
passes, counts substituted samples, reopens a pass's job on a restarted
galleyd, and builds and loads the loader's state (galley._resume).

Thread-safety: none; used by the thread that iterates the loader.
"""

from __future__ import annotations

import copy
import weakref
from typing import Any, Dict, List, Optional

from . import _galley
from . import _resume
from ._config import LoaderConfig
from ._session import JobSession
from ._warn import warn_user

__all__ = ["EpochPass", "Epochs"]


class EpochPass:
    """One iterator's walk over one epoch (module docstring)."""

    def __init__(self, epoch: int, main: bool, job: Any, daemon_pid: Optional[int],
                 items: Optional[List[int]] = None) -> None:
        self.epoch = epoch
        self.main = main
        self.job = job
        self.daemon_pid = daemon_pid  # the galleyd serving the job
        self.dataset_size = int(job.info["dataset_size"])
        self.batches = 0  # batches yielded
        self.consumed = bytearray((self.dataset_size + 7) // 8)  # bitmap of item ids yielded
        self.held: List[weakref.ref] = []  # its batches' shared memory still alive
        self.skipped = 0  # samples substituted in this pass
        self.first_skipped = ""  # galleyd's message for the first of them
        self.finished = False  # its last batch came, or it was abandoned
        self.daemon_lost = False  # its daemon went away and none came back
        self.items = items  # a listed epoch's whole list (a DistributedSampler's)

    def count_yielded(self, items: List[int]) -> None:
        """A batch of ``items`` reached the loop."""
        for item in items:
            self.consumed[item >> 3] |= 1 << (item & 7)
        self.batches += 1


class Epochs:
    """The loader's epochs and passes (module docstring)."""

    def __init__(self, config: LoaderConfig, session: JobSession) -> None:
        self.config = config
        self.session = session
        self.epoch = 0             # the epoch the next loop yields (set_epoch)
        self.completed = 0         # main passes that ran to the end of their epoch
        self.skipped = 0
        self.skipped_files: Dict[str, None] = {}  # in the order they failed
        self.resume: Optional[Dict[str, Any]] = None  # a loaded state not yet resumed
        self.main: Optional[EpochPass] = None  # the main pass under way
        # The pass state_dict() records: the main pass under way, or one whose
        # daemon went away and did not come back.
        self.recorded: Optional[EpochPass] = None

    @property
    def done(self) -> bool:
        """The loader ran its ``epochs=``: a loop yields nothing."""
        return self.config.epochs is not None and self.completed >= self.config.epochs

    def epochs_left(self) -> int:
        """Epochs galleyd prepares for the loader's job: those left to run
        (at least the one about to start), or 0, endless."""
        epochs = self.config.epochs
        return 0 if epochs is None else max(1, epochs - self.completed)

    # -- the loader's job -------------------------------------------------------------

    def open(self, listed: Optional[List[int]] = None) -> Any:
        """The loader's job, opened at the next loop's epoch (and a loaded
        state's resume point) when none is open. A listed loader's job is
        opened with ``listed``, the epoch's list (default: the sampler's
        list now)."""
        session = self.session
        if session.job is None:
            resume = None
            if self.resume is not None:
                resume = {"batches": self.resume["batches"],
                          "consumed": self.resume["consumed"]}
            if self.config.listed and listed is None:
                listed = session.sampler_items()
            session.open(self.epoch, self.epochs_left(), resume, listed)
        return session.job

    def job_info(self) -> Dict[str, Any]:
        """The loader's job's info, or the last one's: no job is opened for it
        once one has been."""
        if self.session.job is not None:
            return self.session.job.info
        if self.session.info is not None:
            return self.session.info
        return self.open().info

    def stats(self) -> Dict[str, Any]:
        """The loader's job's counters; once it has ended, its final ones."""
        if self.session.job is None and self.session.final_stats is not None:
            return copy.deepcopy(self.session.final_stats)
        return self.open().stats()

    # -- passes ---------------------------------------------------------------------

    def _sampler_epoch(self) -> int:
        sampler = self.config.distributed_sampler
        return self.epoch if sampler is None else int(getattr(sampler, "epoch", self.epoch))

    def start_pass(self) -> EpochPass:
        """The pass of an ``iter(loader)``: the main pass, or a side pass
        when the main one runs, so that neither sees the other's batches."""
        return self._start_main_pass() if self.main is None else self._start_side_pass()

    def _start_main_pass(self) -> EpochPass:
        """The loop that takes the loader's next epoch, from its own job."""
        session = self.session
        resume = self.resume
        if self.config.distributed_sampler is not None:
            sampler_epoch = self._sampler_epoch()
            if resume is not None and sampler_epoch != self.epoch:
                raise ValueError(f"the loader resumes epoch {self.epoch} but its "
                                 f"DistributedSampler is at epoch {sampler_epoch}; call "
                                 f"sampler.set_epoch({self.epoch}) first")
            self.epoch = sampler_epoch
        epoch = self.epoch
        listed = session.sampler_items() if self.config.listed else None
        if resume is not None and listed is not None:
            _resume.check_same_list(resume["state"], listed, epoch)
        if resume is not None or session.job_epoch != epoch:
            # Reopened at this epoch (and resume point) rather than sought:
            # a seek would drop what galleyd prepared for the other epoch.
            session.close_job()
        job = self.open(listed)
        if resume is not None:
            _resume.check_same_dataset(resume["state"], session.dataset_seen, warn=False)
        self.resume = None
        self.epoch = epoch + 1  # the next loop is the next epoch, finished or not
        walk = EpochPass(epoch, main=True, job=job, daemon_pid=session.job_pid, items=listed)
        if resume:
            walk.batches = resume["batches"]
            walk.consumed[:] = bytes(resume["state"]["consumed"]).ljust(
                len(walk.consumed), b"\0")[:len(walk.consumed)]
        self.main = self.recorded = walk
        if listed is not None:
            try:
                session.send_epoch_list(epoch, listed)
            except (_galley.ServerUnavailable, _galley.JobCancelled) as lost:
                try:
                    self.reopen_after_restart(walk, lost)  # opened with the list
                except BaseException:
                    self.abandon_pass(walk)
                    raise
        return walk

    def _start_side_pass(self) -> EpochPass:
        """An iterator started while the main pass runs: the epoch the next
        loop will take (a DistributedSampler's epoch, with one), over a job of
        its own that ends with that epoch."""
        epoch = self._sampler_epoch()
        listed = self.session.sampler_items() if self.config.listed else None
        job, pid = self.session.open_job(epoch, epochs=1, items=listed)
        return EpochPass(epoch, main=False, job=job, daemon_pid=pid, items=listed)

    def finish_pass(self, walk: EpochPass) -> None:
        """The pass has its epoch's last batch: it no longer holds the loader's
        job, which goes on with the next epoch unless that was the last."""
        walk.finished = True
        self._warn_skipped(walk)
        if not walk.main:
            walk.job.close()  # its only epoch is over
            return
        self.main = None
        self.recorded = None  # a state taken now resumes at the next epoch
        self.completed += 1
        self.session.epoch_ended(walk.epoch)
        if self.done:
            self.session.close_job()  # galleyd prepared nothing past this epoch

    def abandon_pass(self, walk: EpochPass) -> None:
        """An iterator left before the end of its epoch (``break``, garbage
        collected, an error): its job is closed, so galleyd stops preparing
        for it at once; the next loop opens a new one at its own epoch."""
        walk.finished = True
        self._warn_skipped(walk)
        if not walk.main:
            walk.job.close()
            return
        self.main = None
        # A state taken now resumes the next loop's epoch; unless the daemon
        # went away, when it keeps this pass.
        self.recorded = walk if walk.daemon_lost else None
        self.session.close_job()

    def end_pass_job(self, walk: EpochPass) -> None:
        """galleyd ended the pass's job: drop it without asking for more."""
        if walk.main:
            self.session.close_job(final_stats=False)
        else:
            walk.job.close()

    def reopen_after_restart(self, walk: EpochPass, lost: Exception) -> Any:
        """The pass's daemon went away mid-epoch. If a new galleyd answers on
        the same socket within the loader's timeout (30 s by default), the
        pass's job is opened there and the epoch goes on from where it was:
        the items already yielded are left out, as on a resume, so every item
        still comes exactly once. A job cancelled by a daemon that is still
        up (``galleyctl cancel``) is not reopened: ``lost`` is raised."""
        session = self.session
        try:
            walk.job.close()
        except _galley.GalleyError:
            pass
        if walk.main:
            session.drop_job()
        pid = session.await_restarted_daemon(walk.daemon_pid, lost, walk.epoch)
        if pid is None:
            walk.daemon_lost = True  # state_dict() resumes this epoch exactly
            raise _galley.ServerUnavailable(
                f"galleyd went away during epoch {walk.epoch} ({lost}) and none answered "
                f"again within {session.reconnect_seconds:g} s; loader.state_dict() holds your "
                f"place: save it, and iterate again (or load_state_dict) once galleyd "
                f"runs") from lost
        # OpenJob's resume_consumed form: the same bitmap, as hex.
        resume = {"batches": walk.batches, "consumed": bytes(walk.consumed).hex()}
        job, walk.daemon_pid = session.open_job(
            walk.epoch, self.epochs_left() if walk.main else 1, resume, walk.items)
        if int(job.info["dataset_size"]) != walk.dataset_size:
            job.close()
            raise ValueError(f"galleyd restarted during epoch {walk.epoch} and the dataset now "
                             f"has {job.info['dataset_size']} items: the epoch cannot go on "
                             f"exactly; iterate again to start the next one")
        walk.job = job
        if walk.main:
            session.adopt_job(job, walk.daemon_pid, walk.epoch, walk.items)
        return job

    # -- substituted samples ------------------------------------------------------------

    def note_skipped(self, walk: EpochPass, count: int, first_error: str) -> None:
        self.skipped += count
        walk.skipped += count
        if not walk.first_skipped:
            walk.first_skipped = first_error
        # galleyd's message is "<path>: <reason>".
        self.skipped_files.setdefault(first_error.split(": ", 1)[0])
        if self.config.on_error == "raise":
            raise _galley.SampleError(
                f"{count} sample(s) of epoch {walk.epoch} failed: {first_error}")

    def _warn_skipped(self, walk: EpochPass) -> None:
        """One warning per pass over an epoch that substituted samples."""
        if walk.skipped and self.config.on_error == "skip":
            warn_user(
                f"galley: {walk.skipped} sample(s) of epoch {walk.epoch} could not be read or "
                f"decoded and were replaced by other items of the epoch (on_error='skip'); "
                f"first: {walk.first_skipped}. loader.skipped_files lists the files; "
                f"on_error='raise' raises instead")

    # -- state ------------------------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """The loader's state (DataLoader.state_dict)."""
        if self.resume is not None:  # loaded, not iterated yet: pass it on unchanged
            return dict(self.resume["state"])
        epoch_list = None
        if self.recorded is not None:
            epoch, batches = self.recorded.epoch, self.recorded.batches
            consumed = bytes(self.recorded.consumed)
            if self.recorded.items is not None:
                epoch_list = _resume.list_digest(self.recorded.items)
        else:
            epoch, batches, consumed = self.epoch, 0, b""
        if self.session.dataset_seen is None:
            self.open()
        dataset = dict(self.session.dataset_seen)
        config = self.config
        return {
            "version": _resume.STATE_VERSION, "epoch": epoch, "batches_yielded": batches,
            "consumed": consumed, "completed_epochs": self.completed, "skipped": self.skipped,
            # Named by content, so that a copy under another path resumes; the
            # path is only shown in messages.
            "dataset": dataset, "batch_size": config.batch_size, "shuffle": config.shuffle,
            "seed": config.seed, "rank": config.rank, "world_size": config.world_size,
            "shard_seed": config.shard_seed, "local_world_size": config.local_world_size,
            "drop_last": config.drop_last, "shard_drop_last": self.session.spec["shard_drop_last"],
            "subset": [self.session.spec["classes"], self.session.spec["ids"]],
            # Item ids are positions in the dataset: a dataset that changed since
            # the checkpoint cannot be resumed exactly.
            "dataset_size": dataset["items"],
            # Whose split: galley's, or a DistributedSampler's lists, which
            # resume by position in the epoch's list (epoch_list: its digest).
            "split": "sampler" if config.listed else "galley", "epoch_list": epoch_list,
        }

    def checked_state(self, state: Dict[str, Any]) -> Dict[str, Any]:
        """``state`` completed and checked against this loader, before
        anything of the loader changes (DataLoader.load_state_dict)."""
        _resume.check_version(state)
        mine = self.state_dict() if self.resume is None else self.resume["state"]
        return _resume.check_same_loader(state, mine)

    def resume_from(self, state: Dict[str, Any]) -> None:
        """The next loop continues ``state``'s epoch (a checked state, the
        loader's job closed)."""
        # The OpenJob form of the consumed items: the same bitmap, as hex.
        consumed = bytes(state["consumed"]).hex()
        self.epoch = int(state["epoch"])
        self.completed = int(state["completed_epochs"])
        self.skipped = int(state["skipped"])
        self.recorded = None
        self.resume = {"state": dict(state), "batches": int(state["batches_yielded"]),
                       "consumed": consumed}
