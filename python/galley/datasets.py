"""``loader.dataset`` for a loader given a path: the dataset galleyd lists.

torch code reads a loader's dataset as torchvision's ``ImageFolder``:
``len(loader.dataset)`` for an accuracy's denominator, ``classes`` and
``class_to_idx`` for names, ``samples`` (alias ``imgs``) and ``targets`` for
the files behind the ids. ``ListedDataset`` has those attributes, read from
galleyd's own listing (the "listing" request, docs/protocol.md §1.2) without
opening a job: the listing the loader's item ids index, so
``dataset.samples[i]`` is the file behind item id ``i``.

Nothing is asked before an attribute is read. ``len()``, ``classes`` and
``class_to_idx`` take one small request (the listing's figures, no names);
``samples``, ``imgs`` and ``targets`` take the whole listing, in pages that
each fit the protocol's frame cap (about 200,000 ImageFolder items a page). Like torchvision's ImageFolder,
the object keeps the listing it read: it is a snapshot of the dataset as it
was then. It has no ``__getitem__``: galleyd reads and decodes the images.

How ``samples`` names an item: ``os.path.join(root, relative path)`` for an
ImageFolder (torchvision's paths when ``root`` is the folder torchvision was
given), the file relative to the manifest's folder for a manifest, and
``shard.tar:key.ext`` (the shard's absolute path and the member) for tar
shards, whose labels are the ``label_key`` values and which have no class
names.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["ListedDataset"]


class ListedDataset:
    """The dataset galleyd lists at ``root``, with torchvision's ImageFolder
    attributes (module docstring). ``fetch(begin, count)`` returns the
    listing's page that starts at item ``begin`` and holds at most ``count``
    items (None: as many as a page takes)."""

    def __init__(self, root: str, fetch: Callable[[int, Optional[int]], Dict[str, Any]],
                 shards: Optional[List[str]] = None) -> None:
        self.root = root
        self.shards = list(shards) if shards is not None else None
        self._fetch = fetch
        self._figures: Optional[Dict[str, Any]] = None
        self._samples: Optional[List[Tuple[str, int]]] = None

    def _header(self) -> Dict[str, Any]:
        """The listing's figures: its size, classes and resume key."""
        if self._figures is None:
            self._figures = self._fetch(0, 0)
        return self._figures

    def __len__(self) -> int:
        return int(self._header()["dataset_size"])

    @property
    def classes(self) -> List[str]:
        return list(self._header()["classes"])

    @property
    def class_to_idx(self) -> Dict[str, int]:
        return {name: index for index, name in enumerate(self.classes)}

    @property
    def samples(self) -> List[Tuple[str, int]]:
        """``(path, label)`` per item id, as torchvision's ``samples``."""
        if self._samples is None:
            self._samples = self._read_all()
        return self._samples

    @property
    def imgs(self) -> List[Tuple[str, int]]:
        return self.samples

    @property
    def targets(self) -> List[int]:
        return [label for _path, label in self.samples]

    def _read_all(self) -> List[Tuple[str, int]]:
        # The pages must come from one listing: a dataset listed again in
        # between (its files changed) is read again from the start, once.
        for _ in range(2):
            pages = [self._fetch(0, None)]
            size = int(pages[0]["dataset_size"])
            while sum(len(p["names"]) for p in pages) < size:
                page = self._fetch(pages[-1]["begin"] + len(pages[-1]["names"]), None)
                if not page["names"]:
                    break
                pages.append(page)
            keys = {p["content_key"] for p in pages}
            if len(keys) == 1 and sum(len(p["names"]) for p in pages) == size:
                # len() and classes follow the listing read here.
                self._figures = dict(pages[0], names=[], labels=[])
                return [(self._path_of(pages[0]["kind"], name), int(label))
                        for p in pages for name, label in zip(p["names"], p["labels"])]
        raise RuntimeError(f"the dataset at {self.root} kept changing while its listing was "
                           f"read; read loader.dataset.samples again once it is still")

    def _path_of(self, kind: str, name: str) -> str:
        if name.startswith("s3://"):  # a manifest naming objects by URL
            return name
        if kind == "folder" and self.root.startswith("s3://"):
            return self.root.rstrip("/") + "/" + name
        if kind == "manifest" and self.root.startswith("s3://"):
            return self.root.rsplit("/", 1)[0] + "/" + name
        if kind == "folder":
            return os.path.join(self.root, name)
        if kind == "manifest":
            return os.path.join(os.path.dirname(self.root), name)
        return name  # shards: shard:member

    def __repr__(self) -> str:
        what = f"{len(self.shards)} shards" if self.shards is not None else self.root
        return f"galley.ListedDataset({what})"
