"""The tidy table of evaluations (one row per job and logged step), and the learning curves.

A :class:`Table` is plain columns with a pandas dtype name each: ``evaluations.csv`` is written
and ``evaluations.parquet`` from it without pandas (:mod:`rlsweep.report.files`), as
``pd.DataFrame(table.columns).astype(table.dtypes)`` would write them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlsweep.report.app_runs import AppRun, AppSweep, show
from rlsweep.report.runs import Run, run_order
from rlsweep.stats import FloatArray
from rlsweep.store import read_metrics

__all__ = [
    "TIDY_COLUMNS",
    "Table",
    "app_curve_data",
    "learning_curve_data",
    "tidy_app_table",
    "tidy_table",
]

Curve = tuple[FloatArray, FloatArray]  # (steps, values) of one run

# The built-in report's columns and their dtypes.
TIDY_DTYPES = {
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
TIDY_COLUMNS = tuple(TIDY_DTYPES)
# Any app's first columns; then its group keys, its step and its metrics.csv columns.
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


def tidy_table(runs: Sequence[Run], baselines: Mapping[str, tuple[float, float]]) -> Table:
    """One row per (job, evaluation step) of every run that logged evaluations.

    ``return`` is the mean evaluation return at ``step``; ``normalized_return`` uses the
    env's baselines (NaN without them); ``wall_time`` is seconds since the job started.
    """
    columns: dict[str, list[Any]] = {name: [] for name in TIDY_COLUMNS}
    for run in sorted(runs, key=lambda r: (r.agent, r.env, *run_order(r))):
        low_high = baselines.get(run.env)
        for m in read_metrics(run.path):
            value = m.get("eval_return_mean", math.nan)
            row = {
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
            for name, cell in row.items():
                columns[name].append(cell)
    return Table(columns, dict(TIDY_DTYPES))


def learning_curve_data(table: Table) -> dict[str, dict[str, list[Curve]]]:
    """env -> agent -> one (steps, evaluation return) pair per completed run, names sorted
    and each agent's runs by (sweep, job)."""
    c = table.columns
    runs: dict[tuple[str, str], dict[tuple[str, str], list[int]]] = {}
    for i, status in enumerate(c["status"]):
        if status == "completed":
            by_job = runs.setdefault((c["env"][i], c["agent"][i]), {})
            by_job.setdefault((c["sweep"][i], c["job"][i]), []).append(i)
    curves: dict[str, dict[str, list[Curve]]] = {}
    for (env, agent), by_job in sorted(runs.items()):
        curves.setdefault(env, {})[agent] = [
            (
                np.array([c["step"][i] for i in rows], dtype=np.float64),
                np.array([c["return"][i] for i in rows], dtype=np.float64),
            )
            for _, rows in sorted(by_job.items())
        ]
    return curves


def app_curve_data(runs: Sequence[AppRun], metric: str) -> dict[str, list[Curve]]:
    """group -> one (steps, values) pair per completed run that logged ``metric``."""
    curves: dict[str, list[Curve]] = {}
    ordered = sorted(
        runs, key=lambda r: (r.group, r.root or 0, r.replicate or 0, str(r.sweep), r.job)
    )
    for run in ordered:
        if run.status != "completed":
            continue
        by_step: dict[float, float] = {}
        for row in read_metrics(run.path):
            step, value = row.get("step", math.nan), row.get(metric, math.nan)
            if math.isfinite(step) and math.isfinite(value):
                by_step[step] = value  # a step logged twice: its last value
        if by_step:
            steps = sorted(by_step)
            curves.setdefault(run.group, []).append(
                (np.array(steps, dtype=np.float64), np.array([by_step[s] for s in steps]))
            )
    return dict(sorted(curves.items()))


# --------------------------------------------------------------------------------------------
# Any app's table


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


def tidy_app_table(sweep: AppSweep, runs: Sequence[AppRun] | None = None) -> Table:
    """One row per (job, row of its metrics.csv): sweep, job, group, status, replicate, the
    group keys, step and every metrics column (a name taken already gets a prefix)."""
    chosen = sweep.runs if runs is None else runs
    taken = set(FIXED_COLUMNS)
    key_columns = {k: _column_name(k, taken, "config.") for k in sweep.group_keys}
    step_column = _column_name("step", taken, "_")
    per_job = [(r, read_metrics(r.path)) for r in chosen]
    metric_names = list(dict.fromkeys(k for _, rows in per_job for row in rows for k in row))
    metric_columns = {m: _column_name(m, taken, "metric.") for m in metric_names if m != "step"}
    names = [*FIXED_COLUMNS, *key_columns.values(), step_column, *metric_columns.values()]
    records: dict[str, list[Any]] = {c: [] for c in names}
    for run, rows in per_job:
        for row in rows:
            step = row.get("step", math.nan)
            if not math.isfinite(step):
                continue
            fixed = (str(run.sweep), run.job, run.group, run.status, run.replicate)
            for column, cell in zip(FIXED_COLUMNS, fixed, strict=True):
                records[column].append(cell)
            for key, column in key_columns.items():
                records[column].append(run.keys.get(key))
            records[step_column].append(int(step) if float(step).is_integer() else step)
            for name, column in metric_columns.items():
                records[column].append(row.get(name, math.nan))
    dtypes: dict[str, str] = {c: "str" for c in ("sweep", "job", "group", "status")}
    dtypes["replicate"] = "Int64"
    for column in key_columns.values():
        records[column], dtypes[column] = _typed(records[column])
    steps = records[step_column]
    dtypes[step_column] = "int64" if all(isinstance(s, int) for s in steps) else "float64"
    dtypes.update({c: "float64" for c in metric_columns.values()})
    return Table(records, dtypes)
