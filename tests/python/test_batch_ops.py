"""MixUp / CutMix (galley.batch_ops) against torchvision.transforms.v2's
definitions, their Beta(alpha, alpha) draws, and the loader option."""

import math
import random

import numpy as np
import pytest
import torch

import galley
from galley import batch_ops
from galley import transforms as T

pytestmark = pytest.mark.compat


def _batch(b=6, h=10, w=12, classes=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(b, 3, h, w, generator=g), torch.randint(classes, (b,), generator=g)


def test_mixup_is_torchvision_v2_mixup_for_the_drawn_lambda():
    images, labels = _batch()
    mix = batch_ops.MixUp(alpha=0.4, num_classes=5)
    lam = random.Random(1).betavariate(0.4, 0.4)
    out, targets = mix(images, labels, rng=random.Random(1))
    # v2.MixUp: inpt.roll(1, 0).mul_(1 - lam).add_(inpt.mul(lam)); labels one-hot, likewise.
    assert torch.equal(out, images.roll(1, 0).mul(1.0 - lam).add(images.mul(lam)))
    one_hot = torch.nn.functional.one_hot(labels, 5).float()
    assert torch.equal(targets, one_hot.roll(1, 0).mul(1.0 - lam).add(one_hot.mul(lam)))
    assert torch.allclose(targets.sum(1), torch.ones(6))


def test_cutmix_pastes_the_box_and_weights_labels_by_kept_area():
    images, labels = _batch(h=32, w=40)
    cut = batch_ops.CutMix(alpha=1.0, num_classes=5)
    (x1, y1, x2, y2), lam = cut.box(32, 40, random.Random(5))
    out, targets = cut(images, labels, rng=random.Random(5))
    rolled = images.roll(1, 0)
    assert torch.equal(out[..., y1:y2, x1:x2], rolled[..., y1:y2, x1:x2])
    mask = torch.ones(32, 40, dtype=torch.bool)
    mask[y1:y2, x1:x2] = False
    assert torch.equal(out[..., mask], images[..., mask])
    assert lam == pytest.approx(1 - (x2 - x1) * (y2 - y1) / (32 * 40))
    one_hot = torch.nn.functional.one_hot(labels, 5).float()
    assert torch.allclose(targets, lam * one_hot + (1 - lam) * one_hot.roll(1, 0))
    assert not torch.equal(images, out) or (x2 - x1) * (y2 - y1) == 0


def test_inputs_are_never_written_in_place():
    # The batch may be shared memory other jobs read.
    images, labels = _batch()
    before = images.clone()
    for op in (batch_ops.MixUp(1.0, 5), batch_ops.CutMix(1.0, 5)):
        op(images, labels, rng=random.Random(0))
    assert torch.equal(images, before)


def test_lambda_follows_beta_alpha_alpha():
    # alpha = 1: Beta(1, 1) is uniform; KS statistic * sqrt(n) < 1.95 (p = 0.001).
    n = 4000
    rng = random.Random(11)
    mix = batch_ops.MixUp(alpha=1.0, num_classes=2)
    images = torch.tensor([[[[1.0]]], [[[0.0]]]])  # lam is the first image's value
    lams = np.sort([float(mix(images, torch.tensor([0, 1]), rng=rng)[0][0, 0, 0, 0])
                    for _ in range(n)])
    d = max(np.max(np.arange(1, n + 1) / n - lams), np.max(lams - np.arange(n) / n))
    assert d * math.sqrt(n) < 1.95
    # alpha = 0.2: the mean 1/2 and variance 1 / (4 (2 alpha + 1)) of Beta(0.2, 0.2).
    mix = batch_ops.MixUp(alpha=0.2, num_classes=2)
    lams = np.array([float(mix(images, torch.tensor([0, 1]), rng=rng)[0][0, 0, 0, 0])
                     for _ in range(n)])
    var = 1 / (4 * 1.4)
    assert abs(lams.mean() - 0.5) < 4 * math.sqrt(var / n)
    assert abs(lams.var() - var) < 0.02


def test_random_choice_and_errors():
    images, labels = _batch()
    choice = batch_ops.RandomChoice([batch_ops.MixUp(1.0, 5), batch_ops.CutMix(1.0, 5)], p=[1, 0])
    out, _ = choice(images, labels, rng=random.Random(2))
    assert out.shape == images.shape
    with pytest.raises(ValueError, match="num_classes"):
        batch_ops.MixUp(1.0)
    with pytest.raises(ValueError, match="float images"):
        batch_ops.MixUp(1.0, 5)(torch.zeros(2, 3, 4, 4, dtype=torch.uint8), torch.tensor([0, 1]))


def test_loader_applies_the_batch_transform_with_soft_targets(daemon, folder):
    plain = galley.DataLoader(folder, batch_size=8, socket=daemon.socket, epochs=1,
                              transform=T.Resize((16, 16)))
    true_label = {}
    for _, labels, ids in plain.iter_with_ids():
        true_label.update(zip(ids.tolist(), labels.tolist()))
    plain.close()
    loader = galley.DataLoader(folder, batch_size=8, socket=daemon.socket, epochs=1, seed=4,
                               transform=T.Compose([T.Resize((32, 32)), T.ToTensor()]),
                               batch_transform=batch_ops.CutMix(1.0, num_classes=4))
    batches = 0
    for images, targets, ids in loader.iter_with_ids():
        assert images.dtype == torch.float32 and targets.dtype == torch.float32
        assert targets.shape == (images.shape[0], 4)
        # The mix the loader applied is the one (seed, epoch, ids) determine.
        _, lam = batch_ops.CutMix(1.0, 4).box(32, 32, batch_ops.batch_rng(4, 0, ids))
        y = torch.nn.functional.one_hot(torch.tensor([true_label[i] for i in ids.tolist()]), 4)
        assert torch.allclose(targets, lam * y + (1 - lam) * y.roll(1, 0))
        batches += 1
    loader.close()
    assert batches == len(true_label) // 8 + (len(true_label) % 8 > 0)


def test_batch_rng_is_a_pure_function_of_seed_epoch_and_batch():
    a = batch_ops.batch_rng(4, 2, [17, 3]).random()
    assert a == batch_ops.batch_rng(4, 2, [17, 5]).random()
    assert a != batch_ops.batch_rng(4, 3, [17, 3]).random()
