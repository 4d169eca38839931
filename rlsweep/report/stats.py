"""Point statistics for comparing RL agents (the rliable toolkit in pure numpy, without scipy).

Data contract (as rliable): ``scores: dict[str, np.ndarray]`` maps an agent name to a float
array of shape ``(runs, tasks)``; a 1-D array is one task. Aggregates reduce over every entry.

The aggregates :func:`mean`, :func:`median`, :func:`iqm` and :func:`optimality_gap` (also as
``functools.partial(optimality_gap, gamma=...)``) have row-wise versions
(:func:`rows_statistic`) that :mod:`rlsweep.report.bootstrap` evaluates on all its resamples at
once. The probability of improvement and performance profiles likewise have batch versions.
Their confidence intervals are in :mod:`rlsweep.report.bootstrap`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "correlation",
    "holm",
    "iqm",
    "mean",
    "median",
    "normalize_scores",
    "optimality_gap",
    "paired_differences",
    "performance_profile",
    "probability_of_improvement",
    "std",
    "wilcoxon_signed_rank",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Statistic = Callable[[FloatArray], float]

# Largest sample (after dropping zeros) for which the Wilcoxon test is exact.
_WILCOXON_EXACT_MAX_N = 25


# --------------------------------------------------------------------------------------------
# Input checks


def as_scores(x: npt.ArrayLike, name: str = "x") -> FloatArray:
    """``x`` as a finite float64 array of shape (runs,) or (runs, tasks) with >= 1 entry."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape (runs,) or (runs, tasks), got {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def as_matrix(x: npt.ArrayLike, name: str = "x") -> FloatArray:
    """``x`` as a (runs, tasks) matrix; a 1-D vector becomes one task."""
    arr = as_scores(x, name)
    return arr[:, None] if arr.ndim == 1 else arr


def as_pair(x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``x`` and ``y`` as (runs, tasks) matrices with the same tasks (run counts may differ)."""
    xm, ym = as_matrix(x, "x"), as_matrix(y, "y")
    if xm.shape[1] != ym.shape[1]:
        raise ValueError(f"x and y must have the same tasks, got {xm.shape} and {ym.shape}")
    return xm, ym


def as_taus(taus: npt.ArrayLike) -> FloatArray:
    arr = np.atleast_1d(np.asarray(taus, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0 or np.any(np.isnan(arr)):
        raise ValueError("taus must be a non-empty 1-D array of thresholds without NaN")
    return arr


# --------------------------------------------------------------------------------------------
# Aggregates. The `_rows_*` versions reduce each row of a (batch, n) array.


def _rows_mean(flat: FloatArray) -> FloatArray:
    return np.asarray(flat.mean(axis=-1), dtype=np.float64)


def _rows_median(flat: FloatArray) -> FloatArray:
    return np.asarray(np.median(flat, axis=-1), dtype=np.float64)


def _rows_iqm(flat: FloatArray) -> FloatArray:
    n = flat.shape[-1]
    cut = int(0.25 * n)
    if cut == 0:
        return _rows_mean(flat)
    return _rows_mean(np.sort(flat, axis=-1)[:, cut : n - cut])


def _rows_optimality_gap(flat: FloatArray, gamma: float = 1.0) -> FloatArray:
    return _rows_mean(np.maximum(gamma - flat, 0.0))


def _aggregate(rows: Callable[..., FloatArray], x: npt.ArrayLike, **kwargs: Any) -> float:
    arr = as_scores(x)
    return float(rows(arr.reshape(1, -1), **kwargs)[0])


def mean(x: npt.ArrayLike) -> float:
    """Mean of all scores: sum(x) / n."""
    return _aggregate(_rows_mean, x)


def median(x: npt.ArrayLike) -> float:
    """Median of all scores (mean of the two middle values when n is even)."""
    return _aggregate(_rows_median, x)


def iqm(x: npt.ArrayLike) -> float:
    """Interquartile mean: sort all n scores, drop int(n/4) at each end, mean of the rest."""
    return _aggregate(_rows_iqm, x)


def optimality_gap(x: npt.ArrayLike, gamma: float = 1.0) -> float:
    """Optimality gap: mean of max(gamma - x, 0) over all scores."""
    return _aggregate(_rows_optimality_gap, x, gamma=gamma)


def std(x: npt.ArrayLike, ddof: int = 1) -> float:
    """Standard deviation of all scores, sqrt(sum((x - mean)^2) / (n - ddof)); NaN if n <= ddof.

    The default ``ddof=1`` is the sample standard deviation.
    """
    arr = as_scores(x)
    if arr.size <= ddof:
        return math.nan
    return float(np.std(arr, ddof=ddof))


# The vectorised counterpart of each public aggregate, reducing the rows of (batch, n).
_ROWS: dict[Callable[..., float], Callable[..., FloatArray]] = {
    mean: _rows_mean,
    median: _rows_median,
    iqm: _rows_iqm,
    optimality_gap: _rows_optimality_gap,
}


def rows_statistic(statistic: Callable[..., float]) -> Callable[[FloatArray], FloatArray] | None:
    """The row-wise version of a known aggregate (or a keyword partial of one), else None."""
    try:
        rows = _ROWS.get(statistic)
    except TypeError:  # unhashable callable
        return None
    if rows is not None:
        return rows
    if isinstance(statistic, functools.partial) and not statistic.args:
        base = _ROWS.get(statistic.func)
        if base is not None:
            return functools.partial(base, **statistic.keywords)
    return None


def normalize_scores(
    x: npt.ArrayLike, random_score: npt.ArrayLike, reference_score: npt.ArrayLike
) -> FloatArray:
    """Normalised scores (x - random) / (reference - random); per-task baselines broadcast."""
    arr = np.asarray(x, dtype=np.float64)
    lo = np.asarray(random_score, dtype=np.float64)
    hi = np.asarray(reference_score, dtype=np.float64)
    span = hi - lo
    if np.any(span == 0.0):
        raise ValueError("reference_score must differ from random_score")
    return np.asarray((arr - lo) / span, dtype=np.float64)


# --------------------------------------------------------------------------------------------
# Probability of improvement and performance profiles


def batch_probability_of_improvement(xb: FloatArray, yb: FloatArray) -> FloatArray:
    """(b, nx, T), (b, ny, T) -> (b,): mean over tasks of P(x > y) + 0.5 P(x = y).

    Every run of x against every run of y (O(b nx ny T)): the definition, run once per pair
    of groups. The bootstrap interval counts its resamples in O(b (nx + ny) T) instead
    (:func:`rlsweep.report.bootstrap.probability_of_improvement_ci`), equal bit for bit.
    """
    wins = np.zeros((xb.shape[0], xb.shape[2]), dtype=np.float64)
    for j in range(yb.shape[1]):
        yj = yb[:, j : j + 1, :]
        wins += (xb > yj).sum(axis=1) + 0.5 * (xb == yj).sum(axis=1)
    return np.asarray((wins / (xb.shape[1] * yb.shape[1])).mean(axis=-1), dtype=np.float64)


def probability_of_improvement(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """P(X > Y): mean over tasks of the Mann–Whitney U / (n_x n_y), ties counting one half.

    Run counts may differ between ``x`` and ``y``; their tasks must match.
    """
    xm, ym = as_pair(x, y)
    return float(batch_probability_of_improvement(xm[None], ym[None])[0])


def batch_profile(batch: FloatArray, taus: FloatArray) -> FloatArray:
    """(b, runs, tasks) -> (b, len(taus)): fraction of scores > tau (equal runs per task)."""
    flat = batch.reshape(batch.shape[0], -1)
    return np.stack([(flat > t).mean(axis=-1) for t in taus], axis=-1).astype(np.float64)


def performance_profile(x: npt.ArrayLike, taus: npt.ArrayLike) -> FloatArray:
    """Score distribution: for each tau, mean over tasks of the fraction of runs with x > tau."""
    matrix = as_matrix(x)
    return batch_profile(matrix[None], as_taus(taus))[0]


# --------------------------------------------------------------------------------------------
# Differences between two agents: pairs and tests


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
