"""Chi-square goodness of fit without scipy (Debian's torch/numpy only)."""

import math

import numpy as np


def _upper_regularized_gamma(a, x):
    """Q(a, x) = Gamma(a, x) / Gamma(a): a power series below a + 1, a
    continued fraction (modified Lentz) above; both converge to 1e-14."""
    if x <= 0:
        return 1.0
    log_prefix = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        k = a
        while abs(term) > abs(total) * 1e-15:
            k += 1
            term *= x / k
            total += term
        return max(0.0, 1.0 - total * math.exp(log_prefix))
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        step = d * c
        h *= step
        if abs(step - 1) < 1e-15:
            break
    return math.exp(log_prefix) * h


def chi2_sf(x, df):
    """Upper tail P(X >= x) of the chi-square distribution with df degrees
    of freedom."""
    if df <= 0:
        raise ValueError("df must be positive")
    return _upper_regularized_gamma(df / 2.0, x / 2.0)


def uniform_table_p(counts):
    """p-value that every cell of `counts` has the same expectation."""
    counts = np.asarray(counts, dtype=np.float64).ravel()
    expected = counts.sum() / counts.size
    stat = float(((counts - expected) ** 2 / expected).sum())
    return chi2_sf(stat, counts.size - 1)


def position_table_p(orders, n):
    """p-value that items are uniform over positions in the permutations
    `orders` (each a sequence of the n item indices). For a uniform
    permutation each row and column of the item x position table is fixed at
    len(orders), so the statistic has (n-1)^2 degrees of freedom."""
    table = np.zeros((n, n))
    for order in orders:
        for pos, item in enumerate(order):
            table[item, pos] += 1
    expected = len(orders) / n
    stat = float(((table - expected) ** 2 / expected).sum())
    return chi2_sf(stat, (n - 1) ** 2)


def first_pair_p(orders, n):
    """p-value that the ordered pair of the first two draws is uniform over
    the n(n-1) possible pairs."""
    counts = np.zeros((n, n))
    for order in orders:
        counts[order[0], order[1]] += 1
    off_diagonal = counts[~np.eye(n, dtype=bool)]
    return uniform_table_p(off_diagonal)
