"""Sample fields: what a batch carries besides its images (``fields=``).

galleyd reads a sample's other members (a shard's ``.txt``, ``.json``,
``.cls``...; a manifest's other columns) once, with its image, keeps them
with the item in its cache and passes each job their bytes. This module
turns those bytes into Python values in the job and collates a batch.

Decoding follows webdataset's conventions for a member's extension (its
last dot-separated part, lower-case): ``txt``/``text`` -> ``str``;
``json``/``jsn`` -> the parsed object; ``cls``/``cls2``/``class``/
``count``/``index``/``inx``/``id`` -> ``int``; ``npy`` -> a NumPy array
(``allow_pickle=False``); ``__key__``/``__url__`` -> ``str``; anything else
-> ``bytes``. ``pyd``/``pickle`` (and ``pth``, which ``torch.load``
unpickles) stay ``bytes`` unless ``unpickle_fields=True``: a dataset is not a
trusted program. A manifest column's value travels as JSON text, already
typed by its column (galleyd's ManifestTable), and is parsed with
``json.loads``. ``decode_fields=False`` leaves every value as ``bytes``.
Values are decoded in the loop's process (``FieldPlan.decode``), before any
worker; one that does not decode is reported, not raised, so that the
loader treats its sample as a bad one under ``on_error``.

Collation is decided once per field, never by one batch's values, so that
every batch of a field has the same type: a field whose values are
integers over the whole dataset (a ``.cls``-like member, an integer
manifest column) is an int64 tensor; a manifest column of numbers a
float64 tensor (a missing value NaN); one of booleans a bool tensor;
tensors and NumPy arrays are stacked into a tensor; anything else
(strings, bytes, dicts, multi-label lists, a shard ``.json`` holding a
number) stays a Python list, one entry per sample, as webdataset's
batching keeps them. galleyd says how each manifest column collates
(JobOpened's ``field_collations``), having read the whole column.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pickle
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _galley
from . import python_stage
from . import shards as _shards

if TYPE_CHECKING:  # torch is imported lazily: importing galley must not need it
    import torch

# A member's kind by its extension, as galleyd checks it (galley/shard_members.h).
IMAGE_EXTENSIONS = tuple(_galley.shard_member_kinds["image"])
_TEXT = frozenset(_galley.shard_member_kinds["text"])
_INTEGER = frozenset(_galley.shard_member_kinds["integer"])
_JSON = frozenset(_galley.shard_member_kinds["json"])
_PICKLED = {"pyd", "pickle"}
_SYNTHETIC = {"__key__", "__url__"}


def _decode_npy(data: bytes) -> Any:
    import numpy
    return numpy.load(io.BytesIO(data), allow_pickle=False)


def _decode_torch(data: bytes) -> Any:
    import torch
    return torch.load(io.BytesIO(data), weights_only=False)


# Module-level functions, not lambdas: a FieldPlan goes to spawned workers
# by pickle.
def _decode_name(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _decode_text(data: bytes) -> str:
    return data.decode("utf-8")


def _decode_int(data: bytes) -> int:
    return int(data)


def _member_decoder(name: str, unpickle: bool) -> Callable[[bytes], Any]:
    """The decoder for a shard member named by its extension."""
    if name in _SYNTHETIC:
        return _decode_name
    extension = name.rsplit(".", 1)[-1].lower()
    if extension in _TEXT:
        return _decode_text
    if extension in _JSON:
        return json.loads
    if extension in _INTEGER:
        return _decode_int
    if extension == "npy":
        return _decode_npy
    if unpickle and extension in _PICKLED:
        return pickle.loads
    if unpickle and extension == "pth":
        return _decode_torch
    return bytes


def manifest_columns(path: str) -> List[str]:
    """The column names of a manifest read with a header row, as galleyd
    reads it: the keys of a ``.jsonl`` file's first record, a ``.csv``
    file's first row, another file's first tab-separated row."""
    suffix = os.path.splitext(path)[1].lower()
    # Bytes that are not UTF-8 in a later cell are that cell's business
    # (galleyd fails its sample for a job naming the column), not the
    # header's.
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        lines = (line for line in f if line.strip())
        if suffix == ".jsonl":
            first = next(lines, None)
            return list(json.loads(first)) if first is not None else []
        return next(csv.reader(lines, delimiter="," if suffix == ".csv" else "\t"), [])


class FieldPlan:
    """Which fields a loader's batches carry, where the images go in them,
    and how each field is decoded and collated."""

    def __init__(self, names: Sequence[str], image_index: Optional[int],
                 decoders: Sequence[Callable[[bytes], Any]],
                 collations: Sequence[str] = ()) -> None:
        self.names = list(names)          # as the user gave them, images included
        # Where the images go in a batch; None until galleyd names the image
        # column of a manifest only it reads (place_image).
        self.image_index = image_index
        self._decoders = list(decoders)   # one per field sent to galleyd
        # One per field: "int", "float", "bool" or "" (by the values: stacked
        # tensors or arrays, else a list).
        self._collations = list(collations) or [""] * len(self._decoders)
        self._decoding = bool(decoders) and all(d is not bytes for d in decoders)

    def place_image(self, column: str) -> None:
        """Puts the images where ``fields=`` names ``column``: the image
        column galleyd found reading a manifest object's header (JobOpened's
        ``image_key``), having checked that ``fields=`` names it."""
        if self.image_index is None:
            if column not in self.names:
                raise _galley.ProtocolError(
                    f"galleyd named {column!r} as the manifest's image column, which "
                    f"fields={tuple(self.names)} does not name")
            self.image_index = self.names.index(column)

    def set_collations(self, collations: Sequence[str]) -> None:
        """How galleyd, having read the whole dataset, says each field
        collates (JobOpened's ``field_collations``; empty: as planned)."""
        if collations and self._decoding:
            self._collations = [given or planned
                                for given, planned in zip(collations, self._collations)]

    def batch(self, images: "torch.Tensor", columns: List[List[Any]],
              item_ids: Sequence[int]) -> Tuple[Any, ...]:
        """The batch tuple in the order of ``fields=``: the images where the
        image member was named, each other field (``columns``, as
        ``decode`` gave them) collated."""
        values: List[Any] = [collate(name, column, how)
                             for name, column, how in zip(self.field_names(), columns,
                                                          self._collations)]
        values.insert(self.image_index, images)
        return tuple(values)

    def finish(self, images: Any, columns: List[List[Any]], item_ids: Sequence[int],
               collate_fn: Optional[Callable[[List[Any]], Any]]) -> Any:
        """The batch a loop receives: ``images`` (galleyd's stacked batch,
        or the per-sample results of the job's Python part) with their
        decoded fields, given to ``collate_fn`` as a list of samples when
        there is one, else collated as ``batch`` does."""
        if collate_fn is not None:
            return python_stage.collate(self.samples(images, columns, item_ids), collate_fn)
        if isinstance(images, list):
            images = python_stage.default_collate(images)
        return self.batch(images, columns, item_ids)

    def samples(self, images: "torch.Tensor", columns: List[List[Any]],
                item_ids: Sequence[int]) -> List[Tuple[Any, ...]]:
        """Each sample as a tuple in the order of ``fields=``, for a
        ``collate_fn`` (torch hands it a list of samples)."""
        per_sample = [list(values) for values in zip(*columns)]
        if not per_sample:  # only the image was named
            per_sample = [[] for _ in range(len(item_ids))]
        for image, values in zip(images, per_sample):
            values.insert(self.image_index, image)
        return [tuple(values) for values in per_sample]

    def decode(self, columns: List[List[bytes]]) -> Tuple[List[List[Any]], Dict[int, str]]:
        """Each field's column decoded, and the samples whose value did not
        decode: {position in the batch: "field 'txt': why"} (the first
        field that failed). A failed value is None in its column."""
        decoded: List[List[Any]] = []
        failed: Dict[int, str] = {}
        for name, decode, column in zip(self.field_names(), self._decoders, columns):
            values = []
            for position, value in enumerate(column):
                try:
                    values.append(decode(value))
                except Exception as error:  # noqa: BLE001 - a bad value is a bad sample
                    values.append(None)
                    failed.setdefault(position, f"field {name!r} cannot be decoded: "
                                                f"{type(error).__name__}: {error}")
            decoded.append(values)
        return decoded, failed

    def field_names(self) -> List[str]:
        """The fields galleyd sends: the names less the image."""
        return self.names[:self.image_index] + self.names[self.image_index + 1:]


def collate(name: str, values: List[Any], how: str = "") -> Any:
    """One field's values for a batch, as ``how`` (the field's collation,
    the same for every batch) says: "int" an int64 tensor, "float" a
    float64 tensor (None as NaN), "bool" a bool tensor; "" stacks tensors
    and NumPy arrays and keeps anything else a list."""
    import torch
    if how == "int":
        return torch.tensor(values, dtype=torch.int64)
    if how == "float":
        return torch.tensor([float("nan") if v is None else float(v) for v in values],
                            dtype=torch.float64)
    if how == "bool":
        return torch.tensor(values, dtype=torch.bool)
    first = values[0] if values else None
    if isinstance(first, torch.Tensor):
        return torch.stack(values)
    if type(first).__module__ == "numpy" and hasattr(first, "shape"):
        import numpy
        try:
            return torch.as_tensor(numpy.stack(values))
        except ValueError as error:
            raise ValueError(f"field {name!r}: the batch's arrays differ in shape ({error}); "
                             f"decode_fields=False passes their bytes") from error
    return list(values)


def plan(fields: Optional[Sequence[str]], *, shards: bool, manifest: Optional[str],
         image_key: Optional[str], label_key: Optional[str], decode: bool, unpickle: bool,
         batch_transform: Any) -> Tuple[Optional[FieldPlan], Dict[str, Any]]:
    """The FieldPlan of a loader's ``fields=`` and what its job spec gets;
    (None, {}) without ``fields=``. Raises ValueError for a combination that
    does not say what a batch holds.

    A local manifest's header is read here. A manifest object (s3://) only
    galleyd reads, with the job's access: unless ``image_key=`` names the
    image column, ``fields=`` goes to galleyd whole (``image_in_fields``);
    galleyd checks it against the header as this function would (the same
    messages, raised as InvalidRequest by the loader's first iteration) and
    names the image column in JobOpened, where ``FieldPlan.place_image``
    puts the images."""
    if fields is None:
        return None, {}
    if isinstance(fields, str):
        fields = (fields,)
    names = [str(name) for name in fields]
    if len(set(names)) != len(names):
        raise ValueError(f"fields={tuple(names)} names a field twice")
    if batch_transform is not None:
        raise ValueError("batch_transform= works on (images, labels) batches; with fields= "
                         "apply it to the batch tuple yourself")
    if label_key not in (None, "cls"):
        raise ValueError(f"label_key={label_key!r} does not apply with fields=: fields= decides "
                         f"what a batch carries, so name the label's member there, e.g. "
                         f"fields=('jpg', 'cls')")
    if shards:
        image = image_key or next((n for n in names if n.lower() in IMAGE_EXTENSIONS), None)
        where = "shard member"
        updates: Dict[str, Any] = {"label_key": ""}
    elif manifest is not None and os.path.isfile(manifest):
        columns = manifest_columns(manifest)
        if not columns:
            raise ValueError(f"{manifest} has no header row")
        image = image_key or columns[0]
        where = "manifest column"
        updates = {}
    elif manifest is not None and _shards.is_object_url(manifest):
        if image_key is None:  # the first column, which only galleyd reads
            decoders = [(json.loads if decode else bytes) for _ in names[1:]]
            return FieldPlan(names, None, decoders, [""] * len(decoders)), {
                "image_in_fields": True, "fields": names, "image_key": ""}
        image = image_key
        where = "manifest column"
        updates = {}
    else:
        raise ValueError("fields= needs tar shards or a manifest with a header row "
                         "(.csv, .tsv or .jsonl)")
    if image is None or image not in names:
        raise ValueError(
            f"fields={tuple(names)} does not name the image {where}"
            + (f" {image!r} (image_key= names it; with fields= the two must agree)"
               if image_key else f" (one of {', '.join(IMAGE_EXTENSIONS)})" if shards
               else f" {image!r} (the first column, or the one image_key= names)"))
    image_index = names.index(image)
    others = names[:image_index] + names[image_index + 1:]
    if not others:
        raise ValueError(f"fields={tuple(names)} names only the image; leave fields= out for "
                         f"(images, labels) batches")
    updates["image_key"] = image
    if shards:
        decoders = [(_member_decoder(n, unpickle) if decode else bytes) for n in others]
        # A member's collation follows its extension, as its decoding does.
        collations = [("int" if decode and _member_decoder(n, unpickle) is _decode_int else "")
                      for n in others]
    else:
        decoders = [(json.loads if decode else bytes) for _ in others]
        collations = [""] * len(others)  # galleyd says, once it has read the manifest
    updates["fields"] = others
    return FieldPlan(names, image_index, decoders, collations), updates
