"""The numbers a job logged over time, whatever wrote them: one reader for the report, the
summary and the determinism check.

A job directory can hold several kinds of logs: rlsweep's own ``metrics.csv`` (from
``rlsweep.current().log``), and what the app wrote itself (TensorBoard event files, per-metric
CSV files such as TorchRL's ``CSVLogger``). :func:`job_series` reads them all into
:class:`Series`, one per metric name: the report's learning curves and an app's final metric
come from here, never from a column that must be named like a returned value.

Precedence when two sources log the same name: ``metrics.csv`` first (rlsweep's own record,
which ``logger=tensorboard`` also mirrors into event files), then the app's files in path order.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlsweep.store import METRICS_FILE

__all__ = ["Series", "job_series"]


@dataclass(frozen=True)
class Series:
    """One logged metric of one job: ``values[i]`` was logged at ``steps[i]``."""

    # The metric's name as its writer gave it ("eval/reward", "episode_return").
    name: str
    # Where it was read, relative to the job directory ("metrics.csv", "logs/events.out...").
    source: str
    # The steps, increasing (a step logged twice keeps its last value).
    steps: np.ndarray
    # The values, float64 (NaN for an empty cell is dropped, not kept).
    values: np.ndarray

    @property
    def last(self) -> float:
        """The value at the last step (the series' final value)."""
        return float(self.values[-1])


def _from_pairs(name: str, source: str, pairs: list[tuple[float, float]]) -> Series | None:
    """A series from (step, value) pairs in logging order: sorted by step, the last value of
    a repeated step kept, NaN dropped; None if nothing is left."""
    by_step: dict[float, float] = {}
    for step, value in pairs:
        if not math.isnan(value):
            by_step[step] = value
    if not by_step:
        return None
    steps = sorted(by_step)
    return Series(
        name=name,
        source=source,
        steps=np.asarray(steps, dtype=np.float64),
        values=np.asarray([by_step[s] for s in steps], dtype=np.float64),
    )


def metrics_csv_series(job_dir: Path) -> dict[str, Series]:
    """Every column of the job's ``metrics.csv`` but ``step``, as a series."""
    path = job_dir / METRICS_FILE
    if not path.is_file():
        return {}
    columns: dict[str, list[tuple[float, float]]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            step = float(row.get("step") or "nan")
            if math.isnan(step):
                continue
            for key, cell in row.items():
                if key == "step" or key is None or cell in ("", None):
                    continue
                columns.setdefault(key, []).append((step, float(cell)))
    out = {}
    for name, pairs in columns.items():
        series = _from_pairs(name, METRICS_FILE, pairs)
        if series is not None:
            out[name] = series
    return out


def job_series(job_dir: Path) -> dict[str, Series]:
    """Every metric the job logged, by name (see the module docstring for precedence)."""
    return metrics_csv_series(job_dir)
