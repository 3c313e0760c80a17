"""torchvision dataset objects given to galley.DataLoader.

galleyd lists, reads and decodes the files itself, so of a dataset object
galley takes what describes *which* files and labels a job is served and
what the job does with them afterwards, and refuses what it cannot honour:

* ``ImageFolder`` / ``DatasetFolder``: its ``root``; its ``samples``, the
  list torchvision made with the dataset's ``extensions=`` or
  ``is_valid_file=`` (evaluated by the user's code, as torch evaluates it),
  which becomes the subset of galleyd's listing the job is served; its
  ``transform`` (when the loader is given none) and ``target_transform``,
  which run in the job's process.
* A custom ``loader=``, or a subclass that overrides ``__getitem__``: code
  galley would never call, refused by name.
* Any other ``Dataset`` object: refused, saying what galley reads.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["FolderDataset", "from_object", "subset_ids"]

_WHAT_GALLEY_READS = (
    "galley.DataLoader serves what galleyd reads itself: a folder of class folders "
    "(torchvision's ImageFolder layout), a manifest file (one 'relative/path<TAB>label' per "
    "line), tar shards (a list, glob or folder of .tar files), or a torchvision "
    "ImageFolder/DatasetFolder object over such a folder (docs/datasets.md)")


class FolderDataset:
    """What galley takes from a torchvision DatasetFolder: ``root``
    (absolute), ``transform``, ``target_transform`` and ``samples``
    (``(absolute path, target)`` per dataset index, torchvision's list)."""

    def __init__(self, root: str, transform: Any, target_transform: Any,
                 samples: List[Tuple[str, int]]) -> None:
        self.root = root
        self.transform = transform
        self.target_transform = target_transform
        self.samples = samples


def _callable_name(function: Any) -> str:
    module = getattr(function, "__module__", None) or ""
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return f"{module}.{name}" if module else name


def from_object(dataset: Any) -> FolderDataset:
    """The FolderDataset of a torchvision DatasetFolder, or raises TypeError /
    ValueError naming what galley cannot honour and what to do."""
    try:
        from torchvision.datasets import DatasetFolder
        from torchvision.datasets import folder as tv_folder
    except ImportError:  # torchvision is optional
        DatasetFolder = tv_folder = None
    kind = type(dataset).__name__
    if DatasetFolder is None or not isinstance(dataset, DatasetFolder):
        raise TypeError(f"{_WHAT_GALLEY_READS}; got a {kind}, whose items galley cannot read. "
                        f"Pass the dataset's root path or one of those instead")
    if type(dataset).__getitem__ is not DatasetFolder.__getitem__:
        raise TypeError(
            f"{kind} overrides __getitem__, which galley.DataLoader never calls: galleyd reads, "
            f"decodes and transforms the files itself and the job receives (image, target) "
            f"samples. Move the per-sample work into transform= (its ops galleyd does not "
            f"know run in the job, after galleyd's part) or target_transform=, and pass a "
            f"plain ImageFolder over {dataset.root}; or keep torch's DataLoader for this "
            f"dataset")
    default_loaders = (tv_folder.default_loader, tv_folder.pil_loader,
                       getattr(tv_folder, "accimage_loader", None))
    loader = getattr(dataset, "loader", None)
    if loader not in default_loaders:
        raise ValueError(
            f"the {kind}'s loader={_callable_name(loader)} is not run by galley: galleyd reads "
            f"and decodes the files itself (as torchvision's default_loader does, to RGB). Pass "
            f"the dataset with the default loader and do what your loader adds in transform= "
            f"(it runs in the job on the decoded image), or keep torch's DataLoader for this "
            f"dataset")
    root = os.path.abspath(os.fspath(dataset.root))
    samples = [(os.path.abspath(os.fspath(path)), int(target))
               for path, target in dataset.samples]
    return FolderDataset(root, getattr(dataset, "transform", None),
                         getattr(dataset, "target_transform", None), samples)


def subset_ids(given: FolderDataset, listed: List[Tuple[str, int]]) -> Optional[List[int]]:
    """galleyd's item ids of the dataset's samples, in the dataset's order;
    None when they are galleyd's whole listing. Raises ValueError when the
    dataset holds a file galleyd does not list, or labels it otherwise."""
    if [path for path, _ in given.samples] == [path for path, _ in listed]:
        ids: List[int] = list(range(len(listed)))
    else:
        position: Dict[str, int] = {path: item for item, (path, _) in enumerate(listed)}
        missing = [path for path, _ in given.samples if path not in position]
        if missing:
            shown = ", ".join(os.path.relpath(path, given.root) for path in missing[:3])
            raise ValueError(
                f"the dataset lists {len(missing)} file(s) galleyd does not serve under "
                f"{given.root} (e.g. {shown}): galleyd lists the image types it decodes "
                f"(docs/datasets.md); leave them out with extensions= or is_valid_file=")
        ids = [position[path] for path, _ in given.samples]
    for (path, target), item in zip(given.samples, ids):
        if listed[item][1] != target:
            raise ValueError(
                f"the dataset labels {os.path.relpath(path, given.root)} {target}, galleyd "
                f"labels it {listed[item][1]} (class folders in sorted order, as ImageFolder's "
                f"find_classes); a custom find_classes is not supported: map the labels "
                f"with target_transform= instead")
    if ids == list(range(len(listed))):
        return None
    return ids

