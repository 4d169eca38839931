"""The statistical report of one or several sweeps: ``python -m rlsweep.report SWEEP_DIR ...``.

It reads the sweep directories (the job directories' ``result.json``, ``seeds.json``,
``metrics.csv`` and ``error.txt``) and writes, into the first sweep directory or ``out_dir``:

- ``report.md``: per (agent, env) statistics of the final evaluation return; scores
  normalised per env and aggregated across envs (IQM, mean, median, optimality gap); the
  probability of improvement of every pair of agents; paired comparisons under common random
  numbers (paired bootstrap CI, Wilcoxon signed-rank test, Holm correction); the list of
  failed, incomplete and missing jobs;
- ``report_learning_curves.png``, ``report_performance_profiles.png``,
  ``report_probability_of_improvement.png``;
- ``evaluations.csv`` and ``evaluations.parquet``: the tidy table, one row per (job,
  evaluation step), readable with one ``pd.read_csv`` / ``pd.read_parquet`` call.

Every random draw comes from a numpy Generator seeded from the report's ``seed`` and the name
of the statistic (agent, env, ...), so the same sweep gives the same ``report.md`` byte for
byte, and adding an agent never changes the numbers reported for the others.

A sweep of any other Hydra app gets :mod:`rlsweep.app_report`'s report instead: its runs
(:mod:`rlsweep.runs`) feed the same :class:`Run` contract and statistics, grouped by the
swept keys, on a metric the task function returned (``--metric``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from rlsweep import plots, stats
from rlsweep.seeding import canonical_json, identity_digest, key_words
from rlsweep.store import (
    HYDRA_DIR,
    SEEDS_FILE,
    JobRecord,
    atomic_write_text,
    read_metrics,
    read_sweep,
)

__all__ = [
    "AggregateStats",
    "CellStats",
    "Comparison",
    "ImprovementStats",
    "Report",
    "Run",
    "ScoreMatrices",
    "aggregate_stats",
    "cell_stats",
    "deduplicate",
    "env_baselines",
    "improvement_stats",
    "learning_curve_data",
    "load_runs",
    "main",
    "match_pairs",
    "missing_runs",
    "normalized_scores",
    "paired_comparisons",
    "render_report",
    "statistic_rng",
    "tidy_table",
    "write_report",
]

FloatArray = npt.NDArray[np.float64]
Interval = tuple[float, float, float]

REPORT_MD = "report.md"
EVALUATIONS_CSV = "evaluations.csv"
EVALUATIONS_PARQUET = "evaluations.parquet"
CURVES_PNG = "report_learning_curves.png"
PROFILES_PNG = "report_performance_profiles.png"
IMPROVEMENT_PNG = "report_probability_of_improvement.png"
BOOTSTRAP_REPS = 2000
CONFIDENCE = 0.95
STATUSES = ("completed", "failed", "incomplete")
UNKNOWN = "?"

# Aggregates across envs, in report order; the optimality gap is measured from score 1.
AGGREGATES: dict[str, Callable[[FloatArray], float]] = {
    "IQM": stats.iqm,
    "mean": stats.mean,
    "median": stats.median,
    "optimality gap": functools.partial(stats.optimality_gap, gamma=1.0),
}

TIDY_COLUMNS = (
    "sweep",
    "job",
    "agent",
    "env",
    "replicate",
    "root",
    "common_random_numbers",
    "seed_fingerprint",
    "status",
    "step",
    "return",
    "return_std",
    "normalized_return",
    "wall_time",
)


# --------------------------------------------------------------------------------------------
# Reading the sweeps


@dataclass(frozen=True)
class Run:
    """One job directory, as the report sees it."""

    sweep: Path
    path: Path
    status: str  # "completed" | "failed" | "incomplete"
    agent: str  # display label: the agent's name, plus what differs if a name is ambiguous
    env: str  # likewise for the env id
    replicate: int | None
    root: int | None
    common_random_numbers: bool | None  # from seeds.json (None: the job wrote none)
    seed_fingerprint: str | None  # short SHA-256 of every concrete seed in seeds.json
    final_return: float | None
    random_score: float | None
    reference_score: float | None
    error: str | None  # the last line of error.txt

    @property
    def job(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class _Raw:
    """What one job directory holds, before agents and envs get their display labels."""

    sweep: Path
    record: JobRecord
    seeds: dict[str, Any] | None
    hydra: dict[str, Any] | None


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _hydra_config(job_dir: Path) -> dict[str, Any] | None:
    """The job's composed config from ``.hydra/config.yaml`` (interpolations kept if broken)."""
    path = job_dir / HYDRA_DIR / "config.yaml"
    if not path.is_file():
        return None
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(path)
    try:
        data: Any = OmegaConf.to_container(cfg, resolve=True)
    except Exception:
        data = OmegaConf.to_container(cfg, resolve=False)
    return {str(k): v for k, v in data.items()} if isinstance(data, dict) else None


def _section(raw: _Raw, name: str) -> dict[str, Any] | None:
    """A config section (agent, env, seeding): the typed one in result.json, else Hydra's."""
    for source in ((raw.record.result or {}).get("config"), raw.hydra):
        if isinstance(source, dict) and isinstance(source.get(name), dict):
            return dict(source[name])
    return None


def _treatment(raw: _Raw) -> dict[str, Any] | None:
    """What was run on the env: the agent, train and eval config sections, flattened.

    Read from ``.hydra/config.yaml`` for every job (one source, so completed and failed jobs
    compare alike), else from result.json. Agent keys keep their name; the others are
    prefixed (``train.total_steps``).
    """
    result_config = (raw.record.result or {}).get("config")
    for source in (raw.hydra, result_config):
        if isinstance(source, dict) and isinstance(source.get("agent"), dict):
            flat: dict[str, Any] = {}
            for section in ("agent", "train", "eval"):
                values = source.get(section)
                for key, value in (values if isinstance(values, dict) else {}).items():
                    flat[str(key) if section == "agent" else f"{section}.{key}"] = value
            return flat
    return None


def _labels(items: Sequence[tuple[str, str | None, Mapping[str, Any] | None]]) -> list[str]:
    """A display label per (name, identity, config).

    A name with one identity keeps its name. Identities sharing a name (a hyperparameter
    sweep) are told apart by the config entries that differ between them, e.g.
    ``ppo[learning_rate=0.001]``; by a short hash of the identity when that is not enough.
    """
    configs: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    identities: dict[str, set[str]] = defaultdict(set)
    for name, identity, config in items:
        if identity is not None:
            identities[name].add(identity)
            if config is not None:
                configs[name].setdefault(identity, config)
    label_of: dict[tuple[str, str], str] = {}
    for name, ids in identities.items():
        if len(ids) < 2:
            continue
        known = configs[name]
        keys = sorted({k for c in known.values() for k in c})
        # Among the configs that have the key: results written before an option existed
        # lack it, which is not a difference (AgentConfig.ADDED_LATER).
        differing = [
            k for k in keys if len({canonical_json(c[k]) for c in known.values() if k in c}) > 1
        ]
        for identity in sorted(ids):
            if identity in known and differing:
                config = known[identity]
                parts = [f"{k}={canonical_json(config.get(k))}" for k in differing]
                label_of[(name, identity)] = f"{name}[{', '.join(parts)}]"
            else:
                label_of[(name, identity)] = f"{name}@{identity[:8]}"
        if len({label_of[(name, i)] for i in ids}) < len(ids):  # configs alone do not separate
            for identity in ids:
                label_of[(name, identity)] = f"{name}@{identity[:8]}"
    labels: list[str] = []
    for name, identity, _ in items:
        if len(identities.get(name, ())) < 2:
            labels.append(name)
        elif identity is None:
            labels.append(f"{name}[unknown config]")
        else:
            labels.append(label_of[(name, identity)])
    return labels


def _int_or_none(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _float_or_none(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _to_run(raw: _Raw, agent: str, env: str) -> Run:
    record, seeds = raw.record, raw.seeds
    seeding = _section(raw, "seeding") or {}
    # Baselines only from completed runs: the typed config the job validated.
    env_cfg = (_section(raw, "env") or {}) if record.result is not None else {}
    root = _int_or_none(seeds.get("root")) if seeds else _int_or_none(seeding.get("root"))
    crn = seeds.get("common_random_numbers") if seeds else None
    fingerprint = (
        identity_digest(seeds["seeds"]) if seeds and isinstance(seeds.get("seeds"), dict) else None
    )
    error_lines = (record.error or "").strip().splitlines()
    return Run(
        sweep=raw.sweep,
        path=record.path,
        status=record.status,
        agent=agent,
        env=env,
        replicate=record.replicate,
        root=root,
        common_random_numbers=crn if isinstance(crn, bool) else None,
        seed_fingerprint=fingerprint,
        final_return=record.final_return,
        random_score=_float_or_none(env_cfg.get("random_score")),
        reference_score=_float_or_none(env_cfg.get("reference_score")),
        error=error_lines[-1] if error_lines else None,
    )


def load_runs(sweep_dirs: Sequence[Path]) -> list[Run]:
    """Every job directory of the sweeps, in sweep order then directory name order.

    An agent is its name, unless runs of that name differ in their agent, train or eval
    config (a hyperparameter sweep): each variant is then an agent of its own, labelled by
    what differs. An env is its gymnasium id.
    """
    raws = [
        _Raw(sweep, record, _read_json(record.path / SEEDS_FILE), _hydra_config(record.path))
        for sweep in _unique_dirs(sweep_dirs)
        for record in read_sweep(sweep)
    ]
    items = []
    for r in raws:
        treatment = _treatment(r)
        identity = None if treatment is None else identity_digest(treatment)
        items.append((r.record.agent, identity, treatment))
    agents = _labels(items)
    return [_to_run(r, agent, r.record.env) for r, agent in zip(raws, agents, strict=True)]


def _unique_dirs(sweep_dirs: Sequence[Path]) -> list[Path]:
    """The sweep directories, resolved, each once, in the order given."""
    return list(dict.fromkeys(Path(d).resolve() for d in sweep_dirs))


_RANK = {"completed": 0, "failed": 1, "incomplete": 2}


def deduplicate(runs: Sequence[Run]) -> tuple[list[Run], list[Run]]:
    """One run per (agent, env, root, replicate): the first completed one, else the first.

    Returns (kept, superseded); the same job found in two sweep directories, or a failed
    attempt that a later sweep completed, is counted once.
    """
    best: dict[tuple[Any, ...], Run] = {}
    for run in runs:
        if run.replicate is None or UNKNOWN in (run.agent, run.env):
            key: tuple[Any, ...] = ("path", str(run.path))
        else:
            key = (run.agent, run.env, run.root, run.replicate)
        current = best.get(key)
        if current is None or _RANK[run.status] < _RANK[current.status]:
            best[key] = run
    kept_ids = {id(r) for r in best.values()}
    kept = [r for r in runs if id(r) in kept_ids]
    superseded = [r for r in runs if id(r) not in kept_ids]
    return kept, superseded


def _agents(runs: Iterable[Run]) -> list[str]:
    return sorted({r.agent for r in runs if r.agent != UNKNOWN})


def _envs(runs: Iterable[Run]) -> list[str]:
    return sorted({r.env for r in runs if r.env != UNKNOWN})


def missing_runs(runs: Sequence[Run]) -> list[tuple[str, str, int]]:
    """(agent, env, replicate) of the grid with no job directory at all.

    The grid is inferred: every (agent, env) cell that has at least one job directory, times
    every replicate index seen in the sweeps. Cells are not crossed: a sweep of presets (each
    agent variant on its own env) is not a factorial grid, and its other combinations were
    never asked for.
    """
    replicates = sorted({r.replicate for r in runs if r.replicate is not None})
    present = {(r.agent, r.env, r.replicate) for r in runs}
    return [
        (agent, env, rep)
        for agent, env in _cells(runs)
        for rep in replicates
        if (agent, env, rep) not in present
    ]


def _cells(runs: Sequence[Run]) -> list[tuple[str, str]]:
    """The (agent, env) pairs with at least one job directory, in agent then env order."""
    present = {(r.agent, r.env) for r in runs}
    return [(a, e) for a in _agents(runs) for e in _envs(runs) if (a, e) in present]


def _completed(runs: Iterable[Run], agent: str, env: str) -> list[Run]:
    """The completed runs of one cell, by (root, replicate, sweep, job)."""
    cell = [r for r in runs if r.agent == agent and r.env == env and r.status == "completed"]
    return sorted(cell, key=_run_order)


def _run_order(run: Run) -> tuple[int, int, str, str]:
    rep = -1 if run.replicate is None else run.replicate
    root = -1 if run.root is None else run.root
    return root, rep, str(run.sweep), run.job


def _finals(runs: Iterable[Run]) -> FloatArray:
    return np.array([r.final_return for r in runs if r.final_return is not None], dtype=float)


# --------------------------------------------------------------------------------------------
# Reproducible randomness


def _seed_sequence(seed: int, key: Sequence[str]) -> np.random.SeedSequence:
    return np.random.SeedSequence(seed, spawn_key=key_words({"report": list(key)}))


def statistic_rng(seed: int, *key: str) -> np.random.Generator:
    """The generator of one statistic: a pure function of the report's seed and ``key``.

    ``key`` names the statistic (``"cell", agent, env, "IQM"``), so each entry of the report
    draws its own resamples whatever else the report holds.
    """
    return np.random.default_rng(_seed_sequence(seed, key))


def _plot_seed(seed: int, *key: str) -> int:
    return int(_seed_sequence(seed, key).generate_state(1, np.uint32)[0])


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


def _ci(
    x: FloatArray, statistic: Callable[[FloatArray], float], rng: np.random.Generator, reps: int
) -> Interval:
    """Point estimate and stratified bootstrap CI; NaN bounds with fewer than two runs."""
    if x.shape[0] < 2:
        return float(statistic(x)), math.nan, math.nan
    return stats.bootstrap_ci(x, statistic, reps=reps, confidence=CONFIDENCE, seed=rng)


def cell_stats(
    runs: Sequence[Run],
    missing: Sequence[tuple[str, str, int]] = (),
    *,
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
) -> list[CellStats]:
    """n, mean, median, IQM, standard deviation and 95% bootstrap CIs of every (agent, env)."""
    out: list[CellStats] = []
    for agent, env in _cells(runs):
        cell = [r for r in runs if r.agent == agent and r.env == env]
        n_missing = sum(1 for a, e, _ in missing if (a, e) == (agent, env))
        counts = {s: sum(r.status == s for r in cell) for s in STATUSES}
        x = _finals(_completed(runs, agent, env))
        if x.size == 0:
            nan = math.nan
            out.append(
                CellStats(agent, env, 0, counts["failed"], counts["incomplete"], n_missing,
                          nan, nan, nan, nan, (nan, nan), (nan, nan))
            )  # fmt: skip
            continue
        mean_ci = _ci(x, stats.mean, statistic_rng(seed, "cell", agent, env, "mean"), reps)
        iqm_ci = _ci(x, stats.iqm, statistic_rng(seed, "cell", agent, env, "IQM"), reps)
        out.append(
            CellStats(
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
        )
    return out


# --------------------------------------------------------------------------------------------
# Across envs: normalised scores


def env_baselines(runs: Sequence[Run]) -> tuple[dict[str, tuple[float, float]], dict[str, str]]:
    """Per env, (random_score, reference_score) from its completed runs' configs.

    Returns the usable baselines and, for every other env, why it has none.
    """
    usable: dict[str, tuple[float, float]] = {}
    reasons: dict[str, str] = {}
    for env in _envs(runs):
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
    agents = _agents(runs)
    notes: list[str] = []
    envs: list[str] = []
    for env in sorted(baselines):
        absent = [a for a in agents if not _completed(runs, a, env)]
        if absent:
            notes.append(f"{env} left out: no completed run of {', '.join(absent)}.")
        else:
            envs.append(env)
    scores: dict[str, FloatArray] = {}
    if not envs:
        return ScoreMatrices((), scores, tuple(notes))
    for agent in agents:
        per_env = [_finals(_completed(runs, agent, env)) for env in envs]
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
            name: _ci(x, statistic, statistic_rng(seed, "aggregate", agent, name), reps)
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
            point, low, high = stats.probability_of_improvement_ci(
                matrices.scores[x],
                matrices.scores[y],
                reps=reps,
                confidence=CONFIDENCE,
                seed=statistic_rng(seed, "improvement", x, y),
            )
            out.append(ImprovementStats(x, y, point, low, high))
    return out


# --------------------------------------------------------------------------------------------
# Paired comparisons


def match_pairs(a_runs: Sequence[Run], b_runs: Sequence[Run]) -> tuple[list[tuple[Run, Run]], str]:
    """Pairs (replicate r of A, replicate r of B) that saw the same environment seeds.

    Two runs pair when both seeds.json say ``common_random_numbers: true`` and their root and
    replicate match. Returns the pairs in (root, replicate) order and, when there are none,
    why.
    """

    def keyed(runs: Sequence[Run]) -> dict[tuple[int, int], Run]:
        out: dict[tuple[int, int], Run] = {}
        for r in sorted(runs, key=_run_order):
            if r.common_random_numbers and r.root is not None and r.replicate is not None:
                out.setdefault((r.root, r.replicate), r)
        return out

    ka, kb = keyed(a_runs), keyed(b_runs)
    pairs = [(ka[k], kb[k]) for k in sorted(ka.keys() & kb.keys())]
    if pairs:
        return pairs, ""
    every = [*a_runs, *b_runs]
    if all(r.common_random_numbers is None for r in every):
        return [], "no seeds.json"
    if not ka or not kb:
        return [], "common random numbers off (seeding.common_random_numbers: false)"
    if not {k[0] for k in ka} & {k[0] for k in kb}:
        return [], "different seeding roots"
    return [], "no replicate index in common"


@dataclass(frozen=True)
class Comparison:
    """Final return of agent A minus agent B on one env."""

    env: str
    a: str
    b: str
    paired: bool
    n_a: int
    n_b: int
    n_pairs: int
    difference: float  # mean(A) - mean(B), over the pairs when paired
    low: float
    high: float
    correlation: float  # Pearson r of the pairs (NaN when unpaired or undefined)
    p_value: float  # Wilcoxon signed-rank, two-sided (NaN when unpaired)
    p_holm: float  # Holm-adjusted over every paired test of the report
    note: str


def _compare(
    env: str, a: str, b: str, a_runs: Sequence[Run], b_runs: Sequence[Run], seed: int, reps: int
) -> Comparison:
    pairs, reason = match_pairs(a_runs, b_runs)
    rng = statistic_rng(seed, "paired", env, a, b)
    nan = math.nan
    if len(pairs) >= 2:
        xa = _finals(p for p, _ in pairs)
        xb = _finals(q for _, q in pairs)
        point, low, high = stats.paired_bootstrap_ci(
            xa, xb, stats.mean, reps=reps, confidence=CONFIDENCE, seed=rng
        )
        unmatched = len(a_runs) + len(b_runs) - 2 * len(pairs)
        note = f"{unmatched} run(s) without a partner left out" if unmatched else ""
        p = stats.wilcoxon_signed_rank(stats.paired_differences(xa, xb))
        r = stats.correlation(xa, xb)
        return Comparison(
            env, a, b, True, len(a_runs), len(b_runs), len(pairs), point, low, high, r, p, p, note
        )
    if len(pairs) == 1:
        reason = "only one pair"
    xa, xb = _finals(a_runs), _finals(b_runs)
    if min(xa.size, xb.size) >= 2:
        point, low, high = stats.unpaired_bootstrap_ci(
            xa, xb, stats.mean, reps=reps, confidence=CONFIDENCE, seed=rng
        )
    else:
        point, low, high = stats.mean(xa) - stats.mean(xb), nan, nan
    return Comparison(
        env, a, b, False, xa.size, xb.size, 0, point, low, high, nan, nan, nan, reason
    )


def paired_comparisons(
    runs: Sequence[Run], *, seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> list[Comparison]:
    """A - B for every pair of agents (A before B in name order) on every env both completed.

    Paired (bootstrap CI of the mean paired difference, Wilcoxon signed-rank p-value, pairing
    correlation) when at least two pairs match (:func:`match_pairs`), otherwise an unpaired
    bootstrap CI of the difference of means. The p-values are Holm-adjusted over every paired
    test in the list (the family).
    """
    agents = _agents(runs)
    out: list[Comparison] = []
    for env in _envs(runs):
        for i, a in enumerate(agents):
            for b in agents[i + 1 :]:
                a_runs, b_runs = _completed(runs, a, env), _completed(runs, b, env)
                if a_runs and b_runs:
                    out.append(_compare(env, a, b, a_runs, b_runs, seed, reps))
    tested = [i for i, c in enumerate(out) if c.paired]
    adjusted = stats.holm([out[i].p_value for i in tested])
    for i, p in zip(tested, adjusted, strict=True):
        out[i] = dataclasses.replace(out[i], p_holm=float(p))
    return out


# --------------------------------------------------------------------------------------------
# Tidy table and learning curves


def tidy_table(runs: Sequence[Run], baselines: Mapping[str, tuple[float, float]]) -> pd.DataFrame:
    """One row per (job, evaluation step) of every run that logged evaluations.

    ``return`` is the mean evaluation return at ``step``; ``normalized_return`` uses the
    env's baselines (NaN without them); ``wall_time`` is seconds since the job started.
    """
    rows: list[dict[str, Any]] = []
    for run in sorted(runs, key=lambda r: (r.agent, r.env, *_run_order(r))):
        low_high = baselines.get(run.env)
        for m in read_metrics(run.path):
            value = m.get("eval_return_mean", math.nan)
            rows.append(
                {
                    "sweep": str(run.sweep),
                    "job": run.job,
                    "agent": run.agent,
                    "env": run.env,
                    "replicate": run.replicate,
                    "root": run.root,
                    "common_random_numbers": run.common_random_numbers,
                    "seed_fingerprint": run.seed_fingerprint,
                    "status": run.status,
                    "step": int(m["step"]),
                    "return": value,
                    "return_std": m.get("eval_return_std", math.nan),
                    "normalized_return": (
                        math.nan
                        if low_high is None
                        else (value - low_high[0]) / (low_high[1] - low_high[0])
                    ),
                    "wall_time": m.get("wall_time", math.nan),
                }
            )
    frame = pd.DataFrame(rows, columns=list(TIDY_COLUMNS))
    return frame.astype(
        {
            "sweep": "str",
            "job": "str",
            "agent": "str",
            "env": "str",
            "replicate": "Int64",
            "root": "Int64",
            "common_random_numbers": "boolean",
            "seed_fingerprint": "str",
            "status": "str",
            "step": "int64",
            "return": "float64",
            "return_std": "float64",
            "normalized_return": "float64",
            "wall_time": "float64",
        }
    )


def learning_curve_data(
    tidy: pd.DataFrame,
) -> dict[str, dict[str, list[tuple[FloatArray, FloatArray]]]]:
    """env -> agent -> one (steps, evaluation return) pair per completed run, names sorted."""
    done = tidy[tidy["status"] == "completed"]
    curves: dict[str, dict[str, list[tuple[FloatArray, FloatArray]]]] = {}
    for env in sorted(done["env"].unique()):
        by_env = done[done["env"] == env]
        curves[env] = {}
        for agent in sorted(by_env["agent"].unique()):
            by_agent = by_env[by_env["agent"] == agent]
            curves[env][agent] = [
                (
                    job_rows["step"].to_numpy(dtype=np.float64),
                    job_rows["return"].to_numpy(dtype=np.float64),
                )
                for _, job_rows in by_agent.groupby(["sweep", "job"], sort=True)
            ]
    return curves


# --------------------------------------------------------------------------------------------
# Markdown


def fmt_num(x: float, digits: int = 2) -> str:
    if math.isnan(x):
        return "–"
    text = f"{x:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


def fmt_interval(low: float, high: float, digits: int = 2) -> str:
    if math.isnan(low) or math.isnan(high):
        return "–"
    return f"[{fmt_num(low, digits)}, {fmt_num(high, digits)}]"


def _pvalue(p: float) -> str:
    if math.isnan(p):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table, padded so it also reads well as plain text."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cols: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)) + " |"

    return [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)]


def _cells_section(cells: Sequence[CellStats]) -> list[str]:
    rows = [
        [
            c.agent,
            c.env,
            str(c.completed),
            str(c.failed),
            str(c.incomplete),
            str(c.missing),
            fmt_num(c.mean),
            fmt_interval(*c.mean_ci),
            fmt_num(c.median),
            fmt_num(c.iqm),
            fmt_interval(*c.iqm_ci),
            fmt_num(c.std),
        ]
        for c in cells
    ]
    header = ["agent", "env", "n", "failed", "incomplete", "missing", "mean", "mean 95% CI",
              "median", "IQM", "IQM 95% CI", "std"]  # fmt: skip
    return [
        "## Final return per agent and environment",
        "",
        "Final evaluation return of each completed run (the mean over its final evaluation "
        "episodes). n counts completed runs only; failed, incomplete and missing runs are "
        "counted apart and listed at the end. IQM: mean of the middle 50% of runs. std: sample "
        "standard deviation. CIs: percentile bootstrap over runs (none with fewer than 2 runs).",
        "",
        *(markdown_table(header, rows) if rows else ["No (agent, env) cell."]),
    ]


def _aggregate_section(
    baselines: Mapping[str, tuple[float, float]],
    reasons: Mapping[str, str],
    matrices: ScoreMatrices,
    aggregates: Sequence[AggregateStats],
    improvements: Sequence[ImprovementStats],
    plot_names: Mapping[str, str],
) -> list[str]:
    out = [
        "## Across environments (normalised scores)",
        "",
        "Each final return is normalised per env as (return − random) / (reference − random), "
        "with the random and reference scores of the env's config: 0 is a random policy, 1 "
        "the reference.",
        "",
    ]
    base_rows = [[env, fmt_num(lo), fmt_num(hi), "yes" if env in matrices.envs else "no"]
                 for env, (lo, hi) in sorted(baselines.items())]  # fmt: skip
    base_rows += [[env, "–", "–", f"no: {why}"] for env, why in sorted(reasons.items())]
    out += markdown_table(["env", "random", "reference", "in the aggregate"], sorted(base_rows))
    out += [""] + [f"- {note}" for note in matrices.notes] + ([""] if matrices.notes else [])
    if not aggregates:
        return [*out, "No aggregate: no env has baselines and a completed run of every agent."]
    rows = [
        [a.agent, f"{a.runs} x {a.envs}"]
        + [f"{fmt_num(v[0], 3)} {fmt_interval(v[1], v[2], 3)}" for v in a.values.values()]
        for a in aggregates
    ]
    out += [
        f"Aggregates over {len(matrices.envs)} env(s) ({', '.join(matrices.envs)}), each with "
        "its 95% stratified bootstrap CI (runs resampled within each env). Optimality gap: "
        "mean of max(1 − score, 0), lower is better.",
        "",
        *markdown_table(["agent", "runs x envs", *AGGREGATES], rows),
        "",
        f"![performance profiles]({plot_names['profiles']})",
        "",
        "Performance profile: the fraction of runs (over all envs) whose normalised score "
        "exceeds τ, with pointwise 95% CI bands; a curve above another is better everywhere.",
    ]
    if improvements:
        rows = [[f"P({p.x} > {p.y})", fmt_num(p.point, 3), fmt_interval(p.low, p.high, 3)]
                for p in improvements]  # fmt: skip
        out += [
            "",
            "### Probability of improvement",
            "",
            "P(X > Y): the probability that a run of X scores higher than a run of Y on an env "
            "drawn at random (Mann–Whitney, ties count one half), averaged over envs. 0.5 means "
            "no difference; a CI that excludes 0.5 is a difference the data support.",
            "",
            *markdown_table(["comparison", "estimate", "95% CI"], rows),
            "",
            f"![probability of improvement]({plot_names['improvement']})",
        ]
    return out


def _paired_section(comparisons: Sequence[Comparison]) -> list[str]:
    out = [
        "## Paired comparisons",
        "",
        "A − B: difference of mean final returns on each env. Under common random numbers (the "
        "default seeding), replicate r of A and replicate r of B saw the same environment "
        "seeds; runs pair when both seeds.json say common_random_numbers is true and their "
        "root and replicate match. Paired rows give the bootstrap CI of the mean paired "
        "difference, the two-sided Wilcoxon signed-rank p-value, that p-value Holm-adjusted "
        "over every paired test in this table (family-wise error control across agents and "
        "envs), and the correlation r between paired returns (the higher, the more pairing "
        "sharpens the comparison). Unpaired rows fall back to independent bootstrap CIs.",
        "",
    ]
    if not comparisons:
        return [*out, "No comparison: fewer than two agents with completed runs on a shared env."]
    n_tests = sum(c.paired for c in comparisons)
    rows = [
        [
            c.env,
            f"{c.a} − {c.b}",
            "paired" if c.paired else "unpaired",
            str(c.n_pairs) if c.paired else f"{c.n_a} / {c.n_b}",
            fmt_num(c.difference),
            fmt_interval(c.low, c.high),
            _pvalue(c.p_value),
            _pvalue(c.p_holm),
            fmt_num(c.correlation),
        ]
        for c in comparisons
    ]
    header = ["env", "A − B", "runs", "n", "difference", "95% CI", "Wilcoxon p",
              f"Holm p ({n_tests} tests)", "r"]  # fmt: skip
    out += markdown_table(header, rows)
    notes = [
        f"- {c.env}, {c.a} − {c.b}: "
        + (c.note if c.paired else f"not paired ({c.note}): unpaired CI, no test.")
        for c in comparisons
        if c.note
    ]
    return out + (["", *notes] if notes else [])


def _where(path: Path, out_dir: Path) -> str:
    """``path`` relative to the report's directory (as Markdown links resolve it)."""
    return Path(os.path.relpath(path, out_dir)).as_posix()


def _jobs_section(
    runs: Sequence[Run],
    superseded: Sequence[Run],
    missing: Sequence[tuple[str, str, int]],
    out_dir: Path,
) -> list[str]:
    out = ["## Failed, incomplete and missing jobs", ""]
    failed = [r for r in runs if r.status == "failed"]
    incomplete = [r for r in runs if r.status == "incomplete"]
    if not (failed or incomplete or missing or superseded):
        return [*out, "None: every job of the grid completed."]
    for title, group in (
        ("Failed (the traceback is in the job's error.txt)", failed),
        ("Incomplete (started, no result.json: killed or still running)", incomplete),
    ):
        if group:
            out += [f"{title}:", ""]
            out += [
                f"- {r.agent} on {r.env}, replicate {r.replicate}"
                + (f": {r.error}" if r.error else "")
                + f" (`{_where(r.path, out_dir)}`)"
                for r in sorted(group, key=lambda r: (r.agent, r.env, *_run_order(r)))
            ]
            out.append("")
    if missing:
        out += [
            "Missing (no job directory; the grid is every agent x env x replicate index seen):",
            "",
            *(f"- {a} on {e}, replicate {k}" for a, e, k in missing),
            "",
        ]
    if superseded:
        out += [
            "Counted once (the same agent, env, root and replicate found again; the completed "
            "or first one is used), not counted:",
            "",
            *(f"- `{_where(r.path, out_dir)}` ({r.status})" for r in superseded),
            "",
        ]
    return out[:-1] if out[-1] == "" else out


@dataclass(frozen=True)
class _Content:
    """Everything the Markdown shows."""

    sweeps: tuple[Path, ...]
    runs: tuple[Run, ...]
    superseded: tuple[Run, ...]
    missing: tuple[tuple[str, str, int], ...]
    cells: tuple[CellStats, ...]
    baselines: dict[str, tuple[float, float]]
    reasons: dict[str, str]
    matrices: ScoreMatrices
    aggregates: tuple[AggregateStats, ...]
    improvements: tuple[ImprovementStats, ...]
    comparisons: tuple[Comparison, ...]
    plot_names: dict[str, str]  # plots written, by role
    out_dir: Path
    seed: int
    reps: int


def render_report(content: _Content) -> str:
    """The Markdown text of the report (a pure function of its content)."""
    counts = {s: sum(r.status == s for r in content.runs) for s in STATUSES}
    sweeps = ", ".join(f"`{s}`" for s in content.sweeps)
    parts = [
        "# Sweep report",
        "",
        f"Sweep director{'y' if len(content.sweeps) == 1 else 'ies'}: {sweeps}.",
        "",
        f"{len(content.runs)} jobs: {counts['completed']} completed, {counts['failed']} failed, "
        f"{counts['incomplete']} incomplete; {len(content.missing)} missing from the grid "
        f"({len(_cells(content.runs))} agent-env cells x "
        f"{len({r.replicate for r in content.runs if r.replicate is not None})} replicates). "
        "All CIs are "
        f"95% percentile bootstrap intervals ({content.reps} resamples; numpy Generators "
        f"seeded from seed {content.seed} and the statistic's name, so this file is "
        "reproducible byte for byte). With few runs per cell (under about 10) percentile "
        "bootstrap intervals are too narrow: read them as rough.",
        "",
        *_cells_section(content.cells),
        "",
        *_aggregate_section(
            content.baselines,
            content.reasons,
            content.matrices,
            content.aggregates,
            content.improvements,
            content.plot_names,
        ),
        "",
        *_paired_section(content.comparisons),
        "",
        "## Learning curves",
        "",
    ]
    if "curves" in content.plot_names:
        parts += [
            "IQM of the evaluation return over completed runs against environment steps, with "
            "a pointwise 95% bootstrap CI band; one panel per env, one colour per agent.",
            "",
            f"![learning curves]({content.plot_names['curves']})",
        ]
    else:
        parts.append("No completed run logged evaluations.")
    parts += [
        "",
        *_jobs_section(content.runs, content.superseded, content.missing, content.out_dir),
        "",
        "## Data",
        "",
        f"`{EVALUATIONS_PARQUET}` and `{EVALUATIONS_CSV}`: one row per (job, evaluation step), "
        f"columns {', '.join(TIDY_COLUMNS)}. Load with "
        f'`pd.read_parquet("{EVALUATIONS_PARQUET}")`.',
    ]
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------------------------
# Writing it all


@dataclass(frozen=True)
class Report:
    """What :func:`write_report` wrote, and the numbers behind it."""

    markdown: Path
    text: str
    csv: Path
    parquet: Path
    plots: tuple[Path, ...]
    runs: tuple[Run, ...]
    cells: tuple[CellStats, ...]
    aggregates: tuple[AggregateStats, ...]
    improvements: tuple[ImprovementStats, ...]
    comparisons: tuple[Comparison, ...]


def _write_plots(
    out_dir: Path,
    tidy: pd.DataFrame,
    matrices: ScoreMatrices,
    *,
    seed: int,
    reps: int,
) -> dict[str, str]:
    """Write the PNGs there is data for; their file names by role."""
    names: dict[str, str] = {}
    curves = learning_curve_data(tidy)
    if curves:
        plots.learning_curves(
            curves,
            out_dir / CURVES_PNG,
            title="Evaluation return: IQM over runs, 95% CI band",
            seed=_plot_seed(seed, "plot", "curves"),
            reps=reps,
        )
        names["curves"] = CURVES_PNG
    if matrices.scores:
        plots.performance_profile_plot(
            matrices.scores,
            out_dir / PROFILES_PNG,
            reps=reps,
            seed=_plot_seed(seed, "plot", "profiles"),
            title=f"Performance profiles over {len(matrices.envs)} env(s)",
        )
        names["profiles"] = PROFILES_PNG
    if len(matrices.scores) >= 2:
        plots.probability_of_improvement_plot(
            matrices.scores,
            out_dir / IMPROVEMENT_PNG,
            reps=reps,
            seed=_plot_seed(seed, "plot", "improvement"),
            title="Probability of improvement (95% CI)",
        )
        names["improvement"] = IMPROVEMENT_PNG
    return names


def write_report(
    sweep_dirs: list[Path],
    out_dir: Path | None = None,
    *,
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
    metric: str | None = None,
    replicate_key: str | None = None,
) -> Report:
    """Write report.md, the plots and the tidy table of ``sweep_dirs`` into ``out_dir``.

    ``out_dir`` defaults to the first sweep directory. Raises ValueError when there are no
    sweep directories or no job directory in them. A sweep of another app than rlsweep's
    own agents gets the report of :mod:`rlsweep.app_report` (grouped by its swept keys,
    on ``metric``; ``replicate_key`` names its replicate index if not ``seed``).
    """
    if not sweep_dirs:
        raise ValueError("no sweep directory given")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    sweeps = _unique_dirs(sweep_dirs)
    for d in sweeps:
        if not d.is_dir():
            raise ValueError(f"{d} is not a directory")
    from rlsweep.runs import is_app_sweep

    if is_app_sweep(sweeps):
        from rlsweep.app_report import write_app_report

        return write_app_report(
            sweeps, out_dir, metric=metric, seed=seed, reps=reps, replicate_key=replicate_key
        )
    if metric not in (None, "final_return"):
        raise ValueError(
            f"--metric {metric}: the report of rlsweep's own agents is on their final_return"
        )
    runs, superseded = deduplicate(load_runs(sweeps))
    if not runs:
        raise ValueError(f"no job directory in {', '.join(str(d) for d in sweeps)}")
    target = (out_dir if out_dir is not None else sweeps[0]).resolve()
    target.mkdir(parents=True, exist_ok=True)

    missing = missing_runs(runs)
    baselines, reasons = env_baselines(runs)
    matrices = normalized_scores(runs, baselines)
    tidy = tidy_table(runs, baselines)
    content = _Content(
        sweeps=tuple(sweeps),
        runs=tuple(runs),
        superseded=tuple(superseded),
        missing=tuple(missing),
        cells=tuple(cell_stats(runs, missing, seed=seed, reps=reps)),
        baselines=baselines,
        reasons=reasons,
        matrices=matrices,
        aggregates=tuple(aggregate_stats(matrices, seed=seed, reps=reps)),
        improvements=tuple(improvement_stats(matrices, seed=seed, reps=reps)),
        comparisons=tuple(paired_comparisons(runs, seed=seed, reps=reps)),
        plot_names=_write_plots(target, tidy, matrices, seed=seed, reps=reps),
        out_dir=target,
        seed=seed,
        reps=reps,
    )
    text = render_report(content)
    tidy.to_csv(target / EVALUATIONS_CSV, index=False)
    tidy.to_parquet(target / EVALUATIONS_PARQUET, index=False)
    atomic_write_text(target / REPORT_MD, text)
    return Report(
        markdown=target / REPORT_MD,
        text=text,
        csv=target / EVALUATIONS_CSV,
        parquet=target / EVALUATIONS_PARQUET,
        plots=tuple(target / name for name in content.plot_names.values()),
        runs=content.runs,
        cells=content.cells,
        aggregates=content.aggregates,
        improvements=content.improvements,
        comparisons=content.comparisons,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m rlsweep.report SWEEP_DIR [SWEEP_DIR ...] [--out DIR] [--seed N]
    [--metric NAME] [--replicate-key KEY]``."""
    parser = argparse.ArgumentParser(
        prog="python -m rlsweep.report",
        description="Write report.md, plots and a tidy table of evaluations for RL sweeps "
        "(rlsweep's agents, or any Hydra app run by rlsweep: grouped by its swept keys).",
    )
    parser.add_argument("sweep_dirs", nargs="+", type=Path, metavar="SWEEP_DIR")
    parser.add_argument(
        "--out", type=Path, default=None, help="output directory (default: the first SWEEP_DIR)"
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    parser.add_argument(
        "--metric",
        default=None,
        help="any app's sweep: the returned value to compute the statistics on (default: "
        "`return`, else the only number returned, else the first in sorted order)",
    )
    parser.add_argument(
        "--replicate-key",
        default=None,
        help="any app's sweep: the config key of the replicate index (default: seed)",
    )
    args = parser.parse_args(argv)
    try:
        report = write_report(
            args.sweep_dirs,
            args.out,
            seed=args.seed,
            metric=args.metric,
            replicate_key=args.replicate_key,
        )
    except ValueError as exc:
        print(f"rlsweep.report: {exc}", file=sys.stderr)
        return 2
    print(f"Report: {report.markdown}")
    print(f"Tidy table: {report.parquet} and {report.csv.name}")
    for path in report.plots:
        print(f"Plot: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
