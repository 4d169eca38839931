"""The runs table: one :class:`Run` per job directory, the one data contract of every report.

Every sweep reads into it the same way (:mod:`rlsweep.report.read`): a run is a job with its
status, its *group* (the values of the keys the sweep varies, other than the replicate and
the root: ``algo=a,lr=0.1``; for rlsweep's own agents, the agent), its *task* (the
environment of rlsweep's own agents; one task for any other app), its replicate and root,
the numbers its task returned and the series it logged (:mod:`rlsweep.series`). Everything
after this table is a pure function of it and of the metric chosen
(:mod:`rlsweep.report.metrics`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlsweep.code import code_text
from rlsweep.series import Series
from rlsweep.stats import FloatArray
from rlsweep.store import RECORD_KEY

__all__ = [
    "STATUSES",
    "UNKNOWN",
    "Run",
    "Sweep",
    "cells_of",
    "code_of",
    "completed_runs",
    "deduplicate",
    "fresh_entropy",
    "groups_of",
    "log_problems",
    "missing_dirs",
    "missing_runs",
    "mixed_code",
    "mixed_numerics",
    "numerics_of",
    "run_order",
    "tasks_of",
    "values_of",
]

# damaged: its result.json cannot be read; unverified: it is not rlsweep's record of the job
# (rlsweep.store.read_job). Neither is counted.
STATUSES = ("completed", "failed", "incomplete", "damaged", "unverified")
UNKNOWN = "?"
_RANK = {status: rank for rank, status in enumerate(STATUSES)}


@dataclass(frozen=True)
class Run:
    """One job directory, as every report sees it."""

    sweep: Path
    path: Path
    status: str  # one of STATUSES
    group: str  # label: "algo=a,lr=0.1"; rlsweep's agents: the agent ("ppo[lr=0.1]")
    task: str  # rlsweep's agents: the env id; any other app: "" (one task)
    replicate: int | None
    root: int | None
    common_random_numbers: bool | None  # from seeds.json or the recorded identity
    error: str | None  # the last line of error.txt
    # How groups sort: their key values, numbers as numbers (x=2 before x=10).
    order: tuple[Any, ...] = ()
    keys: Mapping[str, Any] = field(default_factory=dict)  # group key -> value
    shared: str | None = None  # the identity's shared values and root: equal => same seeds
    seed_fingerprint: str | None = None  # short SHA-256 of every concrete seed in seeds.json
    values: Mapping[str, float] = field(default_factory=dict)  # the numbers returned, by name
    baselines: tuple[float | None, float | None] = (None, None)  # env's random, reference
    # The digest of the numerics fingerprint the job ran under (rlsweep.numerics): equal =>
    # the same kernels; None: not recorded.
    numerics: str | None = None
    # The SHA-256 of the job's recorded identity (result.json): equal => the same job.
    identity: str | None = None
    # The digest of the app's code the job ran (rlsweep.code) and how a person reads it
    # (``git 1a2b3c4d5e6f``); None: not recorded.
    code: str | None = None
    code_text: str | None = None
    # Sub-processes the job started fresh (spawn, forkserver: seeds.json), whose unseeded
    # randomness drew OS entropy: its numbers may differ run to run.
    fresh_subprocesses: int = 0
    # Why its result.json is not counted (damaged, unverified), naming the file; None: it is.
    problem: str | None = None
    series: Mapping[str, Series] = field(default_factory=dict, compare=False, repr=False)

    @property
    def job(self) -> str:
        return self.path.name

    def value(self, metric: str | None) -> float | None:
        """The run's value of ``metric``: the number it returned under that name, else the
        last value of the series it logged by that name; None when not finite or absent."""
        if metric is None or self.status != "completed":
            return None
        if metric in self.values:
            x = self.values[metric]
        elif metric in self.series:
            x = self.series[metric].last
        else:
            return None
        return x if math.isfinite(x) else None


@dataclass(frozen=True)
class Sweep:
    """Every job directory of one or several sweeps, grouped."""

    sweeps: tuple[Path, ...]
    runs: tuple[Run, ...]
    built_in: bool  # rlsweep's own agents: groups are agents, tasks are envs
    group_keys: tuple[str, ...]  # the swept keys other than the replicate and the root
    replicate_key: str | None  # None: the sweep has no replicate key (groups of one job)
    root_key: str | None  # a swept key that is the identity's root (None: not swept)
    replicate_from: str  # where the replicate key was read: "result.json", "sweep.json"...
    # The settings every job shares, as the sweep recorded them (sweep.json's "constant").
    constant: Mapping[str, str] = field(default_factory=dict)
    # The grid of each sweep that recorded it (sweep.json's "jobs"): its job directories'
    # names, by sweep directory.
    grids: Mapping[Path, tuple[str, ...]] = field(default_factory=dict)

    @property
    def grid_recorded(self) -> bool:
        """Whether every sweep recorded its grid (missing jobs are then known, not inferred)."""
        return all(sweep in self.grids for sweep in self.sweeps)


def unique_dirs(sweep_dirs: Sequence[Path]) -> list[Path]:
    """The sweep directories, resolved, each once, in the order given."""
    return list(dict.fromkeys(Path(d).resolve() for d in sweep_dirs))


def last_line(text: str | None) -> str | None:
    """The last line of an error.txt (None for none)."""
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else None


def _place(run: Run) -> tuple[Any, ...]:
    """Where a run counts: its (group, task, root, replicate), or its own directory."""
    if run.replicate is None or UNKNOWN in (run.group, run.task):
        return ("path", str(run.path))
    return (run.group, run.task, run.root, run.replicate)


def deduplicate(runs: Sequence[Run]) -> tuple[list[Run], list[Run], list[Run]]:
    """One run per (group, task, root, replicate): the first completed one, else the first.

    Returns (kept, superseded, unplaced). Superseded: the same job found again (the same
    identity, or, where a job recorded none, the same place: a failed attempt that a later
    sweep completed, the same job in two sweep directories), counted once. Unplaced:
    completed runs of *another* job (another recorded identity, e.g. other numerics) at a
    place a kept run holds, counted nowhere, and listed: never merged or dropped silently.
    """
    best: dict[tuple[Any, ...], Run] = {}
    for run in runs:
        key = _place(run)
        current = best.get(key)
        if current is None or _RANK[run.status] < _RANK[current.status]:
            best[key] = run
    kept_ids = {id(r) for r in best.values()}
    kept = [r for r in runs if id(r) in kept_ids]
    superseded: list[Run] = []
    unplaced: list[Run] = []
    for run in (r for r in runs if id(r) not in kept_ids):
        holder = best[_place(run)]
        other_job = None not in (run.identity, holder.identity) and run.identity != holder.identity
        (unplaced if other_job and run.status == "completed" else superseded).append(run)
    return kept, superseded, unplaced


def numerics_of(result: Mapping[str, Any] | None) -> str | None:
    """The digest of the numerics fingerprint a result.json recorded (None: none)."""
    meta = (result or {}).get(RECORD_KEY)
    numerics = meta.get("numerics") if isinstance(meta, dict) else None
    digest = numerics.get("digest") if isinstance(numerics, dict) else None
    return digest if isinstance(digest, str) else None


def code_of(result: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """The digest of the code a result.json recorded, and its text (None: none)."""
    meta = (result or {}).get(RECORD_KEY)
    code = meta.get("code") if isinstance(meta, dict) else None
    if not isinstance(code, dict) or not isinstance(code.get("digest"), str):
        return None, None
    return code["digest"], code_text(code)


def _mixed(runs: Iterable[Run], attribute: str) -> list[tuple[str, str, int]]:
    seen: dict[tuple[str, str], set[str]] = {}
    for run in runs:
        value = getattr(run, attribute)
        if run.status == "completed" and value is not None:
            seen.setdefault((run.group, run.task), set()).add(value)
    return [(g, t, len(fp)) for (g, t), fp in seen.items() if len(fp) > 1]


def fresh_entropy(runs: Iterable[Run]) -> list[tuple[str, str, int]]:
    """The cells with completed runs that started sub-processes fresh, as (group, task, how
    many such runs): their numbers may not be reproducible."""
    seen: dict[tuple[str, str], int] = {}
    for run in runs:
        if run.status == "completed" and run.fresh_subprocesses:
            seen[(run.group, run.task)] = seen.get((run.group, run.task), 0) + 1
    return [(g, t, n) for (g, t), n in seen.items()]


def mixed_numerics(runs: Iterable[Run]) -> list[tuple[str, str, int]]:
    """The cells whose completed runs ran under more than one numerics fingerprint, as
    (group, task, how many fingerprints): their numbers may come from different kernels."""
    return _mixed(runs, "numerics")


def mixed_code(runs: Iterable[Run]) -> list[tuple[str, str, int]]:
    """The cells whose completed runs ran more than one version of the app's code, as
    (group, task, how many versions): their numbers may come from different code."""
    return _mixed(runs, "code")


def groups_of(runs: Iterable[Run]) -> list[str]:
    """The groups, by their key values (numbers as numbers), then by label."""
    order = {r.group: r.order for r in runs if r.group != UNKNOWN}
    return sorted(order, key=lambda g: (order[g], g))


def tasks_of(runs: Iterable[Run]) -> list[str]:
    return sorted({r.task for r in runs if r.task != UNKNOWN})


def cells_of(runs: Sequence[Run]) -> list[tuple[str, str]]:
    """The (group, task) pairs with at least one job directory, in group then task order."""
    present = {(r.group, r.task) for r in runs}
    tasks = tasks_of(runs)
    return [(g, t) for g in groups_of(runs) for t in tasks if (g, t) in present]


def missing_runs(runs: Sequence[Run]) -> list[tuple[str, str, int]]:
    """(group, task, replicate) of the grid with no job directory at all.

    The grid is inferred: every (group, task) cell that has at least one job directory,
    times every replicate index seen in the sweeps. Cells are not crossed: a sweep of presets
    (each agent variant on its own env) is not a factorial grid, and its other combinations
    were never asked for.
    """
    replicates = sorted({r.replicate for r in runs if r.replicate is not None})
    present = {(r.group, r.task, r.replicate) for r in runs}
    return [
        (group, task, rep)
        for group, task in cells_of(runs)
        for rep in replicates
        if (group, task, rep) not in present
    ]


def missing_dirs(sweep: Sweep) -> list[Path]:
    """The job directories of the grids the sweeps recorded (sweep.json's "jobs") that
    hold no job: deleted, or never started."""
    present = {run.path for run in sweep.runs}
    return [
        directory / name
        for directory, names in sweep.grids.items()
        for name in names
        if directory / name not in present
    ]


def log_problems(runs: Iterable[Run]) -> list[tuple[Run, str]]:
    """Each damaged or cut log file of the runs, as (run, what was read of it)."""
    out = []
    for run in runs:
        out += [(run, text) for text in getattr(run.series, "problems", ())]
    return out


def run_order(run: Run) -> tuple[int, int, str, str]:
    """Runs of one cell in (root, replicate, sweep, job) order."""
    rep = -1 if run.replicate is None else run.replicate
    root = -1 if run.root is None else run.root
    return root, rep, str(run.sweep), run.job


def completed_runs(runs: Iterable[Run], group: str, task: str) -> list[Run]:
    """The completed runs of one cell, by (root, replicate, sweep, job)."""
    cell = [r for r in runs if r.group == group and r.task == task and r.status == "completed"]
    return sorted(cell, key=run_order)


def values_of(runs: Iterable[Run], metric: str | None) -> FloatArray:
    """The runs' finite values of ``metric`` (runs without one left out)."""
    values = [r.value(metric) for r in runs]
    return np.array([v for v in values if v is not None], dtype=float)


def by_cell(runs: Iterable[Run]) -> Mapping[tuple[str, str], list[Run]]:
    """Every cell's runs, each cell's in (root, replicate, sweep, job) order."""
    out: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        out.setdefault((run.group, run.task), []).append(run)
    return {cell: sorted(rs, key=run_order) for cell, rs in out.items()}
