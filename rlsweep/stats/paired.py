"""Two samples compared pair by pair: the differences, their correlation, the Wilcoxon
signed-rank test, and Holm's correction over a family of tests. Pure numpy (no scipy): run r
of one sample is paired with run r of the other."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from rlsweep.stats.estimates import FloatArray, IntArray, as_scores

__all__ = ["correlation", "holm", "paired_differences", "wilcoxon_signed_rank"]

# Largest sample (after dropping zeros) for which the Wilcoxon test is exact.
_WILCOXON_EXACT_MAX_N = 25


def paired_differences(a: npt.ArrayLike, b: npt.ArrayLike) -> FloatArray:
    """Per-pair differences a - b; run r of ``a`` is paired with run r of ``b`` (same shape)."""
    am, bm = as_scores(a, "a"), as_scores(b, "b")
    if am.shape != bm.shape:
        raise ValueError(f"paired scores must have the same shape, got {am.shape} and {bm.shape}")
    return am - bm


def correlation(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Pearson correlation of the pairs (a[i], b[i]); NaN when n < 2 or either side is constant.

    For paired runs it measures how much the pairing removes: the variance of a - b is
    var(a) + var(b) - 2 r sd(a) sd(b).
    """
    d = paired_differences(a, b)  # shape check
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if d.size < 2:
        return math.nan
    xc, yc = x - x.mean(), y - y.mean()
    sxx, syy = float(np.dot(xc, xc)), float(np.dot(yc, yc))
    if sxx == 0.0 or syy == 0.0:
        return math.nan
    return float(np.clip(np.dot(xc, yc) / math.sqrt(sxx * syy), -1.0, 1.0))


def _average_ranks(values: FloatArray) -> tuple[FloatArray, IntArray]:
    """Ranks 1..n with ties sharing their average rank, and the size of each tie group."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    group_rank = ends - (counts - 1) / 2.0
    return group_rank[inverse].astype(np.float64), counts.astype(np.int64)


def _signed_rank_counts(n: int) -> list[int]:
    """counts[k] = number of subsets of {1..n} summing to k (the null law of W+, times 2^n)."""
    counts = [1] + [0] * (n * (n + 1) // 2)
    top = 0
    for i in range(1, n + 1):
        top += i
        for k in range(top, i - 1, -1):
            counts[k] += counts[k - i]
    return counts


def wilcoxon_signed_rank(d: npt.ArrayLike) -> float:
    """Two-sided Wilcoxon signed-rank p-value for H0: differences symmetric about 0.

    W+ = sum of ranks of |d| over d > 0, zeros dropped (Wilcox). Exact null law for
    n <= 25 without ties: p = min(1, 2 min(P(W <= W+), P(W >= W+))); otherwise
    z = (W+ - n(n+1)/4 -+ 1/2) / sqrt(n(n+1)(2n+1)/24 - sum(t^3 - t)/48), p = 2 P(Z >= |z|).
    Every entry of ``d`` is one pair; returns 1.0 when all differences are zero.
    """
    arr = np.asarray(d, dtype=np.float64).ravel()
    if not np.all(np.isfinite(arr)):
        raise ValueError("d contains NaN or infinite values")
    arr = arr[arr != 0.0]
    n = int(arr.size)
    if n == 0:
        return 1.0
    ranks, ties = _average_ranks(np.abs(arr))
    w_plus = float(ranks[arr > 0].sum())
    has_ties = bool(np.any(ties > 1))
    if n <= _WILCOXON_EXACT_MAX_N and not has_ties:
        counts = _signed_rank_counts(n)
        k = round(w_plus)
        total = 2**n
        cdf = sum(counts[: k + 1]) / total
        sf = sum(counts[k:]) / total
        return float(min(1.0, 2.0 * min(cdf, sf)))
    centre = n * (n + 1) / 4.0
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float(np.sum(ties**3 - ties)) / 48.0
    if var <= 0.0:
        return 1.0
    diff = w_plus - centre
    continuity = 0.5 if diff > 0.0 else -0.5 if diff < 0.0 else 0.0
    z = (diff - continuity) / math.sqrt(var)
    return float(min(1.0, math.erfc(abs(z) / math.sqrt(2.0))))


def holm(pvalues: npt.ArrayLike) -> FloatArray:
    """Holm–Bonferroni step-down: sorted p_(i) -> max_{j<=i} min(1, (m - j + 1) p_(j)).

    Returns the adjusted p-values in the input order (and shape).
    """
    p = np.asarray(pvalues, dtype=np.float64)
    flat = p.ravel()
    if np.any(np.isnan(flat)) or np.any((flat < 0.0) | (flat > 1.0)):
        raise ValueError("p-values must lie in [0, 1]")
    m = flat.size
    order = np.argsort(flat, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * flat[order])
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted.reshape(p.shape)
