"""The bands the figures draw: learning curves and performance profiles with their CIs.

Computed here, drawn by :mod:`rlsweep.report.plots` exactly as they are: a figure has no
randomness of its own. A learning curve is the IQM over replicates at each step of a common
grid, with a pointwise bootstrap band; a performance profile is the fraction of runs scoring
above τ, with a pointwise stratified bootstrap band.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rlsweep.report.analysis import BOOTSTRAP_REPS, CONFIDENCE
from rlsweep.stats import FloatArray, iqm
from rlsweep.stats.bootstrap import Seed, performance_profile_ci, pointwise_bootstrap_ci

__all__ = [
    "CurveBand",
    "Profiles",
    "aggregate_curves",
    "common_grid",
    "curve_bands",
    "profile_bands",
]

Replicate = tuple[npt.ArrayLike, npt.ArrayLike]
Curves = Mapping[str, Mapping[str, Sequence[Replicate]]]


@dataclass(frozen=True)
class CurveBand:
    """One agent's aggregate curve: IQM over replicates at each step, with its CI band."""

    steps: FloatArray
    iqm: FloatArray
    low: FloatArray | None  # None when there is a single replicate
    high: FloatArray | None
    replicates: int


@dataclass(frozen=True)
class Profiles:
    """Performance profiles: thresholds τ, and per agent (point, low, high) at each τ."""

    taus: FloatArray
    bands: dict[str, tuple[FloatArray, FloatArray, FloatArray]]


def _replicate(pair: Replicate, where: str) -> tuple[FloatArray, FloatArray]:
    """Validated (steps, returns) sorted by step."""
    steps = np.asarray(pair[0], dtype=np.float64).ravel()
    values = np.asarray(pair[1], dtype=np.float64).ravel()
    if steps.size == 0 or steps.size != values.size:
        raise ValueError(
            f"{where}: steps and returns must be non-empty and of equal length, "
            f"got {steps.size} and {values.size}"
        )
    if not (np.all(np.isfinite(steps)) and np.all(np.isfinite(values))):
        raise ValueError(f"{where}: steps and returns must be finite")
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]
    if np.any(np.diff(steps) == 0):
        raise ValueError(f"{where}: repeated step values")
    return steps, values


def common_grid(
    replicates: Sequence[Replicate], *, max_points: int = 100, where: str = "curve"
) -> FloatArray:
    """Steps shared by all replicates: the union of their steps clipped to the common range.

    The common range is [largest first step, smallest last step]. When the union holds more than
    ``max_points`` steps it is replaced by ``max_points`` evenly spaced steps over that range.
    """
    if not replicates:
        raise ValueError(f"{where}: no replicates")
    parsed = [_replicate(r, where) for r in replicates]
    lo = max(float(s[0]) for s, _ in parsed)
    hi = min(float(s[-1]) for s, _ in parsed)
    if lo > hi:
        raise ValueError(
            f"{where}: the replicates' step ranges do not overlap (common range {lo:g} to {hi:g})"
        )
    union = np.unique(np.concatenate([s for s, _ in parsed]))
    grid = union[(union >= lo) & (union <= hi)]
    if grid.size > max_points:
        grid = np.linspace(lo, hi, max_points)
    return grid.astype(np.float64)


def aggregate_curves(
    replicates: Sequence[Replicate],
    *,
    max_points: int = 100,
    reps: int = BOOTSTRAP_REPS,
    confidence: float = CONFIDENCE,
    seed: Seed = 0,
    where: str = "curve",
) -> CurveBand:
    """IQM across replicates at each step of :func:`common_grid`, with a bootstrap CI band.

    Each replicate is linearly interpolated onto the grid; the band is a pointwise percentile
    bootstrap over replicates (:func:`rlsweep.stats.bootstrap.pointwise_bootstrap_ci`).
    """
    grid = common_grid(replicates, max_points=max_points, where=where)
    parsed = [_replicate(r, where) for r in replicates]
    values = np.stack([np.interp(grid, s, v) for s, v in parsed])  # (replicates, points)
    if len(parsed) == 1:
        return CurveBand(grid, values[0].copy(), None, None, 1)
    point, low, high = pointwise_bootstrap_ci(
        values, iqm, reps=reps, confidence=confidence, seed=seed
    )
    return CurveBand(grid, point, low, high, len(parsed))


def curve_bands(
    curves: Curves,
    *,
    seed: Seed = 0,
    reps: int = BOOTSTRAP_REPS,
    max_points: int = 100,
) -> dict[str, dict[str, CurveBand]]:
    """env -> agent -> :class:`CurveBand`, from ``curves[env][agent]``: one (steps, returns)
    pair per replicate (replicates may use different step grids). One generator, built from
    ``seed``, draws every band in env then agent order."""
    if not curves:
        raise ValueError("no curves to plot")
    for env, agents in curves.items():
        if not agents:
            raise ValueError(f"env {env!r}: no agents")
    rng = np.random.default_rng(seed)  # a Generator is used as it is
    return {
        env: {
            agent: aggregate_curves(
                replicates,
                max_points=max_points,
                reps=reps,
                seed=rng,
                where=f"env {env!r}, agent {agent!r}",
            )
            for agent, replicates in agents.items()
        }
        for env, agents in curves.items()
    }


def profile_bands(
    scores: Mapping[str, npt.ArrayLike],
    *,
    taus: npt.ArrayLike | None = None,
    seed: Seed = 0,
    reps: int = BOOTSTRAP_REPS,
) -> Profiles:
    """Each agent's performance profile (fraction of runs with score > τ) with its CI band.

    ``scores[agent]`` has shape (runs, tasks); ``taus`` defaults to 101 thresholds spanning all
    scores. One generator, built from ``seed``, draws every band in agent order.
    """
    if not scores:
        raise ValueError("no scores to plot")
    if taus is None:
        every = np.concatenate([np.asarray(s, dtype=np.float64).ravel() for s in scores.values()])
        tau_arr = np.linspace(float(every.min()), float(every.max()), 101)
    else:
        tau_arr = np.asarray(taus, dtype=np.float64)
    rng = np.random.default_rng(seed)  # a Generator is used as it is
    bands = {
        agent: performance_profile_ci(x, tau_arr, reps=reps, confidence=CONFIDENCE, seed=rng)
        for agent, x in scores.items()
    }
    return Profiles(tau_arr, bands)
