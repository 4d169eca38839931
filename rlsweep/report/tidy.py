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
    ``object``, ``Int64``, ``boolean``, ``int64``, ``float64``); None and NaN are missing.

    Each column is a one-dimensional numpy array: ``float64`` columns of float64 (NaN
    missing), ``int64`` of int64, the others of Python objects (None missing); :meth:`of`
    converts sequences. Cells that repeat along a job's rows (its sweep, job, group, ...)
    are one shared object each, so a table of millions of rows costs a pointer a cell."""

    columns: dict[str, np.ndarray]
    dtypes: dict[str, str]

    @classmethod
    def of(
        cls, columns: Mapping[str, Sequence[Any] | np.ndarray], dtypes: Mapping[str, str]
    ) -> Table:
        """The table of ``columns`` (sequences or arrays), each converted as its dtype says."""
        return cls({n: _as_column(v, dtypes[n]) for n, v in columns.items()}, dict(dtypes))

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


def _as_column(values: Sequence[Any] | np.ndarray, dtype: str) -> np.ndarray:
    """``values`` as the numpy array a :class:`Table` column of ``dtype`` is."""
    if dtype == "float64":
        if isinstance(values, np.ndarray) and values.dtype == np.float64:
            return values
        return np.fromiter((math.nan if v is None else v for v in values), np.float64, len(values))
    if dtype == "int64":
        return np.asarray(values, dtype=np.int64)
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    return np.fromiter(values, dtype=object, count=len(values))  # cells kept as they are


def _logged(run: Run, source: str | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A run's logged steps (the union of its series', or of those read from ``source``),
    and each of those series at them (NaN where it has no value)."""
    chosen = {n: s for n, s in run.series.items() if source is None or s.source == source}
    parts = [np.asarray(s.steps, dtype=np.float64) for s in chosen.values()]
    steps = np.unique(np.concatenate(parts)) if parts else np.zeros(0)
    out: dict[str, np.ndarray] = {}
    for name, series in chosen.items():
        column = np.full(steps.size, math.nan)
        own = np.asarray(series.steps, dtype=np.float64)
        # A step logged twice keeps its last value (a series' steps are unique already).
        column[np.searchsorted(steps, own)] = np.asarray(series.values, dtype=np.float64)
        out[name] = column
    return steps, out


Fixed = Sequence[tuple[str, Callable[[Run], Any]]]  # a column, and its cell of a run


def _repeated(cells: Sequence[Any], counts: np.ndarray) -> np.ndarray:
    """``cells[i]`` repeated ``counts[i]`` times, as one object array (shared cells)."""
    return np.repeat(np.fromiter(cells, dtype=object, count=len(cells)), counts)


def _steps_column(steps: np.ndarray, integer: bool) -> np.ndarray:
    """The step column: int64 when ``integer`` (every step whole), else float64."""
    return steps.astype(np.int64) if integer else steps


def _rows(
    runs: Sequence[Run], fixed: Fixed, step: str, series: Mapping[str, str], source: str | None
) -> tuple[dict[str, np.ndarray], bool]:
    """One row per (run, logged step): the ``fixed`` columns (object arrays), the step
    (float64), and each series by its column (NaN where it has no value at that step); and
    whether every step is a whole number."""
    logged = [_logged(run, source) for run in runs]
    counts = np.array([steps.size for steps, _ in logged], dtype=np.int64)
    records = {column: _repeated([cell(r) for r in runs], counts) for column, cell in fixed}
    records[step] = np.concatenate([s for s, _ in logged]) if logged else np.zeros(0)
    for column, name in series.items():
        records[column] = (
            np.concatenate([v[name] if name in v else np.full(s.size, math.nan) for s, v in logged])
            if logged
            else np.zeros(0)
        )
    whole = bool(np.all(np.isfinite(records[step]) & (records[step] == np.floor(records[step]))))
    return records, whole


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


def _normalized(
    envs: np.ndarray, returns: np.ndarray, baselines: Mapping[str, tuple[float, float]]
) -> np.ndarray:
    """Each row's return normalised by its env's baselines (NaN without them)."""
    out = np.full(returns.size, math.nan)
    for env, (random_score, reference_score) in baselines.items():
        rows = envs == env
        if rows.any():
            out[rows] = stats.normalize_scores(returns[rows], random_score, reference_score)
    return out


def _agents_rows(runs: Sequence[Run], baselines: Mapping[str, tuple[float, float]]) -> Table:
    """rlsweep's agents: their metrics.csv alone (a tracker's mirror adds no row), the return
    normalised by its env's baselines (NaN without them)."""
    ordered = sorted(runs, key=lambda r: (r.group, r.task, *run_order(r)))
    fixed = _fixed(AGENT_COLUMNS[: AGENT_COLUMNS.index("step")])
    records, _ = _rows(ordered, fixed, "step", AGENT_SERIES, METRICS_FILE)
    records["step"] = _steps_column(records["step"], True)
    records["normalized_return"] = _normalized(records["env"], records["return"], baselines)
    return Table.of({c: records[c] for c in AGENT_COLUMNS}, AGENT_DTYPES)


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
    # Each key's cells typed over the values of the runs that have rows (a run's rows
    # repeat its own value).
    shown = [r for r in runs if any(s.steps.size for s in r.series.values())]
    typed = {key: _typed([r.keys.get(key) for r in shown]) for key in key_columns}
    fixed += [(column, _run_cell(shown, typed[key][0])) for key, column in key_columns.items()]
    records, whole = _rows(runs, fixed, step_column, series_columns, None)
    dtypes: dict[str, str] = {c: "str" for c in ("sweep", "job", "group", "status")}
    dtypes["replicate"] = "Int64"
    dtypes.update({column: typed[key][1] for key, column in key_columns.items()})
    records[step_column] = _steps_column(records[step_column], whole)
    dtypes[step_column] = "int64" if whole else "float64"
    dtypes.update({c: "float64" for c in series_columns})
    return Table.of(records, dtypes)


def _run_cell(runs: Sequence[Run], cells: Sequence[Any]) -> Callable[[Run], Any]:
    """The cell of each of ``runs`` (``cells[i]`` that of ``runs[i]``; None for another)."""
    by_run = {id(run): cell for run, cell in zip(runs, cells, strict=True)}
    return lambda r: by_run.get(id(r))


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
