"""Keeps a running S3 job's credentials fresh (docs/access.md, "Temporary
credentials").

Temporary credentials (STS session tokens, SSO, a credential_process)
expire, often within an hour, and an epoch over a large dataset can outlive
them. While a job runs, a thread of the job's process resolves its
credentials again, as they were resolved for its open (galley/s3_access.py),
and sends them to galleyd over the job's own connection (RefreshCredentials,
docs/protocol.md): galleyd HEADs every shard with them and only then signs
the set's reads with them.

When: ``REFRESH_BEFORE_SECONDS`` (10 minutes) before the Expiration a
credential_process gave, at least ``MIN_INTERVAL_SECONDS`` after the last
resolve; at once when the shared credentials or config file changes (size or
mtime) or the process's AWS_* environment does; and every
``RECHECK_SECONDS`` (5 minutes) in any case. Credentials that differ from
those last sent are sent at once; the same ones again every
``RECHECK_SECONDS``, since galleyd may have refused them (a store that did
not accept new keys yet) and says so only in the job's counters. A resolve that fails (a credential_process
exiting non-zero) is logged on the ``galley`` logger without the
credentials, and tried again ``MIN_INTERVAL_SECONDS`` later; the job keeps
the credentials it has meanwhile.

The thread ends with its job: it holds the job only weakly, and stops when a
send says the job is closed or galleyd went away.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any, Dict, Optional, Tuple

from . import _galley
from . import s3_access as _s3_access

__all__ = ["CredentialRefresher", "REFRESH_BEFORE_SECONDS", "RECHECK_SECONDS"]

# How long before its Expiration a credential is replaced.
REFRESH_BEFORE_SECONDS = 600.0
# Credentials without an Expiration are resolved again this often.
RECHECK_SECONDS = 300.0
# The files and the environment are looked at this often; and no two
# resolves run closer than this (a credential_process is not run in a loop).
MIN_INTERVAL_SECONDS = 5.0

_log = logging.getLogger("galley")


def _environment_state() -> Tuple[Tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))


def _file_state(path: str) -> Optional[Tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


class CredentialRefresher:
    """One job's refresher thread. ``access`` and ``expires`` are what the
    job was opened with; ``what`` names the dataset in errors."""

    def __init__(self, job: Any, access: Dict[str, object], expires: Optional[float],
                 what: str) -> None:
        self._job = weakref.ref(job)
        self._sent = dict(access)
        self._expires = expires
        self._what = what
        self._resolved_at = self._sent_at = time.time()
        self._sources = self._source_state()
        self._failure: Optional[str] = None
        self._thread = threading.Thread(target=self._run, name="galley-s3-refresh", daemon=True)
        self._thread.start()

    def _source_state(self) -> Tuple[object, ...]:
        credentials, config = _s3_access.watched_files()
        return (_environment_state(), _file_state(credentials), _file_state(config))

    def _due(self) -> float:
        if self._failure is not None:
            return self._resolved_at + MIN_INTERVAL_SECONDS
        if self._expires is not None:
            return max(self._resolved_at + MIN_INTERVAL_SECONDS,
                       min(self._expires - REFRESH_BEFORE_SECONDS,
                           self._resolved_at + RECHECK_SECONDS))
        return self._resolved_at + RECHECK_SECONDS

    def _run(self) -> None:
        while True:
            time.sleep(min(MIN_INTERVAL_SECONDS, max(0.0, self._due() - time.time())))
            if self._job() is None:
                return
            sources = self._source_state()
            if time.time() < self._due() and sources == self._sources:
                continue
            self._sources = sources
            self._resolved_at = time.time()
            try:
                access, self._expires = _s3_access.resolve_timed(what=self._what)
            except (PermissionError, ValueError, OSError) as e:
                # The messages name places and commands, never credentials.
                message = str(e)
                if message != self._failure:
                    _log.warning("galley: the S3 credentials could not be resolved again; the "
                                 "job keeps those it has: %s", message)
                self._failure = message
                continue
            self._failure = None
            if access == self._sent and self._resolved_at < self._sent_at + RECHECK_SECONDS:
                continue
            job = self._job()
            if job is None:
                return
            try:
                job.refresh_credentials(access)
            except _galley.GalleyError:
                return  # the job is closed, or galleyd went away
            finally:
                del job
            self._sent, self._sent_at = access, self._resolved_at
