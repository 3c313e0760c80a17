"""``loader.sampler`` for a loader given no sampler: galleyd's order.

torch's DataLoader always has a sampler: the one it was given, else a
``SequentialSampler`` or ``RandomSampler`` over the dataset. torch code reads
it as a DDP rank's share (``len(loader.sampler)``, the samples this rank
sees, is the denominator of a per-rank mean) and steps it
(``loader.sampler.set_epoch(epoch)``). ``EpochSampler`` stands for the order
galleyd serves: it has ``DistributedSampler``'s attributes (``num_replicas``,
``rank``, ``shuffle``, ``seed``, ``drop_last``, ``epoch``, ``num_samples``,
``total_size``), its ``len()`` is the items this rank receives per epoch and
its ``set_epoch`` is the loader's.

Iterating it yields the item ids of the loader's next epoch, in order, where
the client can know them: without ``shuffle``, the subset in id order (with
DDP, this rank's positions of it, padded or cut as DistributedSampler
does). With ``shuffle`` galleyd draws the order while the epoch runs, so
iterating raises ``TypeError`` saying so; ``loader.iter_with_ids()`` yields
the ids with each batch.
"""

from __future__ import annotations

import weakref
from typing import Any, Iterator, List

__all__ = ["EpochSampler"]


class EpochSampler:
    """galleyd's order for one loader (module docstring). Holds the loader
    weakly: it lives as long as the loader does."""

    def __init__(self, loader: Any) -> None:
        self._loader = weakref.ref(loader)
        self.num_replicas = loader.world_size
        self.rank = loader.rank
        self.shuffle = loader.shuffle
        self.seed = loader.seed
        # DistributedSampler's drop_last cuts the shards, as galley's split
        # does when the loader drops its last batch.
        self.drop_last = bool(loader._session.spec["shard_drop_last"])

    def _owner(self) -> Any:
        loader = self._loader()
        if loader is None:
            raise ReferenceError("the loader this sampler belongs to is gone")
        return loader

    @property
    def epoch(self) -> int:
        """The epoch the loader's next loop yields."""
        return self._owner()._epochs.epoch

    def set_epoch(self, epoch: int) -> None:
        self._owner().set_epoch(epoch)

    def __len__(self) -> int:
        return int(self._owner().info["epoch_size"])

    @property
    def num_samples(self) -> int:
        return len(self)

    @property
    def total_size(self) -> int:
        return len(self) * self.num_replicas

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            raise TypeError("galleyd draws a shuffled epoch's order while the epoch runs, so "
                            "loader.sampler cannot list it ahead; loader.iter_with_ids() yields "
                            "each batch's item ids")
        return iter(self._sequential_items())

    def _sequential_items(self) -> List[int]:
        loader = self._owner()
        subset = _subset_ids(loader)
        world = self.num_replicas
        if world == 1:
            return subset
        n = len(subset)
        per_rank = n // world if self.drop_last else -(-n // world)
        # DistributedSampler(shuffle=False): positions rank, rank + world, ...
        # of the subset, wrapped around past its end.
        return [subset[pos % n] for pos in range(self.rank, per_rank * world, world)]

    def __repr__(self) -> str:
        return (f"galley.EpochSampler(num_replicas={self.num_replicas}, rank={self.rank}, "
                f"shuffle={self.shuffle}, seed={self.seed}, drop_last={self.drop_last})")


def _subset_ids(loader: Any) -> List[int]:
    """The loader's items in id order: the whole dataset, or the union of its
    ``classes=`` and ``indices=`` (a class of an integer-labelled dataset is
    named by its label, as galleyd names it)."""
    classes, ids = loader._session.spec["classes"], loader._session.spec["ids"]
    listing = loader._session.listing
    if not classes and not ids:
        return list(range(len(listing)))
    chosen = set(ids or ())
    if classes:
        names = listing.classes
        wanted = set(classes)
        for item, label in enumerate(listing.targets):
            if (names[label] if names else str(label)) in wanted:
                chosen.add(item)
    return sorted(chosen)
