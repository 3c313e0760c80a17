"""Loads the compiled extension galley._galley, or explains why it cannot.

The extension is built for one Python (its ABI tag is in the file name, e.g.
``_galley.cpython-311-x86_64-linux-gnu.so``). Importing the package under
another Python, or from a source tree where it was never built, would
otherwise fail with a bare ``No module named 'galley._galley'``.
"""

import pathlib
import sys
import sysconfig

_BUILD_HINT = ("Install galley into this environment with `python -m pip install <galley "
               "checkout>` (builds the extension for this Python), or build it in the "
               "checkout for this interpreter with "
               "`cmake -S . -B build -DPython_EXECUTABLE={python} && cmake --build build "
               "--target _galley`.")


def load():
    try:
        from . import _galley
    except ImportError as error:
        raise ImportError(_explain(error)) from error
    return _galley


def _explain(error):
    here = pathlib.Path(__file__).resolve().parent
    wanted = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    found = sorted(p.name for p in here.glob("_galley*"))
    python = sys.executable or "python"
    version = f"{sys.implementation.name} {sys.version.split()[0]}"
    if not found:
        what = f"galley's compiled extension is missing from {here}."
    elif not any(name.endswith(wanted) for name in found):
        what = (f"galley's compiled extension in {here} ({', '.join(found)}) was built for "
                f"another Python; this one is {version} at {python} and needs a file ending "
                f"in {wanted}.")
    else:
        what = f"galley's compiled extension in {here} failed to load: {error}."
    return what + " " + _BUILD_HINT.format(python=python)
