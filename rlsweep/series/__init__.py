"""The numbers a job logged over time, whatever wrote them: one reader for the report, the
summary and the determinism check.

A job directory can hold several kinds of logs: rlsweep's own ``metrics.csv`` (from
``rlsweep.current().log``), and what the app wrote itself: TensorBoard event files
(``events.out.tfevents.*``: torch's ``SummaryWriter``, TorchRL's ``TensorboardLogger``,
TensorFlow, tensorboard's own writer; see ``event_files``) and per-metric CSV files
(``scalars/<name>.csv``: TorchRL's ``CSVLogger``; see ``csv_files``), anywhere under the job
directory but in ``.hydra/``, ``.previous/`` (earlier runs' logs: ``rerun=all`` moves them
there) and ``wandb/`` and ``mlruns/`` (other tools' copies). :func:`job_series`
reads them all into :class:`Series`, one per metric name: the report's learning curves and an
app's final metric come from here, never from a column that must be named like a returned
value.

Precedence when two sources log the same name: ``metrics.csv`` first (rlsweep's own record,
which ``logger=tensorboard`` also mirrors into event files), then TensorBoard event files,
then per-metric CSV files; a name an earlier source has is not read again.

Cost: a job directory is walked once (names only: no file is opened but the logs found), so
a directory without app logs costs one ``os.scandir`` per sub-directory.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

from rlsweep.series.base import Series, from_columns
from rlsweep.series.csv_files import SCALARS_DIR, csv_series
from rlsweep.series.event_files import EVENT_FILE_PREFIX, event_series
from rlsweep.store import HYDRA_DIR, METRICS_FILE, PREVIOUS_DIR

__all__ = ["Series", "job_series"]

# Directories never read: Hydra's copy of the config, what earlier runs of a job rerun with
# rerun=all wrote (rlsweep.store.PREVIOUS_DIR), and other tools' own stores (wandb and
# mlflow keep copies of what they were sent, event files included).
SKIPPED_DIRS = frozenset({HYDRA_DIR, PREVIOUS_DIR, "wandb", "mlruns"})


def metrics_csv_series(job_dir: Path) -> dict[str, Series]:
    """Every column of the job's ``metrics.csv`` but ``step``, as a series."""
    path = job_dir / METRICS_FILE
    if not path.is_file():
        return {}
    columns: dict[str, tuple[list[float], list[float]]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            step = float(row.get("step") or "nan")
            if math.isnan(step):
                continue
            for key, cell in row.items():
                if key == "step" or key is None or cell in ("", None):
                    continue
                steps, values = columns.setdefault(key, ([], []))
                steps.append(step)
                values.append(float(cell))
    out = {}
    for name, (steps, values) in columns.items():
        series = from_columns(name, METRICS_FILE, steps, values)
        if series is not None:
            out[name] = series
    return out


def app_log_files(job_dir: Path) -> tuple[list[Path], list[tuple[Path, Path]]]:
    """The app's log files under ``job_dir``, in path order: its event files, and its
    per-metric CSV files with the ``scalars/`` directory each is under."""
    events: list[Path] = []
    csvs: list[tuple[Path, Path]] = []
    stack: list[tuple[str, str | None]] = [(str(job_dir), None)]
    while stack:
        directory, scalars_dir = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):  # no such job directory: no logs
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIPPED_DIRS:
                    inner = entry.path if entry.name == SCALARS_DIR else scalars_dir
                    stack.append((entry.path, inner))
            elif entry.name.startswith(EVENT_FILE_PREFIX):
                events.append(Path(entry.path))
            elif scalars_dir is not None and entry.name.endswith(".csv"):
                csvs.append((Path(entry.path), Path(scalars_dir)))
    return sorted(events), sorted(csvs)


def job_series(job_dir: Path) -> dict[str, Series]:
    """Every metric the job logged, by name (see the module docstring for precedence)."""
    out = metrics_csv_series(job_dir)
    events, csvs = app_log_files(job_dir)
    for found in (event_series(job_dir, events) if events else {}, csv_series(job_dir, csvs)):
        for name, series in found.items():
            out.setdefault(name, series)
    return out
