"""The numbers of the report: per (group, task) statistics of the metric, scores across
tasks and the probability of improvement, each with its seeded 95% bootstrap interval.

Pure functions of the runs table (:mod:`rlsweep.report.runs`) and the metric. Every random
draw comes from a numpy Generator seeded from the report's ``seed`` and the name of the
statistic (group, task, ...), so the same sweep gives the same numbers bit for bit, and adding
a group never changes the numbers reported for the others. Paired comparisons are in
:mod:`rlsweep.report.comparisons`, which groups are compared in :mod:`rlsweep.report.ranking`,
the bands the figures draw in :mod:`rlsweep.report.curves`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rlsweep import stats
from rlsweep.report.runs import STATUSES, Run, by_cell, cells_of, groups_of, tasks_of, values_of
from rlsweep.seeding import key_words
from rlsweep.stats import FloatArray
from rlsweep.stats.bootstrap import Interval, bootstrap_ci, probability_of_improvement_ci

__all__ = [
    "AGGREGATES",
    "BOOTSTRAP_REPS",
    "AggregateStats",
    "GroupStats",
    "ImprovementStats",
    "ScoreMatrices",
    "aggregate_stats",
    "band_rng",
    "env_baselines",
    "group_scores",
    "group_stats",
    "improvement_stats",
    "normalized_scores",
    "statistic_rng",
]

BOOTSTRAP_REPS = 2000
CONFIDENCE = 0.95

# Aggregates across envs, in report order; the optimality gap is measured from score 1.
AGGREGATES: dict[str, Callable[[FloatArray], float]] = {
    "IQM": stats.iqm,
    "mean": stats.mean,
    "median": stats.median,
    "optimality gap": functools.partial(stats.optimality_gap, gamma=1.0),
}


# --------------------------------------------------------------------------------------------
# Reproducible randomness


def statistic_rng(seed: int, *key: str) -> np.random.Generator:
    """The generator of one statistic: a pure function of the report's seed and ``key``.

    ``key`` names the statistic (``"cell", group, task, "IQM"``), so each entry of the report
    draws its own resamples whatever else the report holds.
    """
    return np.random.default_rng(
        np.random.SeedSequence(seed, spawn_key=key_words({"report": list(key)}))
    )


def band_rng(seed: int, figure: str) -> np.random.Generator:
    """The generator of one figure's bands (``curves``, ``profiles``): seeded by a 32-bit word
    of the SeedSequence of the statistic ``"plot", figure``."""
    seed_seq = statistic_rng(seed, "plot", figure).bit_generator.seed_seq
    return np.random.default_rng(int(seed_seq.generate_state(1, np.uint32)[0]))


def interval(
    x: FloatArray, statistic: Callable[[FloatArray], float], rng: np.random.Generator, reps: int
) -> Interval:
    """Point estimate and stratified bootstrap CI; NaN bounds with fewer than two runs."""
    if x.shape[0] < 2:
        return float(statistic(x)), math.nan, math.nan
    return bootstrap_ci(x, statistic, reps=reps, confidence=CONFIDENCE, seed=rng)


# --------------------------------------------------------------------------------------------
# Per (group, task)


@dataclass(frozen=True)
class GroupStats:
    """The metric over one (group, task)'s completed runs."""

    group: str
    task: str
    completed: int  # completed runs with a finite value of the metric
    failed: int
    incomplete: int
    missing: int
    no_value: int  # completed runs without a finite value of the metric
    mean: float
    mean_ci: tuple[float, float]  # NaN when fewer than two runs have a value
    median: float
    median_ci: tuple[float, float]
    iqm: float
    iqm_ci: tuple[float, float]
    std: float


def _cell(
    cell: Sequence[Run], key: tuple[str, str], counts: tuple[int, int], metric: str | None,
    seed: int, reps: int,
) -> GroupStats:  # fmt: skip
    """One cell's statistics; ``counts`` = (missing, completed without a value), ``key`` =
    (group, the statistic's name for the task)."""
    group, name = key
    status = {s: sum(r.status == s for r in cell) for s in STATUSES}
    x = values_of(cell, metric)
    nan = math.nan
    if x.size == 0:
        return GroupStats(group, cell[0].task, 0, status["failed"], status["incomplete"],
                          counts[0], counts[1], nan, (nan, nan), nan, (nan, nan), nan,
                          (nan, nan), nan)  # fmt: skip
    ci = {
        name_: interval(x, statistic, statistic_rng(seed, "cell", group, name, name_), reps)[1:]
        for name_, statistic in (("mean", stats.mean), ("median", stats.median),
                                 ("IQM", stats.iqm))
    }  # fmt: skip
    return GroupStats(
        group=group,
        task=cell[0].task,
        completed=int(x.size),
        failed=status["failed"],
        incomplete=status["incomplete"],
        missing=counts[0],
        no_value=counts[1],
        mean=stats.mean(x),
        mean_ci=ci["mean"],
        median=stats.median(x),
        median_ci=ci["median"],
        iqm=stats.iqm(x),
        iqm_ci=ci["IQM"],
        std=stats.std(x),
    )


def group_stats(
    runs: Sequence[Run],
    missing: Sequence[tuple[str, str, int]],
    metric: str | None,
    *,
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
) -> list[GroupStats]:
    """n, mean, median, IQM, standard deviation and 95% bootstrap CIs of every (group, task),
    in group then task order. A task of one (any app's: ``""``) is named by the metric in
    its statistics' generators."""
    cells = by_cell(runs)
    n_missing: dict[tuple[str, str], int] = {}
    for group, task, _ in missing:
        n_missing[(group, task)] = n_missing.get((group, task), 0) + 1
    out = []
    for group, task in cells_of(runs):
        cell = cells[(group, task)]
        no_value = sum(r.status == "completed" and r.value(metric) is None for r in cell)
        counts = (n_missing.get((group, task), 0), no_value)
        name = task or (metric or "")
        out.append(_cell(cell, (group, name), counts, metric, seed, reps))
    return out


# --------------------------------------------------------------------------------------------
# Across tasks: scores


def env_baselines(runs: Sequence[Run]) -> tuple[dict[str, tuple[float, float]], dict[str, str]]:
    """Per env, (random_score, reference_score) from its completed runs' configs.

    Returns the usable baselines and, for every other env, why it has none.
    """
    usable: dict[str, tuple[float, float]] = {}
    reasons: dict[str, str] = {}
    for env in tasks_of(runs):
        done = [r for r in runs if r.task == env and r.status == "completed"]
        pairs = {r.baselines for r in done}
        if not done:
            reasons[env] = "no completed run"
        elif len(pairs) > 1:
            reasons[env] = "runs disagree on random_score / reference_score"
        else:
            ((low, high),) = pairs
            if low is None or high is None:
                reasons[env] = "no random_score / reference_score in the env config"
            elif low == high:
                reasons[env] = "random_score equals reference_score"
            else:
                usable[env] = (low, high)
    return usable, reasons


@dataclass(frozen=True)
class ScoreMatrices:
    """Scores, group -> (runs, tasks), over the tasks every group ran."""

    envs: tuple[str, ...]
    scores: dict[str, FloatArray]
    notes: tuple[str, ...]


def normalized_scores(
    runs: Sequence[Run], baselines: Mapping[str, tuple[float, float]], metric: str | None
) -> ScoreMatrices:
    """(value - random) / (reference - random) per env, as one (runs, envs) matrix per group.

    Envs are those with baselines on which every group completed a run. A group with unequal
    run counts across envs keeps, in each env, its runs of the lowest replicate indices (the
    stratified bootstrap needs one run count per group); the notes say so.
    """
    groups, cells = groups_of(runs), by_cell(r for r in runs if r.status == "completed")
    notes: list[str] = []
    envs: list[str] = []
    for env in sorted(baselines):
        absent = [g for g in groups if not cells.get((g, env))]
        if absent:
            notes.append(f"{env} left out: no completed run of {', '.join(absent)}.")
        else:
            envs.append(env)
    scores: dict[str, FloatArray] = {}
    if not envs:
        return ScoreMatrices((), scores, tuple(notes))
    for group in groups:
        per_env = [values_of(cells[(group, env)], metric) for env in envs]
        m = min(x.size for x in per_env)
        if any(x.size != m for x in per_env):
            counts = ", ".join(f"{e}: {x.size}" for e, x in zip(envs, per_env, strict=True))
            notes.append(
                f"{group} completed unequal run counts ({counts}); the aggregate uses its "
                f"first {m} runs (lowest replicate indices) in each env."
            )
        columns = [
            stats.normalize_scores(x[:m], *baselines[env])
            for env, x in zip(envs, per_env, strict=True)
        ]
        scores[group] = np.stack(columns, axis=1)
    return ScoreMatrices(tuple(envs), scores, tuple(notes))


def group_scores(runs: Sequence[Run], metric: str | None) -> ScoreMatrices:
    """One task: each group's values as one column, what the probability of improvement and
    the performance profiles take. Raw values: both only compare them."""
    if metric is None:
        return ScoreMatrices((), {}, ())
    cells = by_cell(r for r in runs if r.status == "completed")
    scores = {}
    for group, task in cells_of(runs):
        x = values_of(cells.get((group, task), []), metric)
        if x.size:
            scores[group] = x[:, None]
    return ScoreMatrices((metric,) if scores else (), scores, ())


@dataclass(frozen=True)
class AggregateStats:
    """One group's aggregates of normalised scores across envs, each (point, low, high)."""

    group: str
    runs: int
    envs: int
    values: dict[str, Interval]  # keyed like AGGREGATES


def aggregate_stats(
    matrices: ScoreMatrices, *, seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> list[AggregateStats]:
    """IQM, mean, median and optimality gap of each group, with stratified bootstrap CIs."""
    out = []
    for group, x in matrices.scores.items():
        values = {
            name: interval(x, statistic, statistic_rng(seed, "aggregate", group, name), reps)
            for name, statistic in AGGREGATES.items()
        }
        out.append(AggregateStats(group, int(x.shape[0]), int(x.shape[1]), values))
    return out


@dataclass(frozen=True)
class ImprovementStats:
    """P(X > Y) over the tasks of the scores, with its bootstrap CI."""

    x: str
    y: str
    point: float
    low: float
    high: float


def improvement_stats(
    matrices: ScoreMatrices,
    compared: Sequence[str] | None = None,
    *,
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
) -> list[ImprovementStats]:
    """Probability of improvement of every pair of the ``compared`` groups (default: all),
    X before Y in the scores' order."""
    chosen = set(matrices.scores if compared is None else compared)
    names = [g for g in matrices.scores if g in chosen]
    out = []
    for i, x in enumerate(names):
        for y in names[i + 1 :]:
            point, low, high = probability_of_improvement_ci(
                matrices.scores[x],
                matrices.scores[y],
                reps=reps,
                confidence=CONFIDENCE,
                seed=statistic_rng(seed, "improvement", x, y),
            )
            out.append(ImprovementStats(x, y, point, low, high))
    return out
