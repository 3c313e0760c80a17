"""Transforms with torchvision's names, defaults and semantics.

These do not run in Python: they describe the pipeline that galleyd applies
(docs/transforms.md). ``Compose([...])`` of them, or a torchvision
``transforms`` / ``transforms.v2`` pipeline, is passed to
``galley.DataLoader(transform=...)``; ``build_spec`` translates either into
the daemon's JSON spec and names any op galley cannot run. Randomness is a
pure function of (seed, epoch, item id), so a sample's augmentation does not
depend on the order in which the daemon prepares it.

Output: without ``ToTensor`` the batch is uint8 (``PILToTensor``'s values);
``ToTensor()`` (or ``PILToTensor`` + ``ConvertImageDtype(torch.float)``,
or v2's ``ToImage`` + ``ToDtype(torch.float32, scale=True)``) makes it
float32 in [0, 1]; a following ``Normalize`` normalises it. galley's own
``Normalize`` may also stand alone (it implies ``ToTensor``).
"""

from __future__ import annotations

import math
import numbers
import struct
from enum import Enum
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Union, cast

if TYPE_CHECKING:  # for type checkers only: Python 3.9 has no typing.TypeIs
    from typing_extensions import TypeIs


__all__ = [
    "Compose", "RandomResizedCrop", "Resize", "CenterCrop", "RandomHorizontalFlip",
    "RandomVerticalFlip", "RandomCrop", "Pad", "ColorJitter", "Grayscale", "RandomGrayscale",
    "GaussianBlur", "RandomRotation", "RandomAffine", "RandomApply", "RandomChoice",
    "RandomOrder", "AutoAugment", "AutoAugmentPolicy", "RandAugment", "TrivialAugmentWide",
    "AugMix", "RandomErasing", "Normalize", "ToTensor", "PILToTensor", "InterpolationMode", "build_spec",
]


# What the constructors accept, as torchvision's do. A size is an int (a
# square, or Resize's shorter side) or a (h, w) pair; a number-or-range is a
# number x, meaning [c - x, c + x] around the op's neutral value c, or a
# (min, max) pair; a padding is one value, or 2 or 4 (left, top, right,
# bottom); a fill is one value for all channels, one per RGB channel, or
# torchvision v2's {type: fill} mapping, whose image entry is used; an
# interpolation or AutoAugment policy is a name (the constants below) or
# torchvision's enum member.
_Size = Union[int, Sequence[int]]
_NumberOrRange = Union[float, Sequence[float]]
_Fill = Union[float, Sequence[float], Dict[Any, Any], None]
_Padding = Union[int, Sequence[int]]
_Interpolation = Union[str, Enum]
_Policy = Union[str, Enum]
# A transform's spec as galleyd receives it (JSON).
_Spec = Dict[str, Any]


class InterpolationMode:
    NEAREST = "nearest"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


class AutoAugmentPolicy:
    IMAGENET = "imagenet"
    CIFAR10 = "cifar10"
    SVHN = "svhn"


def _is_number(value: object) -> TypeIs[float]:
    """Any real number, NumPy's scalars too (numpy.float32 is no float)."""
    return isinstance(value, numbers.Number)


def _is_integral(value: object) -> TypeIs[int]:
    """Any integer, NumPy's scalars too."""
    return isinstance(value, numbers.Integral)


_RESIZE_INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "box", "hamming", "lanczos")
_WARP_INTERPOLATIONS = ("nearest", "bilinear", "bicubic")  # PIL's Image.transform


def _interp(interpolation: _Interpolation, name: str, warp: bool = False) -> str:
    value = str(getattr(interpolation, "value", interpolation)).lower()
    allowed = _WARP_INTERPOLATIONS if warp else _RESIZE_INTERPOLATIONS
    if value not in allowed:
        raise ValueError(f"{name}: interpolation {interpolation!r} is not supported by galley "
                         f"(supported: {', '.join(allowed)})")
    return value


def _pair(size: _Size, name: str) -> List[int]:
    if _is_integral(size):
        return [int(size), int(size)]
    if isinstance(size, (list, tuple)) and len(size) == 1:
        return [int(size[0]), int(size[0])]
    if isinstance(size, (list, tuple)) and len(size) == 2:
        return [int(size[0]), int(size[1])]
    raise ValueError(f"{name}: size must be an int or a (h, w) pair, got {size!r}")


def _range(value: Optional[_NumberOrRange], name: str,
           center: float = 0.0) -> Optional[List[float]]:
    """torchvision's number-or-(min, max) convention, as a list or None."""
    if value is None:
        return None
    if _is_number(value):
        return [center - float(value), center + float(value)]
    if len(value) != 2:
        raise ValueError(f"{name}: expected a number or (min, max), got {value!r}")
    return [float(value[0]), float(value[1])]


def _fill(fill: _Fill, name: str) -> List[float]:
    """A fill as three numbers; torchvision's per-type dict (v2) is reduced
    to its image entry."""
    if isinstance(fill, dict):
        values = [v for v in fill.values() if v is not None]
        return _fill(values[0] if values else 0, name)
    if fill is None:
        return [0.0, 0.0, 0.0]
    if _is_number(fill):
        return [float(fill)] * 3
    fill = [float(f) for f in fill]
    if len(fill) == 1:
        return fill * 3
    if len(fill) != 3:
        raise ValueError(f"{name}: fill needs one value or one per RGB channel, got {fill!r}")
    return fill


def _padding(padding: Optional[_Padding], name: str) -> Optional[List[int]]:
    if padding is None:
        return None
    if _is_integral(padding):
        return [int(padding)] * 4
    padding = [int(p) for p in padding]
    if len(padding) == 1:
        return padding * 4
    if len(padding) == 2:
        return [padding[0], padding[1], padding[0], padding[1]]
    if len(padding) == 4:
        return padding
    raise ValueError(f"{name}: padding must have 1, 2 or 4 values, got {padding!r}")


def _no_center(center: Optional[Sequence[float]], name: str) -> None:
    if center is not None:
        raise ValueError(f"{name}: only center=None (the image centre) is supported by galley")


class _Op:
    """An op galleyd runs; spec() is its JSON."""

    def spec(self) -> _Spec:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec()})"


class RandomResizedCrop(_Op):
    def __init__(self, size: _Size, scale: Sequence[float] = (0.08, 1.0),
                 ratio: Sequence[float] = (3.0 / 4.0, 4.0 / 3.0),
                 interpolation: _Interpolation = InterpolationMode.BILINEAR,
                 antialias: Optional[bool] = None) -> None:
        _check_antialias(antialias, "RandomResizedCrop")
        self.size = _pair(size, "RandomResizedCrop")
        self.scale = [float(scale[0]), float(scale[1])]
        self.ratio = [float(ratio[0]), float(ratio[1])]
        self.interpolation = _interp(interpolation, "RandomResizedCrop")

    def spec(self) -> _Spec:
        return {"op": "RandomResizedCrop", "size": self.size, "scale": self.scale,
                "ratio": self.ratio, "interpolation": self.interpolation}


def _check_antialias(antialias: Optional[bool], name: str) -> None:
    # PIL always antialiases, and so does galley; asking for aliasing cannot be honoured.
    if antialias is False:
        raise ValueError(f"{name}: antialias=False is not supported; galley resizes with "
                         "PIL's antialiased filters (antialias=True)")


class Resize(_Op):
    def __init__(self, size: _Size, interpolation: _Interpolation = InterpolationMode.BILINEAR,
                 max_size: Optional[int] = None, antialias: Optional[bool] = None) -> None:
        if max_size is not None:
            raise ValueError("Resize: max_size is not supported by galley")
        _check_antialias(antialias, "Resize")
        if _is_integral(size):
            self.size = [int(size)]
        elif isinstance(size, (list, tuple)) and len(size) in (1, 2):
            self.size = [int(s) for s in size]
        else:
            raise ValueError(f"Resize: size must be an int or a (h, w) pair, got {size!r}")
        self.interpolation = _interp(interpolation, "Resize")

    def spec(self) -> _Spec:
        return {"op": "Resize", "size": self.size, "interpolation": self.interpolation}


class CenterCrop(_Op):
    def __init__(self, size: _Size) -> None:
        self.size = _pair(size, "CenterCrop")

    def spec(self) -> _Spec:
        return {"op": "CenterCrop", "size": self.size}


class RandomHorizontalFlip(_Op):
    def __init__(self, p: float = 0.5) -> None:
        self.p = float(p)

    def spec(self) -> _Spec:
        return {"op": "RandomHorizontalFlip", "p": self.p}


class RandomVerticalFlip(_Op):
    def __init__(self, p: float = 0.5) -> None:
        self.p = float(p)

    def spec(self) -> _Spec:
        return {"op": "RandomVerticalFlip", "p": self.p}


class RandomCrop(_Op):
    def __init__(self, size: _Size, padding: Optional[_Padding] = None, pad_if_needed: bool = False,
                 fill: _Fill = 0, padding_mode: str = "constant") -> None:
        self.size = _pair(size, "RandomCrop")
        self.padding = _padding(padding, "RandomCrop")
        self.pad_if_needed = bool(pad_if_needed)
        self.fill = _fill(fill, "RandomCrop")
        self.padding_mode = str(padding_mode)

    def spec(self) -> _Spec:
        return {"op": "RandomCrop", "size": self.size, "padding": self.padding,
                "pad_if_needed": self.pad_if_needed, "fill": self.fill,
                "padding_mode": self.padding_mode}


class Pad(_Op):
    def __init__(self, padding: _Padding, fill: _Fill = 0, padding_mode: str = "constant") -> None:
        self.padding = _padding(padding, "Pad")
        self.fill = _fill(fill, "Pad")
        self.padding_mode = str(padding_mode)

    def spec(self) -> _Spec:
        return {"op": "Pad", "padding": self.padding, "fill": self.fill,
                "padding_mode": self.padding_mode}


class ColorJitter(_Op):
    def __init__(self, brightness: Optional[_NumberOrRange] = 0,
                 contrast: Optional[_NumberOrRange] = 0, saturation: Optional[_NumberOrRange] = 0,
                 hue: Optional[_NumberOrRange] = 0) -> None:
        def check(value: Optional[_NumberOrRange], name: str, center: float,
                  clip: bool) -> Optional[List[float]]:
            r = _range(value, f"ColorJitter {name}", center)
            if r is None or r == [center, center]:
                return None  # torchvision's None: the adjustment is not drawn
            if clip:
                r[0] = max(r[0], 0.0)
            return r
        self.brightness = check(brightness, "brightness", 1.0, True)
        self.contrast = check(contrast, "contrast", 1.0, True)
        self.saturation = check(saturation, "saturation", 1.0, True)
        self.hue = check(hue, "hue", 0.0, False)

    def spec(self) -> _Spec:
        return {"op": "ColorJitter", "brightness": self.brightness, "contrast": self.contrast,
                "saturation": self.saturation, "hue": self.hue}


class Grayscale(_Op):
    def __init__(self, num_output_channels: int = 1) -> None:
        if num_output_channels != 3:
            raise ValueError("Grayscale: galley's output has 3 channels; use "
                             "Grayscale(num_output_channels=3)")

    def spec(self) -> _Spec:
        return {"op": "Grayscale", "num_output_channels": 3}


class RandomGrayscale(_Op):
    def __init__(self, p: float = 0.1) -> None:
        self.p = float(p)

    def spec(self) -> _Spec:
        return {"op": "RandomGrayscale", "p": self.p}


class GaussianBlur(_Op):
    def __init__(self, kernel_size: _Size, sigma: _NumberOrRange = (0.1, 2.0)) -> None:
        self.kernel_size = _pair(kernel_size, "GaussianBlur")
        if _is_number(sigma):
            sigma = (sigma, sigma)
        self.sigma = [float(sigma[0]), float(sigma[1])]

    def spec(self) -> _Spec:
        return {"op": "GaussianBlur", "kernel_size": self.kernel_size, "sigma": self.sigma}


class RandomRotation(_Op):
    def __init__(self, degrees: _NumberOrRange,
                 interpolation: _Interpolation = InterpolationMode.NEAREST, expand: bool = False,
                 center: Optional[Sequence[float]] = None, fill: _Fill = 0) -> None:
        if expand:
            raise ValueError("RandomRotation: expand=True is not supported by galley (the "
                             "size would depend on the angle); crop or resize afterwards")
        _no_center(center, "RandomRotation")
        self.degrees = _range(degrees, "RandomRotation degrees")
        self.interpolation = _interp(interpolation, "RandomRotation", warp=True)
        self.fill = _fill(fill, "RandomRotation")

    def spec(self) -> _Spec:
        return {"op": "RandomRotation", "degrees": self.degrees,
                "interpolation": self.interpolation, "fill": self.fill}


class RandomAffine(_Op):
    def __init__(self, degrees: _NumberOrRange, translate: Optional[Sequence[float]] = None,
                 scale: Optional[Sequence[float]] = None, shear: Optional[_NumberOrRange] = None,
                 interpolation: _Interpolation = InterpolationMode.NEAREST, fill: _Fill = 0,
                 center: Optional[Sequence[float]] = None) -> None:
        _no_center(center, "RandomAffine")
        self.degrees = _range(degrees, "RandomAffine degrees")
        self.translate = None if translate is None else [float(t) for t in translate]
        self.scale = None if scale is None else [float(s) for s in scale]
        if shear is None:
            self.shear = None
        elif _is_number(shear) or len(shear) == 2:
            self.shear = _range(shear, "RandomAffine shear")
        else:
            self.shear = [float(s) for s in shear]
        self.interpolation = _interp(interpolation, "RandomAffine", warp=True)
        self.fill = _fill(fill, "RandomAffine")

    def spec(self) -> _Spec:
        return {"op": "RandomAffine", "degrees": self.degrees, "translate": self.translate,
                "scale": self.scale, "shear": self.shear, "interpolation": self.interpolation,
                "fill": self.fill}


class RandomApply(_Op):
    def __init__(self, transforms: Iterable[object], p: float = 0.5) -> None:
        self.transforms = list(transforms)
        self.p = float(p)

    def spec(self) -> _Spec:
        return {"op": "RandomApply", "transforms": _image_ops(self.transforms, "RandomApply"),
                "p": self.p}


class RandomChoice(_Op):
    def __init__(self, transforms: Iterable[object], p: Optional[Sequence[float]] = None) -> None:
        self.transforms = list(transforms)
        self.p = None if p is None else [float(w) for w in p]

    def spec(self) -> _Spec:
        return {"op": "RandomChoice", "transforms": _image_ops(self.transforms, "RandomChoice"),
                "p": self.p}


class RandomOrder(_Op):
    def __init__(self, transforms: Iterable[object]) -> None:
        self.transforms = list(transforms)

    def spec(self) -> _Spec:
        return {"op": "RandomOrder", "transforms": _image_ops(self.transforms, "RandomOrder")}


class AutoAugment(_Op):
    def __init__(self, policy: _Policy = AutoAugmentPolicy.IMAGENET,
                 interpolation: _Interpolation = InterpolationMode.NEAREST,
                 fill: _Fill = None) -> None:
        self.policy = str(getattr(policy, "value", policy)).lower()
        self.interpolation = _interp(interpolation, "AutoAugment", warp=True)
        self.fill = _fill(fill, "AutoAugment")

    def spec(self) -> _Spec:
        return {"op": "AutoAugment", "policy": self.policy, "interpolation": self.interpolation,
                "fill": self.fill}


class RandAugment(_Op):
    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31,
                 interpolation: _Interpolation = InterpolationMode.NEAREST,
                 fill: _Fill = None) -> None:
        self.num_ops, self.magnitude = int(num_ops), int(magnitude)
        self.num_magnitude_bins = int(num_magnitude_bins)
        self.interpolation = _interp(interpolation, "RandAugment", warp=True)
        self.fill = _fill(fill, "RandAugment")

    def spec(self) -> _Spec:
        return {"op": "RandAugment", "num_ops": self.num_ops, "magnitude": self.magnitude,
                "num_magnitude_bins": self.num_magnitude_bins,
                "interpolation": self.interpolation, "fill": self.fill}


class TrivialAugmentWide(_Op):
    def __init__(self, num_magnitude_bins: int = 31,
                 interpolation: _Interpolation = InterpolationMode.NEAREST,
                 fill: _Fill = None) -> None:
        self.num_magnitude_bins = int(num_magnitude_bins)
        self.interpolation = _interp(interpolation, "TrivialAugmentWide", warp=True)
        self.fill = _fill(fill, "TrivialAugmentWide")

    def spec(self) -> _Spec:
        return {"op": "TrivialAugmentWide", "num_magnitude_bins": self.num_magnitude_bins,
                "interpolation": self.interpolation, "fill": self.fill}


class AugMix(_Op):
    """torchvision's AugMix (Hendrycks et al., ICLR 2020). Like torchvision,
    its chains run torchvision's tensor kernels even on PIL images, so only
    nearest and bilinear interpolation exist; ``fill`` None leaves zeros
    outside a warped image (torchvision's default), a colour fills it."""

    def __init__(self, severity: int = 3, mixture_width: int = 3, chain_depth: int = -1,
                 alpha: float = 1.0, all_ops: bool = True,
                 interpolation: _Interpolation = InterpolationMode.BILINEAR,
                 fill: _Fill = None) -> None:
        value = str(getattr(interpolation, "value", interpolation)).lower()
        if value not in ("nearest", "bilinear"):
            raise ValueError(f"AugMix: interpolation {interpolation!r} is not supported "
                             "(torchvision's AugMix runs its tensor kernels, which have only "
                             "nearest and bilinear)")
        if not 1 <= int(severity) <= 10:
            raise ValueError(f"AugMix: severity must lie in [1, 10], got {severity!r}")
        if not 1 <= int(mixture_width) <= 8:
            raise ValueError(f"AugMix: galley supports mixture_width 1..8, got {mixture_width!r}")
        if int(chain_depth) > 8:
            raise ValueError(f"AugMix: galley supports chain_depth up to 8, got {chain_depth!r}")
        if not float(alpha) > 0:
            raise ValueError(f"AugMix: alpha must be positive, got {alpha!r}")
        self.severity, self.mixture_width = int(severity), int(mixture_width)
        self.chain_depth = int(chain_depth) if int(chain_depth) > 0 else -1
        self.alpha, self.all_ops = float(alpha), bool(all_ops)
        self.interpolation = value
        if isinstance(fill, dict):  # v2: {type: fill}
            values = [v for v in fill.values() if v is not None]
            fill = values[0] if values else None
        self.fill = None if fill is None else _fill(fill, "AugMix")

    def spec(self) -> _Spec:
        return {"op": "AugMix", "severity": self.severity, "mixture_width": self.mixture_width,
                "chain_depth": self.chain_depth, "alpha": self.alpha, "all_ops": self.all_ops,
                "interpolation": self.interpolation, "fill": self.fill}


class RandomErasing:
    """Erases a rectangle of the output tensor (so it comes after ToTensor).
    ``value`` is in the units of the tensor at that point: [0, 1] after
    ToTensor, normalised units after Normalize."""

    def __init__(self, p: float = 0.5, scale: Sequence[float] = (0.02, 0.33),
                 ratio: Sequence[float] = (0.3, 3.3),
                 value: Union[float, Sequence[float], str, None] = 0,
                 inplace: bool = False) -> None:
        self.p = float(p)
        self.scale = [float(scale[0]), float(scale[1])]
        self.ratio = [float(ratio[0]), float(ratio[1])]
        self.value: Union[str, List[float]]  # "random", or one value per channel
        if isinstance(value, str):
            if value != "random":
                raise ValueError(f'RandomErasing: value must be a number, a tuple or "random", '
                                 f"got {value!r}")
            self.value = "random"
        elif value is None:
            self.value = "random"  # torchvision's get_params draws normal noise for None
        else:
            self.value = _fill(value, "RandomErasing value")

    def __repr__(self) -> str:
        return (f"RandomErasing(p={self.p}, scale={self.scale}, ratio={self.ratio}, "
                f"value={self.value!r})")


class Normalize:
    """(x - mean) / std per channel on the float tensor; alone it also
    implies ToTensor's scaling to [0, 1]."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> None:
        self.mean = [float(m) for m in mean]
        self.std = [float(s) for s in std]
        if len(self.mean) != 3 or len(self.std) != 3:
            raise ValueError("Normalize: mean and std need one value per RGB channel")
        if any(s == 0 or math.isnan(s) for s in self.std):
            raise ValueError("Normalize: std must be non-zero")

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean}, std={self.std})"


class ToTensor:
    """torchvision's ToTensor: float32 in [0, 1], CHW."""

    def __repr__(self) -> str:
        return "ToTensor()"


class PILToTensor:
    """torchvision's PILToTensor: uint8, CHW (galley's default output)."""

    def __repr__(self) -> str:
        return "PILToTensor()"


class Compose:
    def __init__(self, transforms: Iterable[object]) -> None:
        self.transforms = list(transforms)

    def __repr__(self) -> str:
        return "Compose(" + ", ".join(repr(t) for t in self.transforms) + ")"


# What galleyd runs: the ops above, and the steps that set the output tensor.
_GalleyTransform = Union[_Op, RandomErasing, Normalize, ToTensor, PILToTensor]


# --- torchvision objects ---------------------------------------------------

def _is_torchvision(t: object) -> bool:
    return type(t).__module__.startswith("torchvision.")


def _tv_ops(t: Any) -> List[_GalleyTransform]:
    """The galley objects for one torchvision transform (a list: Compose
    expands), or raises ValueError naming what galley cannot run."""
    name = type(t).__name__

    def g(attr: str, default: Any = None) -> Any:
        return getattr(t, attr, default)

    if name == "Compose":
        return [op for child in t.transforms for op in _translate(child)]
    if name == "RandomResizedCrop":
        return [RandomResizedCrop(g("size"), g("scale"), g("ratio"), g("interpolation"),
                                  g("antialias"))]
    if name == "Resize":
        return [Resize(g("size"), g("interpolation"), g("max_size"), g("antialias"))]
    if name == "CenterCrop":
        return [CenterCrop(g("size"))]
    if name == "RandomHorizontalFlip":
        return [RandomHorizontalFlip(g("p"))]
    if name == "RandomVerticalFlip":
        return [RandomVerticalFlip(g("p"))]
    if name == "RandomCrop":
        return [RandomCrop(g("size"), g("padding"), g("pad_if_needed"), g("fill"),
                           g("padding_mode"))]
    if name == "Pad":
        return [Pad(g("padding"), g("fill"), g("padding_mode"))]
    if name == "ColorJitter":
        jitter = ColorJitter()
        for attr in ("brightness", "contrast", "saturation", "hue"):
            value = g(attr)  # already (min, max) or None in torchvision
            setattr(jitter, attr, None if value is None else [float(v) for v in value])
        return [jitter]
    if name == "Grayscale":
        return [Grayscale(g("num_output_channels"))]
    if name == "RandomGrayscale":
        return [RandomGrayscale(g("p"))]
    if name == "GaussianBlur":
        return [GaussianBlur(list(g("kernel_size")), g("sigma"))]
    if name == "RandomRotation":
        return [RandomRotation(g("degrees"), g("interpolation"), g("expand"), g("center"),
                               g("fill"))]
    if name == "RandomAffine":
        return [RandomAffine(g("degrees"), g("translate"), g("scale"), g("shear"),
                             g("interpolation"), g("fill"), g("center"))]
    if name in ("RandomApply", "RandomOrder"):
        children = [op for child in t.transforms for op in _translate(child)]
        return [RandomApply(children, g("p")) if name == "RandomApply" else RandomOrder(children)]
    if name == "RandomChoice":
        children = []
        for child in t.transforms:
            ops = _translate(child)
            if len(ops) != 1:
                raise ValueError("RandomChoice: each choice must be a single op in galley")
            children.append(ops[0])
        return [RandomChoice(children, g("p"))]
    if name == "AutoAugment":
        return [AutoAugment(g("policy"), g("interpolation"), g("fill"))]
    if name == "RandAugment":
        return [RandAugment(g("num_ops"), g("magnitude"), g("num_magnitude_bins"),
                            g("interpolation"), g("fill"))]
    if name == "TrivialAugmentWide":
        return [TrivialAugmentWide(g("num_magnitude_bins"), g("interpolation"), g("fill"))]
    if name == "AugMix":
        return [AugMix(g("severity"), g("mixture_width"), g("chain_depth"), g("alpha"),
                       g("all_ops"), g("interpolation"), g("fill"))]
    if name == "RandomErasing":
        # inplace only says whether torchvision copies first: the output is the same.
        return [RandomErasing(g("p"), g("scale"), g("ratio"), g("value"))]
    if name == "Normalize":
        return [Normalize(g("mean"), g("std"))]
    if name == "ToTensor":
        return [ToTensor()]
    if name in ("PILToTensor", "ToImage", "ToImageTensor", "ToPureTensor"):
        return [PILToTensor()]
    if name in ("ConvertImageDtype", "ToDtype"):
        return [_to_float(t, name)]
    raise ValueError(f"galley cannot run torchvision's {name} in the daemon (supported: "
                     "Compose, RandomResizedCrop, Resize, CenterCrop, RandomCrop, Pad, "
                     "Random{Horizontal,Vertical}Flip, ColorJitter, Grayscale, RandomGrayscale, "
                     "GaussianBlur, RandomRotation, RandomAffine, RandomApply, RandomChoice, "
                     "RandomOrder, AutoAugment, RandAugment, TrivialAugmentWide, AugMix, RandomErasing, "
                     "ToTensor, PILToTensor, ToImage, ConvertImageDtype/ToDtype(float32), "
                     "Normalize); apply it to the batch in the training loop instead")


def _to_float(t: Any, name: str) -> Union[PILToTensor, ToTensor]:
    import torch  # only torchvision objects get here, so torch is installed
    dtype = getattr(t, "dtype", None)
    if isinstance(dtype, dict):  # v2: {type: dtype}
        dtype = next(iter(dtype.values()), None)
    if dtype == torch.uint8:
        return PILToTensor()
    if dtype != torch.float32:
        raise ValueError(f"{name}: galley outputs uint8 or float32, not {dtype}")
    if name == "ToDtype" and not getattr(t, "scale", False):
        raise ValueError("ToDtype(torch.float32, scale=False) keeps 0..255 floats; galley "
                         "supports scale=True (values in [0, 1], as ToTensor)")
    return ToTensor()


def _translate(t: object) -> List[_GalleyTransform]:
    if isinstance(t, Compose):
        return [op for child in t.transforms for op in _translate(child)]
    if isinstance(t, (list, tuple)):
        return [op for child in t for op in _translate(child)]
    if isinstance(t, (_Op, RandomErasing, Normalize, ToTensor, PILToTensor)):
        return [t]
    if _is_torchvision(t):
        return _tv_ops(t)
    raise TypeError(f"galley cannot run {t!r} in the daemon; use galley.transforms or "
                    "torchvision transforms")


def _image_ops(transforms: Iterable[object], name: str) -> List[_Spec]:
    specs = []
    for op in [op for t in transforms for op in _translate(t)]:
        if not isinstance(op, _Op):
            raise ValueError(f"{name}: {op!r} cannot be inside {name}")
        specs.append(op.spec())
    return specs


def _float32(x: float) -> float:
    """x rounded to float32, as a Python float."""
    return float(struct.unpack("f", struct.pack("f", float(x)))[0])


def _as_normalize(normalize: Union[Normalize, Sequence[Sequence[float]]]) -> Normalize:
    """build_spec's normalize=: a Normalize, or its arguments (mean, std)."""
    if isinstance(normalize, Normalize):
        return normalize
    return Normalize(*cast(Sequence[Any], normalize))  # Normalize checks what it is given


def build_spec(transform: object,
               normalize: Union[Normalize, Sequence[Sequence[float]], None] = None,
               layout: str = "NCHW") -> _Spec:
    """The pipeline description galleyd receives (docs/transforms.md).

    ``transform`` is a galley or torchvision (v1 or v2) transform, a
    ``Compose`` of them, or a list. Raises ValueError / TypeError naming any
    op or argument galley cannot honour."""
    ops = [] if transform is None else _translate(transform)
    spec_ops: List[_Spec] = []
    dtype = "uint8"
    norm: Optional[Normalize] = None  # (mean, std) once Normalize has run
    tensor = False  # a ToTensor-like op has run
    for t in ops:
        if isinstance(t, ToTensor):
            dtype, tensor = "float32", True
        elif isinstance(t, PILToTensor):
            tensor = True
        elif isinstance(t, Normalize):
            if norm is not None:
                raise ValueError("Normalize may appear once")
            dtype, tensor, norm = "float32", True, t
        elif isinstance(t, RandomErasing):
            if not tensor:
                raise ValueError("RandomErasing works on tensors: put it after ToTensor / "
                                 "PILToTensor (or Normalize)")
            spec_ops.append(_erasing_spec(t, norm, normalize, ops))
        else:
            spec_ops.append(t.spec())
    if normalize is not None:
        if norm is not None:
            raise ValueError("give Normalize either in the transform or as normalize=, not both")
        norm = _as_normalize(normalize)
        dtype = "float32"
    output: _Spec = {"layout": layout, "dtype": dtype}
    if dtype == "float32":
        if layout != "NCHW":
            raise ValueError("float32 output is NCHW only")
        output["mean"] = norm.mean if norm else [0.0, 0.0, 0.0]
        output["std"] = norm.std if norm else [1.0, 1.0, 1.0]
    return {"ops": spec_ops, "output": output}


def _erasing_spec(t: RandomErasing, norm_before: Optional[Normalize],
                  normalize_arg: Union[Normalize, Sequence[Sequence[float]], None],
                  ops: List[_GalleyTransform]) -> _Spec:
    """RandomErasing's value in the output's units: a value given before a
    later Normalize is normalised as torchvision's Normalize would (float32)."""
    value = t.value
    later: Optional[Normalize] = None
    index = next(i for i, o in enumerate(ops) if o is t)
    for o in ops[index + 1:]:
        if isinstance(o, Normalize):
            later = o
    if norm_before is None and later is None and normalize_arg is not None:
        later = _as_normalize(normalize_arg)
    if later is not None:
        if isinstance(value, str):  # "random"
            raise ValueError('RandomErasing(value="random") before Normalize is not supported; '
                             "put it after Normalize")
        # torchvision's Normalize in float32: (v - mean) / std, each step rounded.
        value = [_float32(_float32(_float32(v) - _float32(m)) / _float32(s))
                 for v, m, s in zip(value, later.mean, later.std)]
    float_output = any(isinstance(o, (ToTensor, Normalize)) for o in ops) or normalize_arg
    if not isinstance(value, str) and not float_output:
        value = [float(int(v)) for v in value]  # a uint8 tensor keeps whole levels
    return {"op": "RandomErasing", "p": t.p, "scale": t.scale, "ratio": t.ratio, "value": value}
