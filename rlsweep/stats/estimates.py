"""Point statistics for comparing RL agents (the rliable toolkit in pure numpy, without scipy).

Data contract (as rliable): ``scores: dict[str, np.ndarray]`` maps an agent name to a float
array of shape ``(runs, tasks)``; a 1-D array is one task. Aggregates reduce over every entry.

The aggregates :func:`mean`, :func:`median`, :func:`iqm` and :func:`optimality_gap` (also as
``functools.partial(optimality_gap, gamma=...)``) have row-wise versions
(:func:`rows_statistic`) that :mod:`rlsweep.stats.bootstrap` evaluates on all its resamples at
once. The probability of improvement and performance profiles likewise have batch versions.
Their confidence intervals are in :mod:`rlsweep.stats.bootstrap`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "iqm",
    "mean",
    "median",
    "normalize_scores",
    "optimality_gap",
    "performance_profile",
    "probability_of_improvement",
    "std",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Statistic = Callable[[FloatArray], float]


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
    (:func:`rlsweep.stats.bootstrap.probability_of_improvement_ci`), equal bit for bit.
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
