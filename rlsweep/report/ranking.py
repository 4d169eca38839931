"""A grid's view: which groups the pairwise sections compare, the top groups, and the metric
against each swept key.

Pairwise statistics (paired tests, probabilities of improvement, their figures) mean
something only between groups of several replicates, and their count grows with the square
of the groups': they cover the groups with at least two runs, at most the :data:`COMPARED`
best of them (by IQM), and the report says so. Everything here is linear in the runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlsweep import stats
from rlsweep.report.analysis import BOOTSTRAP_REPS, GroupStats, interval, statistic_rng
from rlsweep.report.jobfiles import show
from rlsweep.report.read import natural
from rlsweep.report.runs import Run, values_of
from rlsweep.stats import FloatArray

__all__ = [
    "COMPARED",
    "TOP",
    "Compared",
    "KeyValue",
    "compared",
    "identical_groups",
    "key_view",
    "top_groups",
]

COMPARED = 8  # the pairwise sections compare at most this many groups (28 pairs)
TOP = 10  # the top groups' table, when a sweep has more groups than this


@dataclass(frozen=True)
class Compared:
    """The groups a pairwise section compares, in the report's group order, and what it
    leaves out."""

    groups: tuple[str, ...]
    single: int  # groups left out for fewer than two runs with a value
    capped: int  # groups with several runs left out beyond the COMPARED best


def compared(candidates: Mapping[str, FloatArray], cap: int = COMPARED) -> Compared:
    """The groups of ``candidates`` (group -> its runs' scores, one row per run, in the
    report's order) with at least two runs; the ``cap`` best by IQM when there are more."""
    several = [g for g, x in candidates.items() if x.shape[0] >= 2]
    chosen = set(several)
    if len(several) > cap:
        ranked = sorted(enumerate(several), key=lambda ig: (-stats.iqm(candidates[ig[1]]), ig[0]))
        chosen = {g for _, g in ranked[:cap]}
    # Single runs left out matter where there would be a pair to compare.
    single = len(candidates) - len(several) if len(candidates) >= 2 else 0
    return Compared(tuple(g for g in several if g in chosen), single, len(several) - len(chosen))


def _iqm_order(g: GroupStats) -> float:
    return -g.iqm if not math.isnan(g.iqm) else math.inf


def top_groups(groups: Sequence[GroupStats], count: int = TOP) -> list[GroupStats]:
    """The ``count`` groups of highest IQM (ties in the report's order)."""
    ranked = sorted(enumerate(groups), key=lambda ig: (_iqm_order(ig[1]), ig[0]))
    return [g for _, g in ranked[:count] if not math.isnan(g.iqm)]


@dataclass(frozen=True)
class KeyValue:
    """The metric at one value of one swept key, over every run of the groups that have it."""

    key: str
    value: Any
    groups: int
    runs: int  # runs with a value of the metric
    mean: float
    low: float
    high: float
    best: str  # the group of highest IQM at this value ("" when none has a value)
    best_iqm: float


def _by_value(runs: Sequence[Run], key: str) -> dict[str, tuple[Any, list[Run]]]:
    out: dict[str, tuple[Any, list[Run]]] = {}
    for run in runs:
        if key in run.keys:
            text = show(run.keys[key])
            out.setdefault(text, (run.keys[key], []))[1].append(run)
    return dict(sorted(out.items(), key=lambda item: natural(item[1][0])))


def key_view(
    runs: Sequence[Run],
    groups: Sequence[GroupStats],
    key: str,
    metric: str | None,
    *,
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
) -> list[KeyValue]:
    """Per value of ``key`` (numbers as numbers): the mean of the metric over the runs of
    every group with that value, its bootstrap CI, and the best group there."""
    stats_of = {g.group: g for g in groups}
    out = []
    for text, (value, at) in _by_value(runs, key).items():
        x = values_of(at, metric)
        names = list(dict.fromkeys(r.group for r in at))
        rng = statistic_rng(seed, "key", key, text, "mean")
        mean, low, high = interval(x, stats.mean, rng, reps) if x.size else (math.nan,) * 3
        best = top_groups([stats_of[n] for n in names if n in stats_of], 1)
        out.append(
            KeyValue(key, value, len(names), int(x.size), mean, low, high,
                     best[0].group if best else "", best[0].iqm if best else math.nan)
        )  # fmt: skip
    return out


def identical_groups(runs: Sequence[Run], metric: str | None) -> list[tuple[str, int, float]]:
    """(group, runs, value) of each group whose completed runs (two or more) all have the
    same value of ``metric``: an app that ignores its replicate."""
    values: dict[str, list[float]] = {}
    for run in runs:
        value = run.value(metric)
        if value is not None:
            values.setdefault(run.group, []).append(value)
    return [(g, len(v), v[0]) for g, v in values.items() if len(v) >= 2 and len(set(v)) == 1]
