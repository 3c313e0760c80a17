"""The part of a job's transform that runs in the job's own process.

galleyd runs the ops it knows (docs/transforms.md) once per node and shares
their output between jobs. A transform may go on with ops it does not know:
a ``Lambda``, the user's own classes and functions, torchvision ops galley
has not implemented. ``split_transform`` cuts the transform at the first
such op: the *prefix* before it goes to galleyd, the *tail* from it on runs
here, sample by sample, on the prefix's output in the type torchvision
would have passed at that point (a PIL image before ``ToTensor`` /
``PILToTensor``, a tensor after it, a ``tv_tensors.Image`` in a v2
pipeline). ``SampleStage`` runs the tail (and the dataset's
``target_transform``); ``collate`` builds the batch as torch's DataLoader
does. Both run in the main process (``num_workers=0``) or in the worker
processes of ``galley.worker_pool``.

Each sample's Python part starts from Python's ``random``, NumPy's and
torch's global CPU generators seeded from (seed, epoch, item id), so a
sample's random draws do not depend on which process ran it or when: an
epoch is the same with 0 or N workers, after a resume and on every DDP
rank.
"""

from __future__ import annotations

import hashlib
import random
import traceback
from typing import Any, Callable, List, Optional, Sequence, Tuple

from . import transforms as T

__all__ = ["Split", "split_transform", "sample_seed", "SampleStage", "SampleFailure",
           "collate", "raise_failure"]


class Split:
    """A transform cut where galleyd's knowledge ends.

    ``prefix``: the ops galleyd runs (a list, for ``transforms.build_spec``);
    ``tail``: the callables the job runs after it, in order (empty when
    galleyd runs everything); ``tensor_input``: the tail takes a tensor
    (the prefix ended in ``ToTensor``, ``PILToTensor`` or ``Normalize``),
    else a PIL image; ``v2``: the tail belongs to a ``transforms.v2``
    pipeline, which takes a ``tv_tensors.Image`` for a tensor.
    """

    def __init__(self, prefix: List[Any], tail: List[Callable[[Any], Any]], tensor_input: bool,
                 v2: bool) -> None:
        self.prefix = prefix
        self.tail = tail
        self.tensor_input = tensor_input
        self.v2 = v2

    def describe(self) -> str:
        """Where each op runs, in words (``loader.transform_split``)."""
        def names(ops: Sequence[Any]) -> str:
            return ", ".join(_name(op) for op in ops) or "nothing"
        return f"galleyd: {names(self.prefix)}; the job: {names(self.tail)}"


def _name(op: Any) -> str:
    return getattr(op, "__qualname__", None) or type(op).__name__


def _steps(transform: Any) -> Tuple[List[Any], bool]:
    """The top-level steps of a transform (a Compose, v1 or v2, or a list
    of them, flattened), and whether it is a transforms.v2 pipeline."""
    v2 = type(transform).__module__.startswith("torchvision.transforms.v2")
    if isinstance(transform, T.Compose) or (type(transform).__name__ == "Compose"
                                            and hasattr(transform, "transforms")):
        transform = list(transform.transforms)
    if not isinstance(transform, (list, tuple)):
        return [transform], v2
    steps: List[Any] = []
    for child in transform:
        more, child_v2 = _steps(child)
        steps += more
        v2 = v2 or child_v2
    return steps, v2


_GALLEY_OBJECTS = (T._Op, T.RandomErasing, T.Normalize, T.ToTensor, T.PILToTensor)


def _ends_in_tensor(prefix: List[Any]) -> bool:
    return any(isinstance(op, (T.ToTensor, T.PILToTensor, T.Normalize))
               for step in prefix for op in T._translate(step))


def split_transform(transform: Any) -> Split:
    """Cuts ``transform`` at its first step galleyd cannot run.

    A step is a top-level op of the (flattened) Compose; an op nested in
    ``RandomApply`` and its kin moves its whole container to the job. A
    step galleyd knows but cannot run with its arguments or at its place
    (a ``Resize`` with ``max_size``, a second ``Normalize``) moves to the
    job too, where torchvision runs it as given. The tail runs in Python,
    so it may hold torchvision ops galley knows as well, but not
    ``galley.transforms`` objects, which only describe what galleyd does
    (refused by name)."""
    if transform is None:
        return Split([], [], False, False)
    steps, v2 = _steps(transform)
    cut = 0
    while cut < len(steps):
        try:
            T.build_spec(steps[:cut + 1])
        except (ValueError, TypeError):
            if isinstance(steps[cut], _GALLEY_OBJECTS):
                raise  # galley's own op, refused with galleyd's reason
            break
        cut += 1
    prefix, tail = steps[:cut], steps[cut:]
    for step in tail:
        if isinstance(step, _GALLEY_OBJECTS):
            raise ValueError(
                f"galley.transforms.{type(step).__name__} comes after {_name(tail[0])}, which "
                f"runs in the job's process (galleyd does not know it); galley.transforms "
                f"objects only describe what galleyd runs. Use torchvision's "
                f"{type(step).__name__} there, or move it before {_name(tail[0])}")
        if not callable(step):
            raise TypeError(f"transform: {step!r} is not callable")
    return Split(prefix, tail, bool(tail) and _ends_in_tensor(prefix), v2)


def sample_seed(seed: int, epoch: int, item: int) -> int:
    """The 64-bit seed of one sample's Python part: a pure function of
    (seed, epoch, item id)."""
    digest = hashlib.blake2b(f"galley-sample/{int(seed)}/{int(epoch)}/{int(item)}".encode(),
                             digest_size=8).digest()
    return int.from_bytes(digest, "little")


class SampleFailure(Exception):
    """A sample's Python part raised: the item, and the original exception's
    type and formatted traceback, in a form that crosses processes."""

    def __init__(self, item: int, error_type: Any, message: str, formatted: str,
                 where: str, whole_batch: bool = False) -> None:
        super().__init__(item, error_type, message, formatted, where, whole_batch)
        self.item, self.error_type, self.message = item, error_type, message
        self.formatted, self.where = formatted, where
        self.whole_batch = whole_batch  # collating or sending the batch failed, not a sample


def raise_failure(failure: SampleFailure, path: str, cause: Optional[BaseException]) -> None:
    """Raises ``failure`` in the training loop as torch re-raises a worker's
    exception: the original type where it can be rebuilt from a message,
    naming the item and with the original traceback."""
    what = (f"collating or sending the batch whose first item is {failure.item} ({path})"
            if failure.whole_batch else f"the transform of item {failure.item} ({path})")
    hint = ""
    if "AF_UNIX path too long" in failure.message:
        hint = (" torch sends a worker's tensors through a Unix socket made under $TMPDIR, "
                "whose path is too long here: set TMPDIR to a shorter folder.")
    text = (f"Caught {failure.error_type.__name__} in {what} {failure.where}.{hint}\n"
            f"Original {failure.formatted}")
    if issubclass(failure.error_type, KeyError):
        text = _ShownAsIs(text)  # KeyError shows its argument's repr, newlines escaped
    try:
        error = failure.error_type(text)
    except Exception:
        error = RuntimeError(text)
    raise error from cause


class _ShownAsIs(str):
    """A message whose repr is itself."""

    def __repr__(self) -> str:
        return str(self)


class SampleStage:
    """Runs the tail and the dataset's ``target_transform`` on one batch's
    samples. Picklable when its callables are, so that a spawned worker
    can be given it; a forked one inherits it."""

    def __init__(self, split: Split, target_transform: Optional[Callable[[Any], Any]],
                 seed: int, keep_images: bool = False) -> None:
        self.tail = split.tail
        self.tensor_input = split.tensor_input
        self.v2 = split.v2
        self.target_transform = target_transform
        self.seed = int(seed)
        # Without a tail, give each sample galleyd's image (its own copy)
        # rather than None: a collate_fn runs on them in the workers.
        self.keep_images = keep_images

    @property
    def transforms_images(self) -> bool:
        return bool(self.tail)

    @property
    def runs_in_workers(self) -> bool:
        """Whether the job's worker processes have a part to run: the tail,
        or a collate_fn on galleyd's images."""
        return bool(self.tail) or self.keep_images

    def _image(self, images: Any, index: int) -> Any:
        """Sample ``index`` of the prefix's batch, as torchvision would have
        passed it to the tail: its own memory, never the batch's."""
        if not self.tensor_input:  # uint8 [B, H, W, 3], as a PIL image takes it
            from PIL import Image
            return Image.fromarray(images[index].numpy(), "RGB")
        image = images[index].clone()
        if self.v2:
            try:
                from torchvision import tv_tensors
            except ImportError:  # torchvision 0.15 named them datapoints
                from torchvision import datapoints as tv_tensors
            return tv_tensors.Image(image)
        return image

    def run(self, images: Any, labels: Sequence[int], ids: Sequence[int], epoch: int,
            where: str = "in the main process",
            on_sample: Optional[Callable[[int], None]] = None) -> List[Tuple[Any, Any]]:
        """``[(image, target), ...]`` for the batch: the tail on each image
        (None without a tail), ``target_transform`` on each label, each
        sample's generators seeded first. Raises SampleFailure naming the
        item that failed. ``on_sample(item)`` is told each item before its
        Python part runs (a worker records what it is on)."""
        import torch
        try:
            import numpy
        except ImportError:  # NumPy is optional for torch
            numpy = None
        samples = []
        for index, (label, item) in enumerate(zip(labels, ids)):
            if on_sample is not None:
                on_sample(item)
            try:
                seed = sample_seed(self.seed, epoch, item)
                random.seed(seed)
                if numpy is not None:
                    numpy.random.seed(seed & 0xFFFFFFFF)
                # The CPU generator, which a transform's torch.rand draws
                # from: torch.manual_seed would also seed every accelerator's
                # (0.18 ms a call in torch 2.x, more than a small sample's
                # whole Python part).
                torch.default_generator.manual_seed(seed)
                image = None  # without a tail the batch stays galleyd's stacked view
                if self.tail:
                    image = self._image(images, index)
                    for step in self.tail:
                        image = step(image)
                elif self.keep_images:
                    # Its own memory: the worker's input slot is reused.
                    image = images[index].clone()
                target = int(label)
                if self.target_transform is not None:
                    target = self.target_transform(target)
            except Exception as error:
                raise SampleFailure(int(item), type(error), str(error), traceback.format_exc(),
                                    where) from error
            samples.append((image, target))
        return samples


def default_collate(samples: List[Any]) -> Any:
    from torch.utils.data import default_collate as torch_default_collate
    return torch_default_collate(samples)


def collate(samples: List[Any], collate_fn: Optional[Callable[[List[Any]], Any]]) -> Any:
    """The batch torch's DataLoader makes of ``samples``: ``collate_fn``'s
    result, or ``default_collate``'s. A ``collate_fn`` that fails on the
    list is told apart from one written for galley's earlier stacked batch
    only by its user, so the error says both."""
    if collate_fn is None:
        return default_collate(samples)
    try:
        return collate_fn(samples)
    except Exception as error:
        text = (f"collate_fn raised {type(error).__name__}: {error}. galley.DataLoader's "
                f"collate_fn receives a list of (image, target) samples, as torch's does; a "
                f"function written for the stacked (images, labels) batch it was given before "
                f"belongs in batch_transform= (called as batch_transform(images, labels, "
                f"rng=...))")
        try:
            wrapped = type(error)(text)
        except Exception:
            wrapped = TypeError(text)
        raise wrapped from error
