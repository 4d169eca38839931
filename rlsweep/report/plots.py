"""Figures of a sweep: learning curves, performance profiles, probability of improvement, the
metric against each swept key.

Each function draws, on a fresh :class:`matplotlib.figure.Figure` (no pyplot, no global backend
state), exactly the intervals it is given: the bands of :mod:`rlsweep.report.curves` and the
probabilities of improvement of :mod:`rlsweep.report.analysis`, the very numbers of the
report's tables. Nothing here draws a random number, so a figure never disagrees with a table.
:func:`rlsweep.report.files.write_png` writes a figure as a 150 dpi PNG (rendered by Agg).
Each agent keeps one colour (Okabe–Ito palette, safe for colour-blind readers) across all
panels of a figure. matplotlib is imported on the first drawing, not with this module.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from rlsweep.report.analysis import ImprovementStats
from rlsweep.report.curves import CurveBand, Profiles

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "PALETTE",
    "format_steps",
    "key_plot",
    "learning_curves",
    "legend_layout",
    "performance_profile_plot",
    "probability_of_improvement_plot",
]

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


def format_steps(value: float, _pos: object = None) -> str:
    """Compact step labels: 0, 500, 250k, 1.5M, 2G."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.4g}{suffix}"
    return f"{value:.4g}"


def legend_layout(labels: list[str], width: int = 60) -> tuple[list[str], int]:
    """Labels wrapped at ``width`` characters (agent variants can name many settings), and
    legend columns that fit about 150 characters across the figure."""
    wrapped = [textwrap.fill(label, width, break_long_words=False) for label in labels]
    longest = max((len(line) for label in wrapped for line in label.split("\n")), default=1)
    return wrapped, max(1, min(len(labels), 5, 150 // max(longest, 1)))


def _agent_styles(names: Sequence[str]) -> dict[str, tuple[str, LineStyle]]:
    """One (colour, line style) per distinct name, in order of first appearance; the line
    style changes once the colours run out."""
    unique = list(dict.fromkeys(names))
    return {
        name: (PALETTE[i % len(PALETTE)], LINESTYLES[(i // len(PALETTE)) % len(LINESTYLES)])
        for i, name in enumerate(unique)
    }


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _tidy(ax: Axes, axis: Literal["both", "x"] = "both") -> None:
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.grid(True, axis=axis, alpha=0.3, linewidth=0.6)


def _draw_band(ax: Axes, band: CurveBand, label: str, style: tuple[str, LineStyle]) -> None:
    colour, linestyle = style
    if band.low is not None and band.high is not None:
        ax.fill_between(band.steps, band.low, band.high, color=colour, alpha=0.2, linewidth=0)
    ax.plot(
        band.steps,
        band.iqm,
        color=colour,
        linestyle=linestyle,
        linewidth=2.0,
        marker="o" if band.steps.size == 1 else None,
        label=label,
    )


def learning_curves(
    bands: Mapping[str, Mapping[str, CurveBand]],
    *,
    title: str | None = None,
    xlabel: str = "environment steps",
    ylabel: str = "evaluation return (IQM)",
) -> Figure:
    """IQM learning curves with their CI bands (``bands[env][agent]``, from
    :func:`rlsweep.report.curves.curve_bands`): one panel per env (3 per row), one colour per
    agent. ``xlabel`` and ``ylabel`` name the axes (any app's metric: a panel per metric, a
    colour per group of runs)."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    styles = _agent_styles([agent for agents in bands.values() for agent in agents])
    n_env = len(bands)
    ncols = min(MAX_COLUMNS, n_env)
    nrows = math.ceil(n_env / MAX_COLUMNS)
    height = PANEL_HEIGHT * nrows + LEGEND_HEIGHT + (TITLE_HEIGHT if title else 0.0)
    fig = _figure(PANEL_WIDTH * ncols, height)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for i, (env, agents) in enumerate(bands.items()):
        ax = axes[i // ncols][i % ncols]
        for agent, band in agents.items():
            _draw_band(ax, band, agent, styles[agent])
        ax.set_title(env)
        ax.set_xlabel(xlabel)
        if i % ncols == 0:
            ax.set_ylabel(ylabel)
        ax.xaxis.set_major_formatter(FuncFormatter(format_steps))
        # Matplotlib's own ticks, but never between two steps (a few logged steps: 0, 1, 2).
        ax.xaxis.set_major_locator(MaxNLocator("auto", steps=[1, 2, 2.5, 5, 10], integer=True))
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
    return fig


def performance_profile_plot(
    profiles: Profiles, *, title: str | None = None, xlabel: str = "normalized score (τ)"
) -> Figure:
    """Each agent's performance profile (fraction of runs with score > τ) with its CI band,
    from :func:`rlsweep.report.curves.profile_bands`."""
    styles = _agent_styles(list(profiles.bands))
    fig = _figure(6.0, 4.0)
    ax = fig.add_subplot()
    for agent, (point, low, high) in profiles.bands.items():
        colour, linestyle = styles[agent]
        ax.fill_between(profiles.taus, low, high, color=colour, alpha=0.2, linewidth=0)
        ax.plot(profiles.taus, point, color=colour, linestyle=linestyle, linewidth=2.0, label=agent)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_ylim(-0.02, 1.02)
    handles, labels = ax.get_legend_handles_labels()
    wrapped, _ = legend_layout(labels)
    ax.legend(handles, wrapped, frameon=False, fontsize="small")
    _tidy(ax)
    if title:
        ax.set_title(title)
    return fig


def _rows(
    improvements: Sequence[ImprovementStats], pairs: Sequence[tuple[str, str]] | None
) -> list[ImprovementStats]:
    """The intervals to draw: every one given, or those of ``pairs`` in that order."""
    if pairs is None:
        return list(improvements)
    by_pair = {(p.x, p.y): p for p in improvements}
    names = {name for p in improvements for name in (p.x, p.y)}
    for pair in pairs:
        for name in pair:
            if name not in names:
                raise ValueError(f"unknown agent {name!r} in pairs")
        if pair not in by_pair:
            raise ValueError(f"no interval of P({pair[0]} > {pair[1]})")
    return [by_pair[pair] for pair in pairs]


def probability_of_improvement_plot(
    improvements: Sequence[ImprovementStats],
    *,
    pairs: Sequence[tuple[str, str]] | None = None,
    title: str | None = None,
) -> Figure:
    """Interval plot of P(X > Y): one row per pair (X, Y), its point estimate and the CI the
    analysis computed (:func:`rlsweep.report.analysis.improvement_stats`). ``pairs`` chooses
    and orders the rows (default: every interval, in order). X's colour marks the row."""
    rows = _rows(improvements, pairs)
    if not rows:
        raise ValueError("need at least one pair of agents")
    styles = _agent_styles([name for p in improvements for name in (p.x, p.y)])
    fig = _figure(6.0, 1.2 + 0.5 * len(rows))
    ax = fig.add_subplot()
    for row, p in enumerate(rows):
        colour, _ = styles[p.x]
        ax.hlines(row, p.low, p.high, color=colour, linewidth=6, alpha=0.45)
        ax.plot([p.point], [row], marker="|", markersize=14, markeredgewidth=2.5, color=colour)
    ax.axvline(0.5, color="0.4", linestyle=":", linewidth=1)
    ax.set_yticks(range(len(rows)), [f"P({p.x} > {p.y})" for p in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("probability of improvement")
    _tidy(ax, "x")
    if title:
        ax.set_title(title)
    return fig


def search_progress_plot(
    trials: Sequence[Mapping[str, Any]], *, objective: str, metric: str, maximize: bool
) -> Figure:
    """A search's progress: every replicate's number (dots) and every trial's objective
    (a bar marker) by trial, and the best objective so far (a step line)."""
    fig = _figure(7.0, 4.0)
    ax = fig.subplots()
    best: list[float] = []
    for t in trials:
        x = t["number"]
        values = [v for v in t["values"] if v is not None]
        ax.scatter([x] * len(values), values, s=12, color="#9aa5b1", zorder=2)
        if t["objective"] is not None:
            ax.scatter([x], [t["objective"]], marker="_", s=220, color="#1f4e79", zorder=3)
            if t["status"] == "complete":
                better = not best or (t["objective"] > best[-1]) == maximize
                best.append(t["objective"] if better else best[-1])
                continue
        best.append(best[-1] if best else math.nan)
    ax.step([t["number"] for t in trials], best, where="post", color="#c0392b", linewidth=2)
    ax.set_xlabel("trial")
    ax.set_ylabel(metric)
    ax.set_title(f"Search: replicates (dots), {objective} per trial (bars), best so far (line)")
    _tidy(ax)
    return fig


def key_plot(views: Mapping[str, Sequence[Any]], *, metric: str) -> Figure:
    """The metric against each swept key, one panel per key: at each value of the key the
    mean over the runs that have it with its CI (a bar), and the best group's IQM there (a
    cross, where a value has several groups), from :func:`rlsweep.report.ranking.key_view`. Numbers on a linear axis (a log
    axis when positive and spanning two decades or more), anything else by position."""
    n = len(views)
    ncols = min(MAX_COLUMNS, n)
    nrows = math.ceil(n / MAX_COLUMNS)
    fig = _figure(PANEL_WIDTH * ncols, PANEL_HEIGHT * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for i, (key, rows) in enumerate(views.items()):
        ax = axes[i // ncols][i % ncols]
        numeric = all(
            isinstance(r.value, int | float) and not isinstance(r.value, bool) for r in rows
        )
        xs = [float(r.value) for r in rows] if numeric else list(range(len(rows)))
        means = [r.mean for r in rows]
        lows = [r.mean - r.low if not math.isnan(r.low) else 0.0 for r in rows]
        highs = [r.high - r.mean if not math.isnan(r.high) else 0.0 for r in rows]
        ax.errorbar(xs, means, yerr=[lows, highs], color=PALETTE[0], marker="o", capsize=3,
                    linewidth=1.5, label="mean over runs, 95% CI")  # fmt: skip
        if any(r.groups > 1 for r in rows):  # else the best group is the only one
            ax.scatter(xs, [r.best_iqm for r in rows], marker="x", color=PALETTE[3], zorder=3,
                       label="best group (IQM)")  # fmt: skip
        positive = [x for x in xs if x > 0]
        if numeric and len(positive) == len(xs) and max(xs) / min(positive) >= 100:
            ax.set_xscale("log")
        if not numeric:
            ax.set_xticks(xs, [textwrap.shorten(str(r.value), 16) for r in rows], rotation=30)
        ax.set_xlabel(key)
        if i % ncols == 0:
            ax.set_ylabel(metric)
        if i == 0:
            ax.legend(frameon=False, fontsize="small")
        _tidy(ax)
    for j in range(n, nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    return fig
