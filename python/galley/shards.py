"""Expanding ``dataset=`` into a list of tar shards, as the user.

``galley.DataLoader(dataset=...)`` accepts, besides an ImageFolder root or a
manifest file, tar shards in the WebDataset layout given as:

* a list (or tuple) of tar paths, served in the order given;
* a brace pattern, ``/data/in1k/train-{000000..001023}.tar`` (numeric ranges
  keep the width of the first bound, as WebDataset's ``braceexpand`` does;
  ``{a,b}`` lists alternatives), in the order expanded;
* a glob, ``/data/in1k/train-*.tar``, sorted by name;
* a folder holding ``*.tar`` files and no sub-folders, sorted by name;
* one ``.tar`` path.

The client expands patterns with the user's own view of the file system and
sends the daemon the resolved absolute paths; jobs whose lists resolve to the
same files share work however they were spelled. Compressed tars and URLs
are refused here, with what to do instead.

Shards kept in S3-compatible storage are named ``s3://bucket/key.tar``: a
list of such URLs, one URL, a brace pattern over them
(``s3://bucket/train-{000000..000099}.tar``), or a glob
(``s3://bucket/train-*.tar``), which galleyd expands by listing the bucket
with the job's own credentials (the client has no listing of its own), as
Python's glob matches a path. Any other ``s3://`` URL is not shards: a
prefix read as an ImageFolder, or a manifest object.
"""

import glob
import os
import re

_COMPRESSED = (".tar.gz", ".tgz", ".tar.zst", ".tar.zstd", ".tar.bz2", ".tar.xz")
_BRACE = re.compile(r"\{([^{}]*)\}")


def is_object_url(path):
    """Whether ``path`` names an object in S3-compatible storage."""
    return isinstance(path, str) and path.startswith("s3://")


def _check_name(path):
    lower = path.lower()
    if not is_object_url(path) and ("://" in path or lower.startswith("pipe:")):
        raise ValueError(f"dataset {path!r} is a URL or pipe: galley reads local (or mounted) "
                         "files and s3:// objects; copy the shards to local storage or to "
                         "S3-compatible storage, or mount them")
    if lower.endswith(_COMPRESSED):
        raise ValueError(f"shard {path!r} is compressed; a compressed tar cannot be read by "
                         "byte range: decompress it to a plain .tar first (e.g. gunzip, unzstd)")


def expand_braces(pattern):
    """Expands ``{a..b}`` numeric ranges and ``{x,y}`` alternatives, left to
    right, like WebDataset's ``braceexpand``."""
    match = _BRACE.search(pattern)
    if match is None:
        return [pattern]
    head, body, tail = pattern[:match.start()], match.group(1), pattern[match.end():]
    range_match = re.fullmatch(r"(-?\d+)\.\.(-?\d+)", body)
    if range_match:
        first, last = range_match.group(1), range_match.group(2)
        width = len(first) if first.lstrip("-").startswith("0") else 0
        lo, hi = int(first), int(last)
        step = 1 if hi >= lo else -1
        options = [str(i).zfill(width) for i in range(lo, hi + step, step)]
    else:
        options = body.split(",")
    return [item for option in options for item in expand_braces(head + option + tail)]


def resolve_dataset(dataset):
    """Returns ``(name, shards)``: ``shards`` is the list of absolute shard
    paths, or None when ``dataset`` is an ImageFolder root or a manifest (then
    ``name`` is its path, unchanged)."""
    if isinstance(dataset, (list, tuple)):
        for p in dataset:
            if not isinstance(p, (str, os.PathLike)):
                raise TypeError("dataset must be a root path (ImageFolder or manifest), a "
                                "torchvision ImageFolder, or tar shards (a list of paths, a glob, "
                                f"a brace pattern or a folder); got a list holding "
                                f"{type(p).__name__}")
        paths = [os.fspath(p) for p in dataset]
        if not paths:
            raise ValueError("dataset is an empty list of shards")
        for p in paths:
            _check_name(p)
        objects = sum(is_object_url(p) for p in paths)
        if objects:
            if objects != len(paths):
                raise ValueError("dataset mixes s3:// objects and files; a dataset is kept in "
                                 "one place")
            return paths[0], list(paths)
        shards = [os.path.abspath(p) for p in paths]
        return shards[0], shards
    path = os.fspath(dataset)
    _check_name(path)
    if is_object_url(path):
        shards = _object_shards(path)
        return path, shards
    if _BRACE.search(path):
        shards = [os.path.abspath(p) for p in expand_braces(path)]
        for p in shards:
            _check_name(p)
        return path, shards
    if glob.has_magic(path):
        shards = sorted(os.path.abspath(p) for p in glob.glob(path))
        if not shards:
            raise FileNotFoundError(f"no file matches {path!r}")
        for p in shards:
            _check_name(p)
        return path, shards
    if os.path.isdir(path):
        entries = list(os.scandir(path))
        tars = sorted(e.path for e in entries if e.name.endswith(".tar") and e.is_file())
        if not any(e.is_dir() for e in entries):
            if tars:
                return path, [os.path.abspath(p) for p in tars]
            for e in entries:
                _check_name(e.path)
        return path, None
    if path.endswith(".tar"):
        return path, [os.path.abspath(path)]
    return path, None


def _object_shards(url):
    """The shard URLs an ``s3://`` dataset names: a brace pattern expanded,
    or one ``.tar`` object."""
    if _BRACE.search(url):
        shards = expand_braces(url)
        for shard in shards:
            _check_name(shard)
        return shards
    if glob.has_magic(url):
        if url.endswith("/"):
            raise ValueError(f"dataset {url!r}: a glob over s3:// matches objects (tar shards, "
                             "s3://bucket/train-*.tar); name one prefix, s3://bucket/prefix/, "
                             "for a folder of images")
        return [url]  # galleyd lists the bucket with the job's credentials
    if url.endswith(".tar"):
        return [url]
    return None  # a prefix read as an ImageFolder, or a manifest object


def names_objects(path):
    """Whether ``path`` is a local manifest whose image cells name ``s3://``
    objects (its first 64 KiB say so): the job then sends its S3 access."""
    try:
        with open(path, "rb") as f:
            return b"s3://" in f.read(1 << 16)
    except OSError:
        return False


def _clock(seconds):
    seconds = int(seconds)
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


def format_progress(entry):
    """One progress line, as tqdm writes it, from a "datasets" query's
    ``indexing`` entry: a shard set (shards indexed of the total), an
    ImageFolder being walked (files listed so far, whose total is unknown
    until the walk ends, and class folders walked) or a manifest (lines read
    of the total)."""
    unit = entry.get("unit", "shards")
    total = entry.get("total") or entry.get("shards") or 0
    done, rate = int(entry["done"]), float(entry["rate"])
    path = entry.get("path") or entry["first_shard"]
    if unit == "shards":
        what = f"indexing {os.path.basename(path)}…"
    else:
        what = f"listing {os.path.basename(path.rstrip('/')) or path}"
    if total:
        left = float(entry.get("seconds_left", -1))
        left_text = "?" if left < 0 else _clock(left)
        return (f"galley: {what}: {done}/{total} {unit} [{100 * done // max(total, 1)}%, "
                f"{rate:.1f} {unit}/s, {left_text} left]")
    text = f"galley: {what}: {done} {unit} [{_clock(entry.get('seconds', 0))}, {rate:.1f} {unit}/s"
    if entry.get("classes"):
        text += f", class folder {entry.get('classes_done', 0)}/{entry['classes']}"
    return text + "]"


def _where(path):
    """What names a dataset's listing in galleyd's progress: a path
    resolved, or an s3:// URL without its trailing '/'."""
    if is_object_url(path):
        return path.rstrip("/")
    return os.path.realpath(path)


class IndexingProgress:
    """While a job waits for galleyd to list its dataset (index tar shards,
    walk an ImageFolder, read a manifest), prints the daemon's progress on a
    terminal (stderr, rewritten in place) after one second. ``path`` is the
    dataset's root or manifest, or its list of shards. ``GALLEY_PROGRESS=1``
    prints even when stderr is not a terminal; ``GALLEY_PROGRESS=0`` never
    prints."""

    def __init__(self, connect, path, stream=None, delay=1.0, interval=0.5):
        import sys
        self._connect, self._stream = connect, stream or sys.stderr
        setting = os.environ.get("GALLEY_PROGRESS", "")
        wanted = setting == "1" or (setting != "0" and self._stream.isatty())
        if isinstance(path, (list, tuple)):
            path = path[0] if path else None
        self._active = isinstance(path, (str, os.PathLike)) and wanted
        self._path = _where(path) if self._active else None
        self._delay, self._interval = delay, interval
        self._thread = None
        self._printed = False

    def __enter__(self):
        if self._active:
            import threading
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if self._printed:
                self._stream.write("\n")
                self._stream.flush()
        return False

    def _run(self):
        if self._stop.wait(self._delay):
            return
        try:
            client = self._connect()
        except Exception:  # no second connection: no progress, the job goes on
            return
        while True:
            try:
                entries = client.query("datasets").get("indexing", [])
            except Exception:
                return
            for entry in entries:
                path = entry.get("path") or entry.get("first_shard", "")
                if _where(path) == self._path:
                    self._stream.write("\r" + format_progress(entry))
                    self._stream.flush()
                    self._printed = True
            if self._stop.wait(self._interval):
                return
