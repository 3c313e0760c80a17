"""Transforms with torchvision's names, defaults and semantics.

These do not run in Python: they describe the pipeline that galleyd applies
(docs/transforms.md). ``Compose([...])`` of them is passed to
``galley.DataLoader(transform=...)``. Randomness is a pure function of
(seed, epoch, item id), so a sample's augmentation does not depend on the
order in which the daemon prepares it.
"""

import math
import numbers

__all__ = [
    "Compose", "RandomResizedCrop", "Resize", "CenterCrop", "RandomHorizontalFlip", "Normalize",
    "ToTensor", "PILToTensor", "InterpolationMode",
]


class InterpolationMode:
    BILINEAR = "bilinear"


def _pair(size, name):
    if isinstance(size, numbers.Integral):
        return [int(size), int(size)]
    if isinstance(size, (list, tuple)) and len(size) == 1:
        return [int(size[0]), int(size[0])]
    if isinstance(size, (list, tuple)) and len(size) == 2:
        return [int(size[0]), int(size[1])]
    raise ValueError(f"{name}: size must be an int or a (h, w) pair, got {size!r}")


def _interp(interpolation, name):
    value = getattr(interpolation, "value", interpolation)
    if str(value).lower() != "bilinear":
        raise ValueError(f"{name}: only bilinear interpolation is supported, got {interpolation!r}")
    return "bilinear"


class _Op:
    def spec(self):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}({self.spec()})"


class RandomResizedCrop(_Op):
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=InterpolationMode.BILINEAR, antialias=None):
        self.size = _pair(size, "RandomResizedCrop")
        self.scale = [float(scale[0]), float(scale[1])]
        self.ratio = [float(ratio[0]), float(ratio[1])]
        self.interpolation = _interp(interpolation, "RandomResizedCrop")

    def spec(self):
        return {"op": "RandomResizedCrop", "size": self.size, "scale": self.scale,
                "ratio": self.ratio, "interpolation": self.interpolation}


class Resize(_Op):
    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size=None,
                 antialias=None):
        if max_size is not None:
            raise ValueError("Resize: max_size is not supported")
        if isinstance(size, numbers.Integral):
            self.size = [int(size)]
        elif isinstance(size, (list, tuple)) and len(size) in (1, 2):
            self.size = [int(s) for s in size]
        else:
            raise ValueError(f"Resize: size must be an int or a (h, w) pair, got {size!r}")
        self.interpolation = _interp(interpolation, "Resize")

    def spec(self):
        return {"op": "Resize", "size": self.size, "interpolation": self.interpolation}


class CenterCrop(_Op):
    def __init__(self, size):
        self.size = _pair(size, "CenterCrop")

    def spec(self):
        return {"op": "CenterCrop", "size": self.size}


class RandomHorizontalFlip(_Op):
    def __init__(self, p=0.5):
        self.p = float(p)

    def spec(self):
        return {"op": "RandomHorizontalFlip", "p": self.p}


class Normalize:
    """Makes the output float32 NCHW: (x / 255 - mean) / std per channel."""

    def __init__(self, mean, std, inplace=False):
        self.mean = [float(m) for m in mean]
        self.std = [float(s) for s in std]
        if len(self.mean) != 3 or len(self.std) != 3:
            raise ValueError("Normalize: mean and std need one value per RGB channel")
        if any(s == 0 or math.isnan(s) for s in self.std):
            raise ValueError("Normalize: std must be non-zero")

    def __repr__(self):
        return f"Normalize(mean={self.mean}, std={self.std})"


class ToTensor:
    """Accepted for familiarity: galley always yields tensors. Alone it keeps
    uint8; followed by Normalize it yields float32."""

    def __repr__(self):
        return "ToTensor()"


PILToTensor = ToTensor


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)
        for t in self.transforms:
            if not isinstance(t, (_Op, Normalize, ToTensor)):
                raise TypeError(f"galley cannot run {t!r}; use the ops in galley.transforms")

    def __repr__(self):
        return "Compose(" + ", ".join(repr(t) for t in self.transforms) + ")"


def build_spec(transform, normalize=None, layout="NCHW"):
    """The pipeline description galleyd receives (docs/transforms.md)."""
    if transform is None:
        ops = []
    elif isinstance(transform, Compose):
        ops = transform.transforms
    else:
        ops = [transform]
    spec_ops, norm = [], None
    for t in ops:
        if isinstance(t, Normalize):
            norm = t
        elif isinstance(t, ToTensor):
            continue
        else:
            if norm is not None:
                raise ValueError("Normalize must come last in the pipeline")
            spec_ops.append(t.spec())
    if normalize is not None:
        if norm is not None:
            raise ValueError("give Normalize either in the transform or as normalize=, not both")
        norm = normalize if isinstance(normalize, Normalize) else Normalize(*normalize)
    output = {"layout": layout, "dtype": "uint8"}
    if norm is not None:
        if layout != "NCHW":
            raise ValueError("normalised float32 output is NCHW only")
        output.update({"dtype": "float32", "mean": norm.mean, "std": norm.std})
    return {"ops": spec_ops, "output": output}
