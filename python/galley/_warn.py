"""The loader's warnings, each pointed at the user's line.

A warning names the line of the training script that led to it (the
``DataLoader(...)`` call, the ``for`` loop, ``load_state_dict``), whichever
of galley's functions raised it: the frames of the galley package are
skipped, so moving code between its modules never moves a warning.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn_user", "warn_once", "WARNED"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Keys of the warnings given once per process (warn_once).
WARNED: set = set()


def _user_stacklevel() -> int:
    """The stacklevel of warnings.warn, called from the caller of this
    function, that names the first frame outside the galley package."""
    level = 2  # the frame that calls warnings.warn
    frame = sys._getframe(2)
    while (frame is not None
           and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE)):
        frame = frame.f_back
        level += 1
    return level


def warn_user(message: str) -> None:
    """A UserWarning at the user's line that led to it."""
    warnings.warn(message, UserWarning, stacklevel=_user_stacklevel())


def warn_once(key: str, message: str) -> None:
    """One warning per `key` and process, however many loaders are made."""
    if key not in WARNED:
        WARNED.add(key)
        warnings.warn(message, UserWarning, stacklevel=_user_stacklevel())
