"""Figures for a sweep: learning curves, performance profiles, probability of improvement.

Every function draws on a fresh :class:`matplotlib.figure.Figure` (no pyplot, no global
backend state; PNGs are rendered by Agg), saves a 150 dpi PNG and returns the figure so callers
and tests can inspect what was drawn. Each agent keeps one colour (Okabe–Ito palette, safe for
colour-blind readers) across all panels of a figure.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from rlsweep import stats

__all__ = [
    "CurveBand",
    "aggregate_curves",
    "common_grid",
    "format_steps",
    "learning_curves",
    "legend_layout",
    "performance_profile_plot",
    "probability_of_improvement_plot",
]

FloatArray = npt.NDArray[np.float64]
Replicate = tuple[npt.ArrayLike, npt.ArrayLike]
Curves = Mapping[str, Mapping[str, Sequence[Replicate]]]
PathLike = str | os.PathLike[str]
LineStyle = Literal["-", "--", ":", "-."]

DPI = 150
# Okabe & Ito (2008), reordered so the first colours contrast best on white; yellow last.
PALETTE = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#F0E442",  # yellow
)
LINESTYLES: tuple[LineStyle, ...] = ("-", "--", ":", "-.")
PANEL_WIDTH = 5.0  # inches per panel column
PANEL_HEIGHT = 3.5  # inches per panel row
LEGEND_HEIGHT = 0.5  # inches below the panels for the shared legend
TITLE_HEIGHT = 0.5  # inches above the panels when a title is given
MAX_COLUMNS = 3


@dataclass(frozen=True)
class CurveBand:
    """One agent's aggregate curve: IQM over replicates at each step, with its CI band."""

    steps: FloatArray
    iqm: FloatArray
    low: FloatArray | None  # None when there is a single replicate
    high: FloatArray | None
    replicates: int


def format_steps(value: float, _pos: object = None) -> str:
    """Compact step labels: 0, 500, 250k, 1.5M, 2G."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.4g}{suffix}"
    return f"{value:.4g}"


def _style(index: int) -> tuple[str, LineStyle]:
    """Colour and line style of the index-th agent (style changes once colours run out)."""
    return PALETTE[index % len(PALETTE)], LINESTYLES[(index // len(PALETTE)) % len(LINESTYLES)]


def _agent_styles(names: Sequence[str]) -> dict[str, tuple[str, LineStyle]]:
    """One (colour, line style) per distinct name, in order of first appearance."""
    unique = list(dict.fromkeys(names))
    return {name: _style(i) for i, name in enumerate(unique)}


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
    reps: int = 2000,
    confidence: float = 0.95,
    seed: stats.Seed = 0,
    where: str = "curve",
) -> CurveBand:
    """IQM across replicates at each step of :func:`common_grid`, with a bootstrap CI band.

    Each replicate is linearly interpolated onto the grid; the band is a pointwise percentile
    bootstrap over replicates (:func:`rlsweep.stats.pointwise_bootstrap_ci`).
    """
    grid = common_grid(replicates, max_points=max_points, where=where)
    parsed = [_replicate(r, where) for r in replicates]
    values = np.stack([np.interp(grid, s, v) for s, v in parsed])  # (replicates, points)
    if len(parsed) == 1:
        return CurveBand(grid, values[0].copy(), None, None, 1)
    point, low, high = stats.pointwise_bootstrap_ci(
        values, stats.iqm, reps=reps, confidence=confidence, seed=seed
    )
    return CurveBand(grid, point, low, high, len(parsed))


def _save(fig: Figure, path: PathLike) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=DPI, format="png")


def _tidy(ax: Axes) -> None:
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.grid(True, alpha=0.3, linewidth=0.6)


def learning_curves(
    curves: Curves,
    path: PathLike,
    *,
    title: str | None = None,
    seed: int = 0,
    reps: int = 2000,
    confidence: float = 0.95,
    max_points: int = 100,
    xlabel: str = "environment steps",
    ylabel: str = "evaluation return (IQM)",
) -> Figure:
    """Plot IQM learning curves with CI bands: one panel per env (3 per row), one colour per agent.

    ``curves[env][agent]`` lists one (steps, returns) pair per replicate; replicates may use
    different step grids (see :func:`aggregate_curves`). Writes a 150 dpi PNG to ``path``.
    ``xlabel`` and ``ylabel`` name the axes (any app's metric: a panel per metric, a colour
    per group of runs).
    """
    if not curves:
        raise ValueError("no curves to plot")
    for env, agents in curves.items():
        if not agents:
            raise ValueError(f"env {env!r}: no agents")
    styles = _agent_styles([agent for agents in curves.values() for agent in agents])
    rng = np.random.default_rng(seed)

    n_env = len(curves)
    ncols = min(MAX_COLUMNS, n_env)
    nrows = math.ceil(n_env / MAX_COLUMNS)
    height = PANEL_HEIGHT * nrows + LEGEND_HEIGHT + (TITLE_HEIGHT if title else 0.0)
    fig = Figure(figsize=(PANEL_WIDTH * ncols, height), dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)

    for i, (env, agents) in enumerate(curves.items()):
        ax = axes[i // ncols][i % ncols]
        for agent, replicates in agents.items():
            band = aggregate_curves(
                replicates,
                max_points=max_points,
                reps=reps,
                confidence=confidence,
                seed=rng,
                where=f"env {env!r}, agent {agent!r}",
            )
            colour, linestyle = styles[agent]
            if band.low is not None and band.high is not None:
                ax.fill_between(
                    band.steps, band.low, band.high, color=colour, alpha=0.2, linewidth=0
                )
            ax.plot(
                band.steps,
                band.iqm,
                color=colour,
                linestyle=linestyle,
                linewidth=2.0,
                marker="o" if band.steps.size == 1 else None,
                label=agent,
            )
        ax.set_title(env)
        ax.set_xlabel(xlabel)
        if i % ncols == 0:
            ax.set_ylabel(ylabel)
        ax.xaxis.set_major_formatter(FuncFormatter(format_steps))
        _tidy(ax)
    for j in range(n_env, nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)

    handles = [
        Line2D([], [], color=colour, linestyle=linestyle, linewidth=2.0)
        for colour, linestyle in styles.values()
    ]
    labels, ncols = legend_layout(list(styles))
    fig.legend(handles, labels, loc="outside lower center", ncols=ncols, frameon=False)
    if title:
        fig.suptitle(title, fontsize="large")
    _save(fig, path)
    return fig


def legend_layout(labels: list[str], width: int = 60) -> tuple[list[str], int]:
    """Labels wrapped at ``width`` characters (agent variants can name many settings), and
    legend columns that fit about 150 characters across the figure."""
    wrapped = [textwrap.fill(label, width, break_long_words=False) for label in labels]
    longest = max((len(line) for label in wrapped for line in label.split("\n")), default=1)
    return wrapped, max(1, min(len(labels), 5, 150 // max(longest, 1)))


def performance_profile_plot(
    scores: Mapping[str, npt.ArrayLike],
    path: PathLike,
    *,
    taus: npt.ArrayLike | None = None,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    title: str | None = None,
    xlabel: str = "normalized score (τ)",
) -> Figure:
    """Plot each agent's performance profile (fraction of runs with score > τ) with CI bands.

    ``scores[agent]`` has shape (runs, tasks); ``taus`` defaults to 101 thresholds spanning all
    scores. Writes a 150 dpi PNG to ``path``.
    """
    if not scores:
        raise ValueError("no scores to plot")
    if taus is None:
        every = np.concatenate([np.asarray(s, dtype=np.float64).ravel() for s in scores.values()])
        tau_arr = np.linspace(float(every.min()), float(every.max()), 101)
    else:
        tau_arr = np.asarray(taus, dtype=np.float64)
    styles = _agent_styles(list(scores))
    rng = np.random.default_rng(seed)

    fig = Figure(figsize=(6.0, 4.0), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    for agent, x in scores.items():
        point, low, high = stats.performance_profile_ci(
            x, tau_arr, reps=reps, confidence=confidence, seed=rng
        )
        colour, linestyle = styles[agent]
        ax.fill_between(tau_arr, low, high, color=colour, alpha=0.2, linewidth=0)
        ax.plot(tau_arr, point, color=colour, linestyle=linestyle, linewidth=2.0, label=agent)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_ylim(-0.02, 1.02)
    handles, labels = ax.get_legend_handles_labels()
    wrapped, _ = legend_layout(labels)
    ax.legend(handles, wrapped, frameon=False, fontsize="small")
    _tidy(ax)
    if title:
        ax.set_title(title)
    _save(fig, path)
    return fig


def probability_of_improvement_plot(
    scores: Mapping[str, npt.ArrayLike],
    path: PathLike,
    *,
    pairs: Sequence[tuple[str, str]] | None = None,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    title: str | None = None,
) -> Figure:
    """Interval plot of P(X > Y): one row per pair (X, Y), point estimate and bootstrap CI.

    ``pairs`` defaults to every pair of agents in the order of ``scores``. Writes a 150 dpi PNG.
    """
    names = list(scores)
    if pairs is None:
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    if not pairs:
        raise ValueError("need at least one pair of agents")
    for a, b in pairs:
        for name in (a, b):
            if name not in scores:
                raise ValueError(f"unknown agent {name!r} in pairs")
    styles = _agent_styles(names)
    rng = np.random.default_rng(seed)

    fig = Figure(figsize=(6.0, 1.2 + 0.5 * len(pairs)), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    for row, (a, b) in enumerate(pairs):
        point, low, high = stats.probability_of_improvement_ci(
            scores[a], scores[b], reps=reps, confidence=confidence, seed=rng
        )
        colour, _ = styles[a]
        ax.hlines(row, low, high, color=colour, linewidth=6, alpha=0.45)
        ax.plot([point], [row], marker="|", markersize=14, markeredgewidth=2.5, color=colour)
    ax.axvline(0.5, color="0.4", linestyle=":", linewidth=1)
    ax.set_yticks(range(len(pairs)), [f"P({a} > {b})" for a, b in pairs])
    ax.set_ylim(len(pairs) - 0.5, -0.5)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("probability of improvement")
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.grid(True, axis="x", alpha=0.3, linewidth=0.6)
    if title:
        ax.set_title(title)
    _save(fig, path)
    return fig
