"""The numbers of the report: per-cell statistics, normalised aggregates across envs and the
probability of improvement, each with its seeded 95% bootstrap interval.

Pure functions of the runs table (:mod:`rlsweep.report.runs`). Every random draw comes from a
numpy Generator seeded from the report's ``seed`` and the name of the statistic (agent, env,
...), so the same sweep gives the same numbers bit for bit, and adding an agent never changes
the numbers reported for the others. Paired comparisons are in
:mod:`rlsweep.report.comparisons`, the bands the figures draw in :mod:`rlsweep.report.curves`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rlsweep import stats
from rlsweep.report.runs import (
    STATUSES,
    Run,
    agents_of,
    cells_of,
    completed_runs,
    envs_of,
    finals,
)
from rlsweep.seeding import key_words
from rlsweep.stats import FloatArray
from rlsweep.stats.bootstrap import Interval, bootstrap_ci, probability_of_improvement_ci

__all__ = [
    "AGGREGATES",
    "BOOTSTRAP_REPS",
    "AggregateStats",
    "CellStats",
    "GroupStats",
    "ImprovementStats",
    "ScoreMatrices",
    "aggregate_stats",
    "band_rng",
    "cell_stats",
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

    ``key`` names the statistic (``"cell", agent, env, "IQM"``), so each entry of the report
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
# Per (agent, env)


@dataclass(frozen=True)
class CellStats:
    """Final evaluation return of one (agent, env) over its completed runs."""

    agent: str
    env: str
    completed: int
    failed: int
    incomplete: int
    missing: int
    mean: float
    median: float
    iqm: float
    std: float
    mean_ci: tuple[float, float]  # NaN when fewer than two runs completed
    iqm_ci: tuple[float, float]


def _cell(
    runs: Sequence[Run], agent: str, env: str, n_missing: int, seed: int, reps: int
) -> CellStats:
    cell = [r for r in runs if r.agent == agent and r.env == env]
    counts = {s: sum(r.status == s for r in cell) for s in STATUSES}
    x = finals(completed_runs(runs, agent, env))
    if x.size == 0:
        nan = math.nan
        return CellStats(agent, env, 0, counts["failed"], counts["incomplete"], n_missing,
                         nan, nan, nan, nan, (nan, nan), (nan, nan))  # fmt: skip
    mean_ci = interval(x, stats.mean, statistic_rng(seed, "cell", agent, env, "mean"), reps)
    iqm_ci = interval(x, stats.iqm, statistic_rng(seed, "cell", agent, env, "IQM"), reps)
    return CellStats(
        agent=agent,
        env=env,
        completed=int(x.size),
        failed=counts["failed"],
        incomplete=counts["incomplete"],
        missing=n_missing,
        mean=stats.mean(x),
        median=stats.median(x),
        iqm=stats.iqm(x),
        std=stats.std(x),
        mean_ci=mean_ci[1:],
        iqm_ci=iqm_ci[1:],
    )


def cell_stats(
    runs: Sequence[Run],
    missing: Sequence[tuple[str, str, int]] = (),
    *,
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
) -> list[CellStats]:
    """n, mean, median, IQM, standard deviation and 95% bootstrap CIs of every (agent, env)."""
    return [
        _cell(runs, agent, env, sum(1 for a, e, _ in missing if (a, e) == (agent, env)), seed, reps)
        for agent, env in cells_of(runs)
    ]


@dataclass(frozen=True)
class GroupStats:
    """The metric over one group's completed runs (any app's report: a group is a cell)."""

    group: str
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


def group_stats(
    cells: Sequence[CellStats], runs: Sequence[Run], *, seed: int, reps: int
) -> list[GroupStats]:
    """Each cell (a group) with the median's CI and the count of runs without a value."""
    out = []
    for c in cells:
        x = finals(completed_runs(runs, c.agent, c.env))
        if x.size:
            rng = statistic_rng(seed, "cell", c.agent, c.env, "median")
            median_ci = interval(x, stats.median, rng, reps)[1:]
        else:
            median_ci = (math.nan, math.nan)
        no_value = sum(
            r.agent == c.agent and r.status == "completed" and r.final_return is None for r in runs
        )
        out.append(
            GroupStats(c.agent, c.completed, c.failed, c.incomplete, c.missing, no_value,
                       c.mean, c.mean_ci, c.median, median_ci, c.iqm, c.iqm_ci, c.std)
        )  # fmt: skip
    return out


# --------------------------------------------------------------------------------------------
# Across envs: normalised scores


def env_baselines(runs: Sequence[Run]) -> tuple[dict[str, tuple[float, float]], dict[str, str]]:
    """Per env, (random_score, reference_score) from its completed runs' configs.

    Returns the usable baselines and, for every other env, why it has none.
    """
    usable: dict[str, tuple[float, float]] = {}
    reasons: dict[str, str] = {}
    for env in envs_of(runs):
        done = [r for r in runs if r.env == env and r.status == "completed"]
        pairs = {(r.random_score, r.reference_score) for r in done}
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
    """Normalised final returns, agent -> (runs, envs), over the envs every agent ran."""

    envs: tuple[str, ...]
    scores: dict[str, FloatArray]
    notes: tuple[str, ...]


def normalized_scores(
    runs: Sequence[Run], baselines: Mapping[str, tuple[float, float]]
) -> ScoreMatrices:
    """(return - random) / (reference - random) per env, as one (runs, envs) matrix per agent.

    Envs are those with baselines on which every agent completed a run. An agent with unequal
    run counts across envs keeps, in each env, its runs of the lowest replicate indices (the
    stratified bootstrap needs one run count per agent); the notes say so.
    """
    agents = agents_of(runs)
    notes: list[str] = []
    envs: list[str] = []
    for env in sorted(baselines):
        absent = [a for a in agents if not completed_runs(runs, a, env)]
        if absent:
            notes.append(f"{env} left out: no completed run of {', '.join(absent)}.")
        else:
            envs.append(env)
    scores: dict[str, FloatArray] = {}
    if not envs:
        return ScoreMatrices((), scores, tuple(notes))
    for agent in agents:
        per_env = [finals(completed_runs(runs, agent, env)) for env in envs]
        m = min(x.size for x in per_env)
        if any(x.size != m for x in per_env):
            counts = ", ".join(f"{e}: {x.size}" for e, x in zip(envs, per_env, strict=True))
            notes.append(
                f"{agent} completed unequal run counts ({counts}); the aggregate uses its "
                f"first {m} runs (lowest replicate indices) in each env."
            )
        columns = [
            stats.normalize_scores(x[:m], *baselines[env])
            for env, x in zip(envs, per_env, strict=True)
        ]
        scores[agent] = np.stack(columns, axis=1)
    return ScoreMatrices(tuple(envs), scores, tuple(notes))


def group_scores(runs: Sequence[Run], metric: str | None) -> ScoreMatrices:
    """Any app's runs: each group's values as one task (a column), what the probability of
    improvement and the performance profiles take. Raw values: both only compare them."""
    if metric is None:
        return ScoreMatrices((), {}, ())
    scores = {}
    for group in sorted({r.agent for r in runs}):
        x = finals(completed_runs(runs, group, metric))
        if x.size:
            scores[group] = x[:, None]
    return ScoreMatrices((metric,) if scores else (), scores, ())


@dataclass(frozen=True)
class AggregateStats:
    """One agent's aggregates of normalised scores across envs, each (point, low, high)."""

    agent: str
    runs: int
    envs: int
    values: dict[str, Interval]  # keyed like AGGREGATES


def aggregate_stats(
    matrices: ScoreMatrices, *, seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> list[AggregateStats]:
    """IQM, mean, median and optimality gap of each agent, with stratified bootstrap CIs."""
    out = []
    for agent, x in matrices.scores.items():
        values = {
            name: interval(x, statistic, statistic_rng(seed, "aggregate", agent, name), reps)
            for name, statistic in AGGREGATES.items()
        }
        out.append(AggregateStats(agent, int(x.shape[0]), int(x.shape[1]), values))
    return out


@dataclass(frozen=True)
class ImprovementStats:
    """P(X > Y) over the envs of the aggregate, with its bootstrap CI."""

    x: str
    y: str
    point: float
    low: float
    high: float


def improvement_stats(
    matrices: ScoreMatrices, *, seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> list[ImprovementStats]:
    """Probability of improvement of every pair of agents (X before Y in name order)."""
    names = list(matrices.scores)
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
