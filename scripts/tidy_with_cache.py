#!/usr/bin/env python3
"""Runs clang-tidy over the C++ files a compile_commands.json names, skipping
the files whose result is known already: scripts/check_tidy.sh calls it.

A file that passed leaves an empty entry in the cache folder, named by a hash
of everything its result depends on: the clang-tidy and compiler versions,
.clang-tidy, the file's compile command, and its preprocessed text with
comments (-E -C: every header it includes, and NOLINT comments too). The
clone's and the build folder's paths are replaced by fixed names first, so a
fresh clone of the same sources elsewhere finds the entries of an earlier
one, which is what makes a CI run on a warm machine quick. Only passes are
kept: a file with a finding, or one clang-tidy could not check, is checked
again on every run. Entries unused for 30 days are removed.

    tidy_with_cache.py ROOT BUILD_DIR FILE_REGEX CACHE_DIR

CACHE_DIR "off" checks every file. Exit status 1 when a file has a finding.
"""

import concurrent.futures
import hashlib
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

TIDY = os.environ.get("GALLEY_CLANG_TIDY", "clang-tidy-14")
# Part of every key: a change to how keys are made must not match old entries.
KEY_FORMAT = "galley-tidy-1"
UNUSED_DAYS = 30


def version_of(program):
    done = subprocess.run([program, "--version"], capture_output=True, text=True, check=True)
    return done.stdout


def compile_entries(build_dir, pattern):
    """The compile command of each file matching `pattern`, once per file."""
    entries = {}
    for entry in json.loads((build_dir / "compile_commands.json").read_text()):
        path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
        if re.search(pattern, path) and path not in entries:
            arguments = entry.get("arguments") or shlex.split(entry["command"])
            entries[path] = (entry["directory"], arguments)
    return entries


def preprocess_command(arguments):
    """The compile command turned into one that writes the preprocessed text,
    comments kept, to stdout."""
    command, skip = [], False
    for argument in arguments:
        if skip:
            skip = False
        elif argument == "-o":
            skip = True
        elif argument != "-c" and not argument.startswith("-o"):
            command.append(argument)
    return command + ["-E", "-C"]


class Keys:
    def __init__(self, root, build_dir, compilers):
        self.root, self.build_dir = str(root), str(build_dir)
        self.common = hashlib.sha256()
        for part in (KEY_FORMAT, version_of(TIDY), (root / ".clang-tidy").read_text()):
            self.common.update(part.encode() + b"\0")
        self.compilers = {compiler: version_of(compiler) for compiler in compilers}

    def normalised(self, text):
        # The build folder may sit inside the clone: replace it first.
        return text.replace(self.build_dir, "@BUILD@").replace(self.root, "@ROOT@")

    def key(self, directory, arguments):
        """The file's key, or None when it cannot be preprocessed (then
        clang-tidy runs and reports what is wrong)."""
        done = subprocess.run(preprocess_command(arguments), cwd=directory, capture_output=True)
        if done.returncode != 0:
            return None
        digest = self.common.copy()
        digest.update(self.compilers[arguments[0]].encode() + b"\0")
        digest.update(self.normalised(shlex.join(arguments)).encode() + b"\0")
        digest.update(self.normalised(done.stdout.decode("utf-8", "surrogateescape")).encode(
            "utf-8", "surrogateescape"))
        return digest.hexdigest()


def run_tidy(build_dir, path):
    """Whether clang-tidy passed the file, whether it printed no diagnostic
    at all (only then is the pass kept), and what it printed."""
    done = subprocess.run([TIDY, "-p", str(build_dir), "--quiet", path], capture_output=True,
                          text=True)
    # "N warnings generated." counts what the checks and the header filter
    # left out: not a finding.
    output = re.sub(r"(?m)^\d+ warnings? generated\.\n", "", done.stdout + done.stderr)
    return done.returncode == 0, not re.search(r": (warning|error): ", output), output


def prune(cache):
    horizon = time.time() - UNUSED_DAYS * 86400
    for entry in cache.iterdir():
        try:
            if entry.stat().st_mtime < horizon:
                entry.unlink()
        except OSError:
            pass


def main():
    root, build_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    pattern, cache_arg = sys.argv[3], sys.argv[4]
    cache = None if cache_arg == "off" else pathlib.Path(cache_arg)
    entries = compile_entries(build_dir, pattern)
    if not entries:
        print(f"tidy_with_cache.py: no file in {build_dir}/compile_commands.json matches "
              f"{pattern}", file=sys.stderr)
        return 2
    jobs = os.cpu_count() or 1
    keys = {}
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        making = Keys(root, build_dir, {arguments[0] for _, arguments in entries.values()})
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            keys = dict(zip(entries, pool.map(lambda e: making.key(*e), entries.values())))
    stale = []
    for path in entries:
        entry = cache / keys[path] if cache is not None and keys[path] else None
        if entry is not None and entry.exists():
            os.utime(entry)  # used: kept another 30 days
        else:
            stale.append(path)
    failed = []
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        results = pool.map(lambda path: run_tidy(build_dir, path), stale)
        for path, (passed, silent, output) in zip(stale, results):
            if output.strip():
                print(output, end="" if output.endswith("\n") else "\n")
            if not passed:
                failed.append(path)
            elif silent and cache is not None and keys[path]:
                (cache / keys[path]).touch()
    if cache is not None:
        prune(cache)
    print(f"clang-tidy: {len(entries)} file(s): {len(entries) - len(stale)} unchanged since they "
          f"passed, {len(stale)} checked")
    for path in failed:
        print(f"clang-tidy: findings in {os.path.relpath(path, root)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
