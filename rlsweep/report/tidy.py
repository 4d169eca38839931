"""The tidy table of what the jobs logged: one row per job and logged step, from the series
each job logged (:mod:`rlsweep.series`).

A :class:`Table` is plain columns with a pandas dtype name each: ``evaluations.csv`` is written
and ``evaluations.parquet`` from it without pandas (:mod:`rlsweep.report.files`), as
``pd.DataFrame(table.columns).astype(table.dtypes)`` would write them. Its first columns say
which job a row is of (sweep, job, group, status, replicate, and any app's group keys); then
the step and the series. rlsweep's own agents name theirs as their report reads them (the
evaluation return, its normalised score, the wall time), any other app's keep the names it
logged them by.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlsweep import stats
from rlsweep.report.jobfiles import show
from rlsweep.report.runs import Run, Sweep, run_order
from rlsweep.store import METRICS_FILE

__all__ = ["AGENT_COLUMNS", "Table", "curve_data", "tidy_table"]

# rlsweep's own agents: the columns and their dtypes.
AGENT_DTYPES = {
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
AGENT_COLUMNS = tuple(AGENT_DTYPES)
# Their series, by column.
AGENT_SERIES = {"return": "eval_return_mean", "return_std": "eval_return_std",
                "wall_time": "wall_time"}  # fmt: skip
# Any app's first columns; then its group keys, its step and its series.
FIXED_COLUMNS = ("sweep", "job", "group", "status", "replicate")


@dataclass(frozen=True)
class Table:
    """Named columns of equal length, in order, and the pandas dtype of each (``str``,
    ``object``, ``Int64``, ``boolean``, ``int64``, ``float64``); None and NaN are missing."""

    columns: dict[str, list[Any]]
    dtypes: dict[str, str]

    @property
    def names(self) -> list[str]:
        return list(self.columns)


def _logged(run: Run, source: str | None = None) -> tuple[list[float], dict[str, list[float]]]:
    """A run's logged steps (the union of its series', or of those read from ``source``),
    and each of those series at them (NaN where it has no value)."""
    chosen = {n: s for n, s in run.series.items() if source is None or s.source == source}
    steps = sorted({float(s) for series in chosen.values() for s in series.steps})
    at = {s: i for i, s in enumerate(steps)}
    out: dict[str, list[float]] = {}
    for name, series in chosen.items():
        column = [math.nan] * len(steps)
        for s, v in zip(series.steps.tolist(), series.values.tolist(), strict=True):
            column[at[s]] = v
        out[name] = column
    return steps, out


Fixed = Sequence[tuple[str, Callable[[Run], Any]]]  # a column, and its cell of a run


def _rows(
    runs: Sequence[Run], fixed: Fixed, step: str, series: Mapping[str, str], source: str | None
) -> dict[str, list[Any]]:
    """One row per (run, logged step): the ``fixed`` columns, the step (an int when it is
    one), and each series by its column (NaN where it has no value at that step)."""
    records: dict[str, list[Any]] = {c: [] for c in [*(c for c, _ in fixed), step, *series]}
    for run in runs:
        steps, logged = _logged(run, source)
        cells = [(column, cell(run)) for column, cell in fixed]
        for i, at in enumerate(steps):
            for column, value in cells:
                records[column].append(value)
            records[step].append(int(at) if float(at).is_integer() else at)
            for column, name in series.items():
                records[column].append(logged[name][i] if name in logged else math.nan)
    return records


def _fixed(first: Sequence[str]) -> list[tuple[str, Callable[[Run], Any]]]:
    """The columns that say which job a row is of, named ``first``: the sweep, the job,
    the group and (rlsweep's agents) the task, then the status and the replicate."""
    cells: dict[str, Callable[[Run], Any]] = {
        "sweep": lambda r: str(r.sweep), "job": lambda r: r.job, "group": lambda r: r.group,
        "agent": lambda r: r.group, "env": lambda r: r.task, "status": lambda r: r.status,
        "replicate": lambda r: r.replicate, "root": lambda r: r.root,
        "common_random_numbers": lambda r: r.common_random_numbers,
        "seed_fingerprint": lambda r: r.seed_fingerprint,
    }  # fmt: skip
    return [(name, cells[name]) for name in first]


def _agents_rows(runs: Sequence[Run], baselines: Mapping[str, tuple[float, float]]) -> Table:
    """rlsweep's agents: their metrics.csv alone (a tracker's mirror adds no row), the return
    normalised by its env's baselines (NaN without them)."""
    ordered = sorted(runs, key=lambda r: (r.group, r.task, *run_order(r)))
    fixed = _fixed(AGENT_COLUMNS[: AGENT_COLUMNS.index("step")])
    records = _rows(ordered, fixed, "step", AGENT_SERIES, METRICS_FILE)
    records["normalized_return"] = [
        math.nan if env not in baselines else stats.normalize_scores([x], *baselines[env])[0]
        for env, x in zip(records["env"], records["return"], strict=True)
    ]
    return Table({c: records[c] for c in AGENT_COLUMNS}, dict(AGENT_DTYPES))


def _column_name(name: str, taken: set[str], prefix: str) -> str:
    out = name if name not in taken else f"{prefix}{name}"
    while out in taken:
        out = f"{prefix}{out}"
    taken.add(out)
    return out


def _typed(values: Sequence[Any]) -> tuple[list[Any], str]:
    """A column of config values, and its pandas dtype (values of mixed types as text)."""
    known = [v for v in values if v is not None]
    if known and all(isinstance(v, bool) for v in known):
        return list(values), "boolean"
    if known and all(isinstance(v, int) and not isinstance(v, bool) for v in known):
        return list(values), "Int64"
    if known and all(isinstance(v, int | float) and not isinstance(v, bool) for v in known):
        return [math.nan if v is None else float(v) for v in values], "float64"
    return [None if v is None else show(v) for v in values], "object"


def _app_table(sweep: Sweep, runs: Sequence[Run]) -> Table:
    """One row per (job, logged step): sweep, job, group, status, replicate, the group keys,
    step and every series (a name taken already gets a prefix)."""
    taken = set(FIXED_COLUMNS)
    key_columns = {k: _column_name(k, taken, "config.") for k in sweep.group_keys}
    step_column = _column_name("step", taken, "_")
    names = list(dict.fromkeys(name for r in runs for name in r.series))
    series_columns = {_column_name(m, taken, "metric."): m for m in names}
    fixed = _fixed(FIXED_COLUMNS)
    fixed += [(column, _key_cell(key)) for key, column in key_columns.items()]
    records = _rows(runs, fixed, step_column, series_columns, None)
    dtypes: dict[str, str] = {c: "str" for c in ("sweep", "job", "group", "status")}
    dtypes["replicate"] = "Int64"
    for column in key_columns.values():
        records[column], dtypes[column] = _typed(records[column])
    steps_all = records[step_column]
    dtypes[step_column] = "int64" if all(isinstance(s, int) for s in steps_all) else "float64"
    dtypes.update({c: "float64" for c in series_columns})
    return Table(records, dtypes)


def _key_cell(key: str) -> Callable[[Run], Any]:
    return lambda r: r.keys.get(key)


def tidy_table(
    sweep: Sweep, runs: Sequence[Run], baselines: Mapping[str, tuple[float, float]]
) -> Table:
    """The table of the (deduplicated) ``runs``; rlsweep's agents' scores normalised by
    ``baselines`` (NaN without them)."""
    return _agents_rows(runs, baselines) if sweep.built_in else _app_table(sweep, runs)


def _curve_order(built_in: bool) -> Any:
    """The order of a group's runs in its curves (its bootstrap resamples them by index):
    rlsweep's agents' by (sweep, job), any app's by (root, replicate, sweep, job)."""
    if built_in:
        return lambda r: (str(r.sweep), r.job)
    return lambda r: (r.root or 0, r.replicate or 0, str(r.sweep), r.job)


def curve_data(
    runs: Sequence[Run], series: str, groups: Sequence[str], *, built_in: bool
) -> dict[str, dict[str, list[Any]]]:
    """task -> group -> one (steps, values) pair per completed run that logged ``series``:
    tasks sorted, then ``groups`` in their order (others left out)."""
    chosen = {g: i for i, g in enumerate(groups)}
    found: dict[tuple[str, str], list[Any]] = {}
    for run in sorted(runs, key=_curve_order(built_in)):
        logged = run.series.get(series)
        if run.status == "completed" and logged is not None and run.group in chosen:
            pair = (np.asarray(logged.steps), np.asarray(logged.values))
            found.setdefault((run.task, run.group), []).append(pair)
    curves: dict[str, dict[str, list[Any]]] = {}
    for task, group in sorted(found, key=lambda tg: (tg[0], chosen[tg[1]])):
        curves.setdefault(task, {})[group] = found[(task, group)]
    return curves
