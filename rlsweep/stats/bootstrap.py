"""Percentile bootstrap confidence intervals of the statistics of :mod:`rlsweep.stats.estimates`.

Every random draw comes from a :class:`numpy.random.Generator`: pass one, or an integer ``seed``
(default 0) from which one is built, so results are reproducible bit for bit. Bootstrap
resamples are drawn as index arrays in chunks whose size depends only on the input shapes.

Resampling is stratified (as rliable's): runs are resampled within each task, never across.
The known aggregates are evaluated on all resamples at once; any other statistic
``f(x) -> float`` works too and is called once per resample.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import numpy.typing as npt

from rlsweep.stats.estimates import (
    FloatArray,
    IntArray,
    Statistic,
    as_matrix,
    as_pair,
    as_scores,
    as_taus,
    batch_probability_of_improvement,
    batch_profile,
    iqm,
    rows_statistic,
)
from rlsweep.stats.paired import paired_differences

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "Resampling",
    "bootstrap_ci",
    "paired_bootstrap_ci",
    "performance_profile_ci",
    "pointwise_bootstrap_ci",
    "probability_of_improvement_ci",
    "unpaired_bootstrap_ci",
]

Seed = int | np.random.Generator
Interval = tuple[float, float, float]
ArrayInterval = tuple[FloatArray, FloatArray, FloatArray]

# Upper bound on the float elements materialised per chunk of bootstrap resamples (32 MB).
_CHUNK_ELEMENTS = 1 << 22


def _rng(seed: Seed) -> np.random.Generator:
    """The generator itself, or a fresh one built from an integer seed."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an int or a numpy Generator, got {type(seed).__name__}")
    return np.random.default_rng(int(seed))


class Resampling(TypedDict, total=False):
    """The keyword options of every interval: ``reps``, the number of bootstrap resamples
    (default 2000); ``confidence``, the interval's level (0.95); ``seed``, an int or a numpy
    Generator to draw the resamples from (0)."""

    reps: int
    confidence: float
    seed: Seed


def _resampling(options: Resampling) -> tuple[int, float, Seed]:
    """(reps, confidence, seed) from the options, checked."""
    unknown = sorted(set(options) - set(Resampling.__annotations__))
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
    reps, confidence = options.get("reps", 2000), options.get("confidence", 0.95)
    if isinstance(reps, bool) or not isinstance(reps, int | np.integer) or reps < 1:
        raise ValueError(f"reps must be a positive integer, got {reps!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return reps, confidence, options.get("seed", 0)


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
    rows = rows_statistic(statistic)
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
    gather: bool = True,
) -> FloatArray:
    """``batch_statistic`` on ``reps`` stratified resamples of the (runs, tasks) ``samples``.

    Independent resampling draws fresh indices per sample (in order); paired resampling draws
    one index array and applies it to every sample (all must share a shape). With ``gather``
    false, ``batch_statistic`` gets the (count, runs, tasks) index arrays themselves (the
    same draws), not the resampled values.
    """
    per_rep = sum(s.size for s in samples) * max(1, extra_elements)
    parts: list[FloatArray] = []
    for count in _chunks(reps, per_rep):
        if paired:
            idx = _stratified_indices(rng, count, *samples[0].shape)
            indices = [idx for _ in samples]
        else:
            indices = [_stratified_indices(rng, count, *s.shape) for s in samples]
        batch = (
            [_gather(s, i) for s, i in zip(samples, indices, strict=True)] if gather else indices
        )
        parts.append(np.asarray(batch_statistic(*batch), dtype=np.float64))
    return np.concatenate(parts, axis=0)


# --------------------------------------------------------------------------------------------
# Intervals of one agent's scores


def bootstrap_ci(x: npt.ArrayLike, statistic: Statistic, **options: Unpack[Resampling]) -> Interval:
    """Stratified-bootstrap percentile CI: resample runs within each task, (point, low, high).

    A 1-D ``x`` is one task (a plain bootstrap over runs); ``statistic`` gets arrays of the
    same shape as ``x``.
    """
    reps, confidence, seed = _resampling(options)
    arr = as_scores(x)
    matrix = arr[:, None] if arr.ndim == 1 else arr
    point = float(statistic(arr))
    batch_stat = _scalar_statistic_batch(statistic, arr.shape)
    dist = _bootstrap([matrix], batch_stat, reps, _rng(seed), paired=False)
    low, high = _interval(dist, confidence)
    return point, float(low), float(high)


def pointwise_bootstrap_ci(
    x: npt.ArrayLike, statistic: Statistic = iqm, **options: Unpack[Resampling]
) -> ArrayInterval:
    """Per-column CIs of a (replicates, points) array: resample whole rows, apply per column.

    For learning curves: row = replicate, column = evaluation step; each column's interval is a
    plain bootstrap over replicates. Returns arrays (point, low, high) of shape (points,).
    """
    reps, confidence, seed = _resampling(options)
    arr = as_scores(x)
    matrix = arr[:, None] if arr.ndim == 1 else arr
    n_rep, n_col = matrix.shape
    point = np.array([float(statistic(matrix[:, j])) for j in range(n_col)], dtype=np.float64)
    rows = rows_statistic(statistic)

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


def performance_profile_ci(
    x: npt.ArrayLike, taus: npt.ArrayLike, **options: Unpack[Resampling]
) -> ArrayInterval:
    """Performance profile with pointwise stratified-bootstrap CIs: arrays (point, low, high)."""
    reps, confidence, seed = _resampling(options)
    matrix, tau_arr = as_matrix(x), as_taus(taus)
    point = batch_profile(matrix[None], tau_arr)[0]
    dist = _bootstrap(
        [matrix],
        functools.partial(batch_profile, taus=tau_arr),
        reps,
        _rng(seed),
        paired=False,
        extra_elements=2,
    )
    low, high = _interval(dist, confidence)
    return point, low, high


# --------------------------------------------------------------------------------------------
# Intervals of two agents' scores


def _resampled_improvement(
    xm: FloatArray, ym: FloatArray
) -> Callable[[IntArray, IntArray], FloatArray]:
    """P(X > Y) of resamples given as run indices: (b, nx, T), (b, ny, T) -> (b,).

    Equal bit for bit to :func:`~rlsweep.stats.estimates.batch_probability_of_improvement` on
    the resampled values, in O(b (nx + ny) T) instead of O(b nx ny T): x's runs are sorted
    once, and where each of y's runs falls among them (below, equal) once. A resample of x is
    then its draw counts, cumulated in sorted order; the wins against y's run j are the draws
    above it plus half those equal to it, and U sums them over y's draws. Every term is a
    half-integer, so U is exact in float64, as the pairwise count is.
    """
    nx, tasks = xm.shape
    ny = ym.shape[0]
    task = np.arange(tasks)
    order = np.argsort(xm, axis=0, kind="stable")
    sorted_position = np.argsort(order, axis=0)  # run i of task t is the k-th smallest
    xs = np.take_along_axis(xm, order, axis=0)
    below = np.stack([np.searchsorted(xs[:, t], ym[:, t], "left") for t in task], axis=1)
    not_above = np.stack([np.searchsorted(xs[:, t], ym[:, t], "right") for t in task], axis=1)

    def batch(ix: IntArray, iy: IntArray) -> FloatArray:
        b = ix.shape[0]
        # draws[b, k + 1, t]: how often resample b drew task t's k-th smallest run of x.
        slot = (np.arange(b)[:, None, None] * (nx + 1) + sorted_position[ix, task] + 1) * tasks
        draws = np.bincount((slot + task).ravel(), minlength=b * (nx + 1) * tasks)
        cumulative = np.cumsum(draws.reshape(b, nx + 1, tasks), axis=1).astype(np.float64)
        at_below, at_not_above = cumulative[:, below, task], cumulative[:, not_above, task]
        wins_per_run = (nx - at_not_above) + 0.5 * (at_not_above - at_below)
        wins = np.take_along_axis(wins_per_run, iy, axis=1).sum(axis=1)
        return np.asarray((wins / (nx * ny)).mean(axis=-1), dtype=np.float64)

    return batch


def probability_of_improvement_ci(
    x: npt.ArrayLike, y: npt.ArrayLike, **options: Unpack[Resampling]
) -> Interval:
    """P(X > Y) with a percentile CI from independent stratified bootstraps of x and y."""
    reps, confidence, seed = _resampling(options)
    xm, ym = as_pair(x, y)
    point = float(batch_probability_of_improvement(xm[None], ym[None])[0])
    resampled = _resampled_improvement(xm, ym)
    dist = _bootstrap([xm, ym], resampled, reps, _rng(seed), paired=False, gather=False)
    low, high = _interval(dist, confidence)
    return point, float(low), float(high)


def _difference_ci(
    a: npt.ArrayLike, b: npt.ArrayLike, statistic: Statistic, options: Resampling, *, paired: bool
) -> Interval:
    """CI of statistic(a) - statistic(b): resampling the pairs jointly, or a and b apart."""
    reps, confidence, seed = _resampling(options)
    if paired:
        paired_differences(a, b)  # shape check
    aa, bb = as_scores(a, "a"), as_scores(b, "b")
    am, bm = as_pair(aa, bb)
    stat_a = _scalar_statistic_batch(statistic, aa.shape)
    stat_b = _scalar_statistic_batch(statistic, bb.shape)

    def diff(xb: FloatArray, yb: FloatArray) -> FloatArray:
        return stat_a(xb) - stat_b(yb)

    point = float(statistic(aa)) - float(statistic(bb))
    dist = _bootstrap([am, bm], diff, reps, _rng(seed), paired=paired)
    low, high = _interval(dist, confidence)
    return point, float(low), float(high)


def paired_bootstrap_ci(
    a: npt.ArrayLike, b: npt.ArrayLike, statistic: Statistic, **options: Unpack[Resampling]
) -> Interval:
    """CI of statistic(a) - statistic(b), resampling the (a, b) run pairs jointly per task."""
    return _difference_ci(a, b, statistic, options, paired=True)


def unpaired_bootstrap_ci(
    a: npt.ArrayLike, b: npt.ArrayLike, statistic: Statistic, **options: Unpack[Resampling]
) -> Interval:
    """CI of statistic(a) - statistic(b), resampling a and b independently (stratified)."""
    return _difference_ci(a, b, statistic, options, paired=False)
