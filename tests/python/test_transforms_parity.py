"""torchvision pipelines translated by galley.transforms.build_spec and run by
a real galleyd, compared with torchvision on the same JPEGs.

Random ops are given degenerate ranges (p=1, (a, a) intervals), which makes
torchvision's draws fixed, so the two pipelines must agree pixel for pixel
(docs/transforms.md, "Parity"). Op-by-op parity with forced parameters is in
tests/unit/image_pixel_ops_test.cc; the draws' distributions are tested in
tests/unit/image_transforms_test.cc.
"""

import PIL
import pytest
import torch
import torchvision
from torchvision import transforms as TV
from torchvision.transforms import InterpolationMode as IM

import galley
from galley import transforms as T

pytestmark = pytest.mark.compat

BICUBIC = IM.BICUBIC

# galley reproduces Pillow 9's arithmetic and decodes JPEGs with the system's
# libjpeg-turbo, as Debian's Pillow 9.4 does: there the pixels are identical.
# A newer Pillow wheel bundles its own libjpeg-turbo, whose decoded pixels
# may differ by a level, which the ops then carry (colour ops can scale it).
SAME_PILLOW = PIL.__version__.startswith("9.")


def allowed(levels):
    return 0.0 if SAME_PILLOW else float(levels)


def _compare(folder, daemon, transform, batch_size=8):
    """Max |galley - torchvision| over the whole folder, and the item count."""
    reference = torchvision.datasets.ImageFolder(str(folder), transform=transform)
    loader = galley.DataLoader(folder, batch_size=batch_size, transform=transform,
                               socket=daemon.socket, epochs=1)
    worst, seen = 0.0, 0
    for images, labels, ids in loader.iter_with_ids():
        for image, label, item in zip(images, labels, ids.tolist()):
            expected, expected_label = reference[item]
            assert image.dtype == expected.dtype and image.shape == expected.shape
            worst = max(worst, float((image.double() - expected.double()).abs().max()))
            assert int(label) == expected_label
            seen += 1
    loader.close()
    assert seen == len(reference)
    return worst


def test_torchvision_compose_is_translated_and_pixel_identical(daemon, folder):
    # Every op below runs in the daemon: geometry, padding modes, colour in
    # a fixed order, warps with fill, containers, then ToTensor + Normalize.
    pipeline = TV.Compose([
        TV.Resize(72, interpolation=BICUBIC),
        TV.CenterCrop(64),
        TV.RandomApply([TV.ColorJitter(brightness=(1.3, 1.3))], p=1.0),
        TV.ColorJitter(hue=(0.1, 0.1)),
        TV.RandomChoice([TV.ColorJitter(saturation=(0.6, 0.6))]),
        TV.RandomOrder([TV.ColorJitter(contrast=(1.4, 1.4))]),
        TV.RandomAffine(degrees=(5, 5), scale=(1.1, 1.1), shear=(7, 7, -3, -3),
                        interpolation=IM.BILINEAR, fill=(10, 20, 30)),
        TV.RandomRotation((17, 17), fill=(200, 100, 0)),
        TV.RandomVerticalFlip(p=1.0),
        TV.Pad([2, 3, 4, 1], padding_mode="reflect"),
        TV.RandomCrop(60, padding=2, padding_mode="symmetric"),
        TV.RandomHorizontalFlip(p=1.0),
        TV.ToTensor(),
        TV.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    spec = T.build_spec(pipeline)
    assert spec["output"]["dtype"] == "float32"
    assert [op["op"] for op in spec["ops"]][:4] == ["Resize", "CenterCrop", "RandomApply",
                                                   "ColorJitter"]
    # RandomCrop(60) of the 74x72 padded image is random: make it fixed by
    # cropping the whole image instead.
    pipeline.transforms[10] = TV.RandomCrop((72, 74), padding=2, padding_mode="symmetric")
    assert _compare(folder, daemon, pipeline) <= allowed(3) / 255 / 0.224


@pytest.mark.parametrize("mode", [IM.NEAREST, IM.BOX, IM.HAMMING, IM.LANCZOS])
@pytest.mark.parametrize("flip_first", [False, True])
def test_every_resize_interpolation_matches(daemon, folder, mode, flip_first):
    # A flip before the resize stays pending in galley (applied at the end);
    # for nearest, a point sample, it must be applied first instead.
    flip = [TV.RandomHorizontalFlip(p=1.0)] if flip_first else []
    pipeline = TV.Compose(flip + [TV.Resize(45, interpolation=mode), TV.CenterCrop(40),
                                  TV.PILToTensor()])
    assert _compare(folder, daemon, pipeline) <= allowed(1)


def test_grayscale_blur_and_uint8_output(daemon, folder):
    pipeline = TV.Compose([TV.Resize((48, 40)), TV.RandomGrayscale(p=1.0),
                           TV.PILToTensor()])
    assert _compare(folder, daemon, pipeline) <= allowed(1)
    # GaussianBlur: torchvision convolves in float32 (its tensor kernel),
    # galley in double; a sum on a rounding edge may land one level apart.
    blurred = TV.Compose([TV.Resize((48, 40)), TV.GaussianBlur(5, sigma=(1.3, 1.3)),
                          TV.PILToTensor()])
    assert _compare(folder, daemon, blurred) <= 1.0 + allowed(1)


@pytest.mark.parametrize("transform", [
    TV.AutoAugment(TV.AutoAugmentPolicy.IMAGENET),
    TV.AutoAugment(TV.AutoAugmentPolicy.CIFAR10),
    TV.AutoAugment(TV.AutoAugmentPolicy.SVHN, fill=[128, 128, 128]),
    TV.RandAugment(),
    TV.TrivialAugmentWide(interpolation=IM.BILINEAR),
    TV.AugMix(),
    TV.AugMix(severity=7, mixture_width=2, chain_depth=2, all_ops=False,
              interpolation=IM.NEAREST, fill=[10, 20, 30]),
    TV.RandomErasing(p=1.0, value="random"),
    TV.RandomErasing(p=1.0, value=(0.5, 0.2, 0.1)),
], ids=lambda t: type(t).__name__)
def test_random_recipes_run_and_change_pixels(daemon, folder, transform):
    tail = [TV.ToTensor(), TV.Normalize([0.5] * 3, [0.25] * 3)]
    image_op = not isinstance(transform, TV.RandomErasing)
    head = [TV.RandomResizedCrop(32, interpolation=BICUBIC)]
    pipeline = TV.Compose(head + ([transform] if image_op else []) + tail +
                          ([] if image_op else [transform]))
    plain = TV.Compose(head + tail)
    kwargs = dict(batch_size=16, socket=daemon.socket, epochs=1, seed=3)
    augmented = galley.DataLoader(folder, transform=pipeline, **kwargs)
    baseline = galley.DataLoader(folder, transform=plain, **kwargs)
    def by_id(loader):
        samples = {}
        for images, _, ids in loader.iter_with_ids():
            assert images.dtype == torch.float32 and torch.isfinite(images).all()
            samples.update(zip(ids.tolist(), images))
        loader.close()
        return samples
    a, b = by_id(augmented), by_id(baseline)
    assert a.keys() == b.keys()
    total = len(a)
    changed = sum(int(not torch.equal(a[i], b[i])) for i in a)
    # Same crop (same seed), so any difference is the augmentation's.
    assert changed >= total // 3, f"{changed} of {total} samples changed"


def test_random_erasing_value_is_normalised_like_torchvision():
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    spec = T.build_spec(TV.Compose([TV.CenterCrop(8), TV.ToTensor(),
                                    TV.RandomErasing(p=1.0, value=(1.0, 0.5, 0.0)),
                                    TV.Normalize(mean, std)]))
    erasing = spec["ops"][-1]
    expected = ((torch.tensor([1.0, 0.5, 0.0]) - torch.tensor(mean)) / torch.tensor(std)).tolist()
    assert erasing["value"] == expected
    assert spec["output"] == {"layout": "NCHW", "dtype": "float32", "mean": mean, "std": std}


def test_to_tensor_gives_float_in_unit_range(daemon, folder):
    loader = galley.DataLoader(folder, batch_size=4, socket=daemon.socket, epochs=1,
                               transform=TV.Compose([TV.Resize((24, 24)), TV.ToTensor()]))
    images, _ = next(iter(loader))
    assert images.dtype == torch.float32
    assert 0.0 <= float(images.min()) and float(images.max()) <= 1.0
    loader.close()


@pytest.mark.parametrize("transform, message", [
    (TV.Lambda(lambda x: x), "Lambda"),
    (TV.RandomPerspective(), "RandomPerspective"),
    (TV.RandomRotation(10, interpolation=IM.BOX), "box"),
    (TV.Resize(32, interpolation=getattr(IM, "NEAREST_EXACT", "nearest-exact")),
     "nearest-exact"),
    (TV.RandomRotation(10, expand=True), "expand"),
    (TV.RandomAffine(10, center=(3, 4)), "center"),
    (TV.Grayscale(), "num_output_channels"),
    (TV.Compose([TV.CenterCrop(8), TV.RandomErasing()]), "after ToTensor"),
    (TV.AugMix(interpolation=IM.BICUBIC), "AugMix.*nearest and bilinear"),
    (TV.AugMix(mixture_width=12), "mixture_width"),
])
def test_unsupported_ops_and_arguments_are_named(transform, message):
    with pytest.raises((ValueError, TypeError), match=message):
        T.build_spec(TV.Compose([TV.CenterCrop(8), transform]))


def test_galley_native_ops_give_the_same_spec_as_torchvision_objects():
    native = T.Compose([T.RandomCrop(32, padding=4, padding_mode="reflect"),
                        T.ColorJitter(0.4, 0.4, 0.4, 0.1), T.TrivialAugmentWide(),
                        T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3),
                        T.RandomErasing(p=0.25)])
    torchvision_objects = TV.Compose([TV.RandomCrop(32, padding=4, padding_mode="reflect"),
                                      TV.ColorJitter(0.4, 0.4, 0.4, 0.1),
                                      TV.TrivialAugmentWide(), TV.ToTensor(),
                                      TV.Normalize([0.5] * 3, [0.5] * 3),
                                      TV.RandomErasing(p=0.25)])
    assert T.build_spec(native) == T.build_spec(torchvision_objects)


def test_augmix_translates_every_argument():
    # Op-by-op and whole-AugMix parity with forced draws is in
    # tests/unit/image_tensor_ops_test.cc; here the arguments must all arrive.
    spec = T.build_spec(TV.Compose([TV.CenterCrop(8), TV.AugMix(
        severity=5, mixture_width=2, chain_depth=3, alpha=0.5, all_ops=False,
        interpolation=IM.NEAREST, fill=[1, 2.5, 3])]))
    assert spec["ops"][1] == {"op": "AugMix", "severity": 5, "mixture_width": 2,
                              "chain_depth": 3, "alpha": 0.5, "all_ops": False,
                              "interpolation": "nearest", "fill": [1.0, 2.5, 3.0]}
    default = T.build_spec(TV.Compose([TV.CenterCrop(8), TV.AugMix()]))["ops"][1]
    assert default == T.AugMix().spec()
    assert default["fill"] is None and default["interpolation"] == "bilinear"
    assert default["chain_depth"] == -1


def _v2():
    # torchvision.transforms.v2 exists from torchvision 0.15 on; Debian's
    # 0.14 has none, so these run in the PyTorch 2.x venv of scripts/test.sh.
    return pytest.importorskip("torchvision.transforms.v2")


def test_v2_objects_translate_like_v1(daemon, folder):
    v2 = _v2()
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    recipe_v2 = v2.Compose([v2.RandomResizedCrop(32, interpolation=BICUBIC),
                            v2.RandomHorizontalFlip(), v2.TrivialAugmentWide(),
                            v2.ColorJitter(0.4, 0.4, 0.4, 0.1), v2.RandomGrayscale(),
                            v2.RandomCrop(32, padding=4, padding_mode="reflect"),
                            v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                            v2.Normalize(mean, std), v2.RandomErasing(p=0.25, value=0.5)])
    recipe_v1 = TV.Compose([TV.RandomResizedCrop(32, interpolation=BICUBIC),
                            TV.RandomHorizontalFlip(), TV.TrivialAugmentWide(),
                            TV.ColorJitter(0.4, 0.4, 0.4, 0.1), TV.RandomGrayscale(),
                            TV.RandomCrop(32, padding=4, padding_mode="reflect"),
                            TV.ToTensor(), TV.Normalize(mean, std),
                            TV.RandomErasing(p=0.25, value=0.5)])
    assert T.build_spec(recipe_v2) == T.build_spec(recipe_v1)
    # A deterministic v2 pipeline on PIL images: v2 dispatches PIL inputs to
    # the same PIL kernels, so the pixels match as for v1.
    fixed = v2.Compose([v2.Resize(40, interpolation=BICUBIC), v2.CenterCrop(36),
                        v2.RandomAffine(degrees=(9, 9), interpolation=IM.BILINEAR),
                        v2.ColorJitter(saturation=(1.5, 1.5)), v2.PILToTensor()])
    assert _compare(folder, daemon, fixed) <= allowed(2)


def test_v2_augmix_translates_like_v1():
    v2 = _v2()
    kwargs = dict(severity=4, mixture_width=2, chain_depth=1, alpha=0.7, all_ops=False,
                  interpolation=IM.NEAREST, fill=[5, 6, 7])
    assert (T.build_spec(v2.Compose([v2.CenterCrop(8), v2.AugMix(**kwargs)])) ==
            T.build_spec(TV.Compose([TV.CenterCrop(8), TV.AugMix(**kwargs)])))
    assert (T.build_spec(v2.Compose([v2.CenterCrop(8), v2.AugMix()])) ==
            T.build_spec(TV.Compose([TV.CenterCrop(8), TV.AugMix()])))


def test_v2_mixup_and_cutmix_objects_become_batch_ops():
    v2 = _v2()
    from galley import batch_ops
    op = batch_ops.resolve(v2.RandomChoice([v2.MixUp(alpha=0.2, num_classes=10),
                                            v2.CutMix(alpha=1.0, num_classes=10)]))
    assert isinstance(op, batch_ops.RandomChoice)
    assert [type(t).__name__ for t in op.transforms] == ["MixUp", "CutMix"]
    assert op.transforms[0].alpha == 0.2 and op.transforms[1].num_classes == 10


def test_heavy_recipe_is_the_same_with_region_and_full_decodes(daemon, folder, workdir):
    # Without a cache galleyd decodes only the first crop's rectangle; the
    # pixel ops after it must see the same pixels as after a full decode.
    from conftest import start_daemon, stop_daemon
    recipe = TV.Compose([TV.RandomResizedCrop(40, interpolation=BICUBIC),
                         TV.RandomHorizontalFlip(), TV.TrivialAugmentWide(),
                         TV.RandomRotation(20), TV.ToTensor(),
                         TV.RandomErasing(p=0.5, value="random")])

    def samples(socket):
        loader = galley.DataLoader(folder, batch_size=10, transform=recipe, seed=5,
                                   socket=socket, epochs=1)
        out = {}
        for images, _labels, ids in loader.iter_with_ids():
            out.update({i: img.clone() for i, img in zip(ids.tolist(), images)})
        loader.close()
        return out

    region_dir = workdir / "region-recipe"
    region_dir.mkdir()
    uncached = start_daemon(region_dir, "--cache-bytes", "0", "--allowed-root", str(folder))
    try:
        partial = samples(uncached.socket)
        assert uncached.query()["pipeline"]["region_decodes"] >= len(partial)
    finally:
        stop_daemon(uncached)
    whole = samples(daemon.socket)
    assert partial.keys() == whole.keys()
    assert all(torch.equal(partial[i], whole[i]) for i in whole)
