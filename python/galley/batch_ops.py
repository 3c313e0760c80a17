"""Batch augmentations: MixUp and CutMix with torchvision.transforms.v2's
semantics (labels become soft targets), run on the consumer's device.

Why here and not in galleyd: these ops mix *pairs of samples of one batch*,
so they can only run once a batch exists, and their result belongs to one
job (the batch composition, and so the mix, differs between jobs that share
the daemon's augmented samples). They are cheap elementwise tensor ops
(one multiply-add, or one rectangle copy, per batch) that a GPU does in
microseconds, while doing them in the daemon would copy every batch a second
time on the node's scarce CPU cores. So galleyd serves the per-sample
pipeline and the loader applies these to each batch, on ``device`` when one
is given (after the batch has left shared memory: inputs are never written
in place, because the batch memory may be shared with other jobs).

Randomness is a pure function of (seed, epoch, the batch's first item id),
so a run is reproducible; the draws follow torchvision's distributions:
``lam ~ Beta(alpha, alpha)``, CutMix's box centre uniform over the image.

    loader = galley.DataLoader(path, transform=..., batch_transform=
                               galley.batch_ops.RandomChoice([MixUp(0.8, num_classes=1000),
                                                              CutMix(1.0, num_classes=1000)]))

A torchvision ``v2.MixUp`` / ``v2.CutMix`` / ``v2.RandomChoice`` of them is
accepted too and translated to these.
"""

import math
import random

__all__ = ["MixUp", "CutMix", "RandomChoice", "batch_rng", "resolve"]


def batch_rng(seed, epoch, ids):
    """The generator of one batch's draws (a random.Random): a pure function
    of (seed, epoch, first item id)."""
    first = int(ids[0]) if len(ids) else 0
    return random.Random(f"galley-batch/{int(seed)}/{int(epoch)}/{first}")


def _soft_targets(labels, num_classes, lam):
    """torchvision v2's _mixup_label: one-hot, then lam * y + (1 - lam) *
    roll(y, 1)."""
    import torch
    if labels.dim() == 1:
        labels = torch.nn.functional.one_hot(labels.long(), num_classes=num_classes)
    labels = labels.float()
    return labels.roll(1, 0).mul(1.0 - lam).add(labels.mul(lam))


class _BatchOp:
    def __init__(self, alpha, num_classes, device):
        if not alpha > 0:
            raise ValueError(f"{type(self).__name__}: alpha must be positive, got {alpha!r}")
        if num_classes is None or int(num_classes) < 1:
            raise ValueError(f"{type(self).__name__}: num_classes is required (labels become "
                             "one-hot soft targets)")
        self.alpha = float(alpha)
        self.num_classes = int(num_classes)
        self.device = device

    def _inputs(self, images, labels):
        if self.device is not None:
            images = images.to(self.device, non_blocking=True)
            labels = labels.to(self.device, non_blocking=True)
        if images.dim() != 4:
            raise ValueError(f"{type(self).__name__}: expected a [B, C, H, W] batch")
        return images, labels

    def __repr__(self):
        return f"{type(self).__name__}(alpha={self.alpha}, num_classes={self.num_classes})"


class MixUp(_BatchOp):
    """images = lam * x + (1 - lam) * roll(x, 1); labels likewise, one-hot.
    Needs float images (ToTensor / Normalize), as torchvision's does."""

    def __init__(self, alpha=1.0, num_classes=None, device=None):
        super().__init__(alpha, num_classes, device)

    def __call__(self, images, labels, rng=None):
        images, labels = self._inputs(images, labels)
        if not images.is_floating_point():
            raise ValueError("MixUp needs float images: add ToTensor() or Normalize to the "
                             "transform")
        rng = rng if rng is not None else random.Random()
        lam = rng.betavariate(self.alpha, self.alpha)
        mixed = images.roll(1, 0).mul(1.0 - lam).add(images.mul(lam))
        return mixed, _soft_targets(labels, self.num_classes, lam)


class CutMix(_BatchOp):
    """Pastes a box of roll(x, 1) into x; labels weighted by the kept area."""

    def __init__(self, alpha=1.0, num_classes=None, device=None):
        super().__init__(alpha, num_classes, device)

    def box(self, height, width, rng):
        """torchvision v2 CutMix._get_params: (x1, y1, x2, y2) and the
        adjusted lam (the share of the image that stays)."""
        lam = rng.betavariate(self.alpha, self.alpha)
        r_x = rng.randrange(width)
        r_y = rng.randrange(height)
        r = 0.5 * math.sqrt(1.0 - lam)
        r_w_half, r_h_half = int(r * width), int(r * height)
        x1, y1 = max(r_x - r_w_half, 0), max(r_y - r_h_half, 0)
        x2, y2 = min(r_x + r_w_half, width), min(r_y + r_h_half, height)
        lam_adjusted = float(1.0 - (x2 - x1) * (y2 - y1) / (width * height))
        return (x1, y1, x2, y2), lam_adjusted

    def __call__(self, images, labels, rng=None):
        images, labels = self._inputs(images, labels)
        rng = rng if rng is not None else random.Random()
        (x1, y1, x2, y2), lam = self.box(images.shape[-2], images.shape[-1], rng)
        out = images.clone()
        out[..., y1:y2, x1:x2] = images.roll(1, 0)[..., y1:y2, x1:x2]
        return out, _soft_targets(labels, self.num_classes, lam)


class RandomChoice:
    """One of the batch ops per batch, with probabilities p (uniform by
    default), as torchvision's RandomChoice([CutMix(...), MixUp(...)])."""

    def __init__(self, transforms, p=None):
        self.transforms = list(transforms)
        if p is None:
            p = [1.0] * len(self.transforms)
        total = float(sum(p))
        if len(p) != len(self.transforms) or total <= 0:
            raise ValueError("RandomChoice: p needs one non-negative weight per transform")
        self.p = [float(w) / total for w in p]

    def __call__(self, images, labels, rng=None):
        rng = rng if rng is not None else random.Random()
        index = rng.choices(range(len(self.transforms)), weights=self.p)[0]
        return self.transforms[index](images, labels, rng=rng)


def resolve(batch_transform, device=None):
    """A batch op (or None) from galley's or torchvision v2's objects."""
    if batch_transform is None or isinstance(batch_transform, (_BatchOp, RandomChoice)):
        return batch_transform
    name = type(batch_transform).__name__
    if type(batch_transform).__module__.startswith("torchvision."):
        if name in ("MixUp", "CutMix"):
            cls = MixUp if name == "MixUp" else CutMix
            return cls(batch_transform.alpha, batch_transform.num_classes, device)
        if name == "RandomChoice":
            return RandomChoice([resolve(t, device) for t in batch_transform.transforms],
                                getattr(batch_transform, "p", None))
        raise ValueError(f"batch_transform: galley runs MixUp, CutMix and RandomChoice of them "
                         f"on batches, not torchvision's {name}")
    if callable(batch_transform):
        return batch_transform  # the user's own (images, labels, rng=) callable
    raise TypeError(f"batch_transform must be callable, got {batch_transform!r}")
