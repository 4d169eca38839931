"""Pure-numpy statistics for comparing RL agents (the rliable toolkit, without scipy).

Data contract (as rliable): ``scores: dict[str, np.ndarray]`` maps an agent name to a float
array of shape ``(runs, tasks)``; a 1-D array is one task. Aggregates reduce over every entry.

Every random draw comes from a :class:`numpy.random.Generator`: pass one, or an integer ``seed``
(default 0) from which one is built, so results are reproducible bit for bit. Bootstrap
resamples are drawn as index arrays in chunks whose size depends only on the input shapes.

The aggregates :func:`mean`, :func:`median`, :func:`iqm` and :func:`optimality_gap` (also as
``functools.partial(optimality_gap, gamma=...)``) are evaluated on all bootstrap resamples at
once; any other statistic ``f(x) -> float`` works too and is called once per resample.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "bootstrap_ci",
    "correlation",
    "holm",
    "iqm",
    "mean",
    "median",
    "normalize_scores",
    "optimality_gap",
    "paired_bootstrap_ci",
    "paired_differences",
    "performance_profile",
    "performance_profile_ci",
    "pointwise_bootstrap_ci",
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "std",
    "unpaired_bootstrap_ci",
    "wilcoxon_signed_rank",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Seed = int | np.random.Generator
Statistic = Callable[[FloatArray], float]
Interval = tuple[float, float, float]
ArrayInterval = tuple[FloatArray, FloatArray, FloatArray]

# Upper bound on the float elements materialised per chunk of bootstrap resamples (32 MB).
_CHUNK_ELEMENTS = 1 << 22
# Largest sample (after dropping zeros) for which the Wilcoxon test is exact.
_WILCOXON_EXACT_MAX_N = 25


# --------------------------------------------------------------------------------------------
# Input checks


def _as_scores(x: npt.ArrayLike, name: str = "x") -> FloatArray:
    """``x`` as a finite float64 array of shape (runs,) or (runs, tasks) with >= 1 entry."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape (runs,) or (runs, tasks), got {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _as_matrix(x: npt.ArrayLike, name: str = "x") -> FloatArray:
    """``x`` as a (runs, tasks) matrix; a 1-D vector becomes one task."""
    arr = _as_scores(x, name)
    return arr[:, None] if arr.ndim == 1 else arr


def _rng(seed: Seed) -> np.random.Generator:
    """The generator itself, or a fresh one built from an integer seed."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an int or a numpy Generator, got {type(seed).__name__}")
    return np.random.default_rng(int(seed))


def _check_reps_confidence(reps: int, confidence: float) -> None:
    if isinstance(reps, bool) or not isinstance(reps, int | np.integer) or reps < 1:
        raise ValueError(f"reps must be a positive integer, got {reps!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


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
    arr = _as_scores(x)
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
    arr = _as_scores(x)
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


def _rows_statistic(statistic: Callable[..., float]) -> Callable[[FloatArray], FloatArray] | None:
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


# --------------------------------------------------------------------------------------------
# Stratified bootstrap machinery


def _chunks(reps: int, elements_per_rep: int) -> Iterator[int]:
    """Chunk sizes summing to ``reps``; the sizes depend only on the arguments."""
    size = max(1, _CHUNK_ELEMENTS // max(1, elements_per_rep))
    done = 0
    while done < reps:
        step = min(size, reps - done)
        yield step
        done += step


def _stratified_indices(rng: np.random.Generator, count: int, runs: int, tasks: int) -> IntArray:
    """Run indices of shape (count, runs, tasks), drawn independently within each task."""
    return rng.integers(0, runs, size=(count, runs, tasks), dtype=np.int64)


def _gather(x: FloatArray, idx: IntArray) -> FloatArray:
    """Resampled matrices ``out[b, r, t] = x[idx[b, r, t], t]``: tasks are never mixed."""
    return x[idx, np.arange(x.shape[1])]


def _scalar_statistic_batch(
    statistic: Callable[..., float], shape: tuple[int, ...]
) -> Callable[[FloatArray], FloatArray]:
    """Batch form (batch, runs, tasks) -> (batch,) of a statistic on one (runs, tasks) array."""
    rows = _rows_statistic(statistic)
    if rows is not None:
        return lambda batch: rows(batch.reshape(batch.shape[0], -1))

    def looped(batch: FloatArray) -> FloatArray:
        return np.array([float(statistic(b.reshape(shape))) for b in batch], dtype=np.float64)

    return looped


def _interval(dist: FloatArray, confidence: float) -> tuple[FloatArray, FloatArray]:
    """Percentile interval along axis 0: the (1-c)/2 and (1+c)/2 quantiles."""
    alpha = 1.0 - confidence
    low, high = np.quantile(dist, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def _bootstrap(
    samples: Sequence[FloatArray],
    batch_statistic: Callable[..., FloatArray],
    reps: int,
    rng: np.random.Generator,
    *,
    paired: bool,
    extra_elements: int = 1,
) -> FloatArray:
    """``batch_statistic`` on ``reps`` stratified resamples of the (runs, tasks) ``samples``.

    Independent resampling draws fresh indices per sample (in order); paired resampling draws
    one index array and applies it to every sample (all must share a shape).
    """
    per_rep = sum(s.size for s in samples) * max(1, extra_elements)
    parts: list[FloatArray] = []
    for count in _chunks(reps, per_rep):
        if paired:
            idx = _stratified_indices(rng, count, *samples[0].shape)
            batch = [_gather(s, idx) for s in samples]
        else:
            batch = [_gather(s, _stratified_indices(rng, count, *s.shape)) for s in samples]
        parts.append(np.asarray(batch_statistic(*batch), dtype=np.float64))
    return np.concatenate(parts, axis=0)


def bootstrap_ci(
    x: npt.ArrayLike,
    statistic: Statistic,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: Seed = 0,
) -> Interval:
    """Stratified-bootstrap percentile CI: resample runs within each task, (point, low, high).

    A 1-D ``x`` is one task (a plain bootstrap over runs); ``statistic`` gets arrays of the
    same shape as ``x``.
    """
    _check_reps_confidence(reps, confidence)
    arr = _as_scores(x)
    matrix = arr[:, None] if arr.ndim == 1 else arr
    point = float(statistic(arr))
    batch_stat = _scalar_statistic_batch(statistic, arr.shape)
    dist = _bootstrap([matrix], batch_stat, reps, _rng(seed), paired=False)
    low, high = _interval(dist, confidence)
    return point, float(low), float(high)


def pointwise_bootstrap_ci(
    x: npt.ArrayLike,
    statistic: Statistic = iqm,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: Seed = 0,
) -> ArrayInterval:
    """Per-column CIs of a (replicates, points) array: resample whole rows, apply per column.

    For learning curves: row = replicate, column = evaluation step; each column's interval is a
    plain bootstrap over replicates. Returns arrays (point, low, high) of shape (points,).
    """
    _check_reps_confidence(reps, confidence)
    arr = _as_scores(x)
    matrix = arr[:, None] if arr.ndim == 1 else arr
    n_rep, n_col = matrix.shape
    point = np.array([float(statistic(matrix[:, j])) for j in range(n_col)], dtype=np.float64)
    rows = _rows_statistic(statistic)

    def per_column(batch: FloatArray) -> FloatArray:
        # batch: (b, replicates, points) -> (b, points)
        b = batch.shape[0]
        if rows is not None:
            flat = np.ascontiguousarray(batch.transpose(0, 2, 1)).reshape(b * n_col, n_rep)
            return rows(flat).reshape(b, n_col)
        return np.array(
            [[float(statistic(m[:, j])) for j in range(n_col)] for m in batch], dtype=np.float64
        )

    # Whole rows are resampled: one run index per (resample, slot), shared by every column.
    rng = _rng(seed)
    parts: list[FloatArray] = []
    for count in _chunks(reps, matrix.size):
        idx = rng.integers(0, n_rep, size=(count, n_rep), dtype=np.int64)
        parts.append(per_column(matrix[idx]))
    low, high = _interval(np.concatenate(parts, axis=0), confidence)
    return point, low, high


# --------------------------------------------------------------------------------------------
# Probability of improvement and performance profiles


def _batch_probability_of_improvement(xb: FloatArray, yb: FloatArray) -> FloatArray:
    """(b, nx, T), (b, ny, T) -> (b,): mean over tasks of P(x > y) + 0.5 P(x = y)."""
    wins = np.zeros((xb.shape[0], xb.shape[2]), dtype=np.float64)
    for j in range(yb.shape[1]):
        yj = yb[:, j : j + 1, :]
        wins += (xb > yj).sum(axis=1) + 0.5 * (xb == yj).sum(axis=1)
    return np.asarray((wins / (xb.shape[1] * yb.shape[1])).mean(axis=-1), dtype=np.float64)


def _pair(x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    xm, ym = _as_matrix(x, "x"), _as_matrix(y, "y")
    if xm.shape[1] != ym.shape[1]:
        raise ValueError(f"x and y must have the same tasks, got {xm.shape} and {ym.shape}")
    return xm, ym


def probability_of_improvement(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """P(X > Y): mean over tasks of the Mann–Whitney U / (n_x n_y), ties counting one half.

    Run counts may differ between ``x`` and ``y``; their tasks must match.
    """
    xm, ym = _pair(x, y)
    return float(_batch_probability_of_improvement(xm[None], ym[None])[0])


def probability_of_improvement_ci(
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: Seed = 0,
) -> Interval:
    """P(X > Y) with a percentile CI from independent stratified bootstraps of x and y."""
    _check_reps_confidence(reps, confidence)
    xm, ym = _pair(x, y)
    point = float(_batch_probability_of_improvement(xm[None], ym[None])[0])
    dist = _bootstrap([xm, ym], _batch_probability_of_improvement, reps, _rng(seed), paired=False)
    low, high = _interval(dist, confidence)
    return point, float(low), float(high)


def _as_taus(taus: npt.ArrayLike) -> FloatArray:
    arr = np.atleast_1d(np.asarray(taus, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0 or np.any(np.isnan(arr)):
        raise ValueError("taus must be a non-empty 1-D array of thresholds without NaN")
    return arr


def _batch_profile(batch: FloatArray, taus: FloatArray) -> FloatArray:
    """(b, runs, tasks) -> (b, len(taus)): fraction of scores > tau (equal runs per task)."""
    flat = batch.reshape(batch.shape[0], -1)
    return np.stack([(flat > t).mean(axis=-1) for t in taus], axis=-1).astype(np.float64)


def performance_profile(x: npt.ArrayLike, taus: npt.ArrayLike) -> FloatArray:
    """Score distribution: for each tau, mean over tasks of the fraction of runs with x > tau."""
    matrix = _as_matrix(x)
    return _batch_profile(matrix[None], _as_taus(taus))[0]


def performance_profile_ci(
    x: npt.ArrayLike,
    taus: npt.ArrayLike,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: Seed = 0,
) -> ArrayInterval:
    """Performance profile with pointwise stratified-bootstrap CIs: arrays (point, low, high)."""
    _check_reps_confidence(reps, confidence)
    matrix, tau_arr = _as_matrix(x), _as_taus(taus)
    point = _batch_profile(matrix[None], tau_arr)[0]
    dist = _bootstrap(
        [matrix],
        functools.partial(_batch_profile, taus=tau_arr),
        reps,
        _rng(seed),
        paired=False,
        extra_elements=2,
    )
    low, high = _interval(dist, confidence)
    return point, low, high


# --------------------------------------------------------------------------------------------
# Differences between two agents


def paired_differences(a: npt.ArrayLike, b: npt.ArrayLike) -> FloatArray:
    """Per-pair differences a - b; run r of ``a`` is paired with run r of ``b`` (same shape)."""
    am, bm = _as_scores(a, "a"), _as_scores(b, "b")
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


def _difference_ci(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    statistic: Statistic,
    reps: int,
    confidence: float,
    seed: Seed,
    *,
    paired: bool,
) -> Interval:
    _check_reps_confidence(reps, confidence)
    if paired:
        paired_differences(a, b)  # shape check
    aa, bb = _as_scores(a, "a"), _as_scores(b, "b")
    am, bm = _pair(aa, bb)
    stat_a = _scalar_statistic_batch(statistic, aa.shape)
    stat_b = _scalar_statistic_batch(statistic, bb.shape)

    def diff(xb: FloatArray, yb: FloatArray) -> FloatArray:
        return stat_a(xb) - stat_b(yb)

    point = float(statistic(aa)) - float(statistic(bb))
    dist = _bootstrap([am, bm], diff, reps, _rng(seed), paired=paired)
    low, high = _interval(dist, confidence)
    return point, float(low), float(high)


def paired_bootstrap_ci(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    statistic: Statistic,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: Seed = 0,
) -> Interval:
    """CI of statistic(a) - statistic(b), resampling the (a, b) run pairs jointly per task."""
    return _difference_ci(a, b, statistic, reps, confidence, seed, paired=True)


def unpaired_bootstrap_ci(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    statistic: Statistic,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: Seed = 0,
) -> Interval:
    """CI of statistic(a) - statistic(b), resampling a and b independently (stratified)."""
    return _difference_ci(a, b, statistic, reps, confidence, seed, paired=False)


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
