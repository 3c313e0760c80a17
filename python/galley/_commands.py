"""The `galleyd` and `galleyctl` console scripts of the wheel: they run the
binaries shipped inside the package (galley/bin/), so both land on the
environment's PATH with `pip install`."""

import os
import pathlib
import sys


def _run(name):
    binary = pathlib.Path(__file__).resolve().parent / "bin" / name
    if not binary.exists():
        sys.exit(f"{name}: this galley package was built without the daemon "
                 f"(GALLEY_WHEEL_DAEMON=OFF); install the node package or a full wheel")
    os.execv(str(binary), [str(binary)] + sys.argv[1:])


def galleyd():
    _run("galleyd")


def galleyctl():
    _run("galleyctl")
