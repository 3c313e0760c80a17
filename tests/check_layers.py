#!/usr/bin/env python3
"""The libraries' include arrows point down only.

Each folder below is a library (docs/architecture.md, "Targets"); a source
file or header in it may include the public headers of its own library and
of the libraries it lists, and nothing of a library above it. A header's
library is the first folder after `galley/` in its include path. Run by
ctest (`layering`); prints every include that points up and exits 1.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# folder -> the galley/<x>/ include folders it may use; the plain galley/*.h
# headers (status, ids, mutex, ...) are galley_base's, below everything.
ALLOWED = {
    "client": set(),
    "cache": {"cache"},
    "server/image": {"image"},
    "server/sampler": {"sampler", "cache"},
    "server/objectstore": {"objectstore"},
    "server/dataset": {"dataset", "image", "objectstore"},
    "server/snapshots": {"snapshots"},
    "server/logging": {"logging"},
    "server/remote": {"remote", "cache", "dataset", "snapshots", "logging"},
    "server/scheduling": {"scheduling", "cache", "dataset", "image", "sampler", "snapshots",
                          "logging"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"galley/([a-z_]+)/')


def main() -> int:
    problems = []
    for folder, allowed in ALLOWED.items():
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".h", ".cc"):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                match = INCLUDE.match(line)
                if match and match.group(1) not in allowed:
                    problems.append(f"{path.relative_to(ROOT)}:{number}: {folder} includes "
                                    f"galley/{match.group(1)}/, a library above it")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
