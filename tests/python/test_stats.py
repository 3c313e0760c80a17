"""The uniformity tests used on galley's order must be able to fail."""

import math
import random

from stats import chi2_sf, first_pair_p, position_table_p


def test_chi2_tail_matches_closed_forms():
    # df = 2: P(X >= x) = exp(-x / 2). df = 1: erfc(sqrt(x / 2)).
    # df = 4: exp(-x / 2) (1 + x / 2).
    for x in (0.1, 1.0, 5.0, 20.0, 80.0):
        assert math.isclose(chi2_sf(x, 2), math.exp(-x / 2), rel_tol=1e-9)
        assert math.isclose(chi2_sf(x, 1), math.erfc(math.sqrt(x / 2)), rel_tol=1e-7)
        assert math.isclose(chi2_sf(x, 4), math.exp(-x / 2) * (1 + x / 2), rel_tol=1e-9)
    # The median of chi-square(df) is close to df (1 - 2 / (9 df))^3.
    assert abs(chi2_sf(121 * (1 - 2 / (9 * 121)) ** 3, 121) - 0.5) < 0.01


def biased_shuffle(n, rng, bias):
    """Item 0 goes first with extra probability `bias`; otherwise uniform."""
    order = list(range(n))
    rng.shuffle(order)
    if rng.random() < bias:
        order.remove(0)
        order.insert(0, 0)
    return order


def test_uniform_shuffles_pass_and_a_5_percent_bias_fails():
    # "A 5% bias": 5% of the probability of the first position moved onto
    # one item. With the sizes test_loader.py uses the test must catch it.
    n, trials = 12, 3600
    rng = random.Random(1)
    fair = [biased_shuffle(n, rng, 0.0) for _ in range(trials)]
    assert position_table_p(fair, n) > 0.001
    assert first_pair_p(fair, n) > 0.001
    rejected = 0
    for seed in range(10):
        rng = random.Random(100 + seed)
        biased = [biased_shuffle(n, rng, 0.05) for _ in range(trials)]
        rejected += position_table_p(biased, n) < 0.001
    assert rejected >= 9, f"a 5% bias was detected in only {rejected}/10 runs"
