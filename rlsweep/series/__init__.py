"""The numbers a job logged over time, whatever wrote them: one reader for the report, the
summary and the determinism check.

A job directory can hold several kinds of logs: rlsweep's own ``metrics.csv`` (from
``rlsweep.current().log``), and what the app wrote itself: TensorBoard event files
(``events.out.tfevents.*``: torch's ``SummaryWriter``, TorchRL's ``TensorboardLogger``,
TensorFlow, tensorboard's own writer; see ``event_files``), per-metric CSV files
(``scalars/<name>.csv``: TorchRL's ``CSVLogger``; see ``csv_files``) and wide CSV files
(Lightning's ``CSVLogger``'s ``metrics.csv``, Stable-Baselines3's ``progress.csv``; see
``wide_csv``), anywhere under the job directory but in ``.hydra/``, ``.previous/`` (earlier
runs' logs: ``rerun=all`` moves them there) and ``wandb/`` and ``mlruns/`` (other tools'
copies). :func:`job_series` reads them all into :class:`Series`, one per metric name: the
report's learning curves and an app's final metric come from here, never from a column that
must be named like a returned value.

Precedence when two sources log the same name: ``metrics.csv`` first (rlsweep's own record,
which ``logger=tensorboard`` also mirrors into event files), then TensorBoard event files,
then per-metric CSV files, then wide CSV files; a name an earlier source has is not read
again.

A TensorBoard event file cut mid-record or damaged (a record failing its checksum) is read
up to its last whole record, and said: :attr:`JobSeries.problems` names the file, what is
wrong with it and the last step read, for the report to list.

A link whose file is gone (an ``outside_logs/`` link to logs the user deleted, or did not
move with the sweep) is no log: the job's other logs are read as if it were not there.

Cost: a job directory is walked once (names only: no file is opened but the logs found), so
a directory without app logs costs one ``os.scandir`` per sub-directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from rlsweep.series.base import Series
from rlsweep.series.csv_files import SCALARS_DIR, csv_series
from rlsweep.series.event_files import EVENT_FILE_PREFIX, event_series
from rlsweep.series.wide_csv import STEP_COLUMNS, columns_series, read_wide_csv, wide_csv_series
from rlsweep.store import HYDRA_DIR, METRICS_FILE, PREVIOUS_DIR

__all__ = ["JobSeries", "Series", "job_series"]

# Directories never read: Hydra's copy of the config, what earlier runs of a job rerun with
# rerun=all wrote (rlsweep.store.PREVIOUS_DIR), and other tools' own stores (wandb and
# mlflow keep copies of what they were sent, event files included).
SKIPPED_DIRS = frozenset({HYDRA_DIR, PREVIOUS_DIR, "wandb", "mlruns"})


def metrics_csv_series(job_dir: Path) -> dict[str, Series]:
    """Every column of the job's ``metrics.csv`` but ``step``, as a series."""
    path = job_dir / METRICS_FILE
    columns = read_wide_csv(path, STEP_COLUMNS[METRICS_FILE]) if path.is_file() else None
    return columns_series(columns or {}, METRICS_FILE)


class AppLogs(NamedTuple):
    """The app's log files under a job directory, each kind in path order."""

    events: list[Path]  # TensorBoard event files
    per_metric: list[tuple[Path, Path]]  # per-metric CSV files, each with its scalars/ dir
    wide: list[Path]  # wide CSV files (not rlsweep's own metrics.csv at the top)

    def paths(self) -> list[Path]:
        return [*self.events, *(path for path, _ in self.per_metric), *self.wide]


def app_log_files(job_dir: Path) -> AppLogs:
    """The app's log files under ``job_dir``."""
    logs = AppLogs([], [], [])
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
            elif entry.is_symlink() and not os.path.exists(entry.path):
                continue  # a link to a file that is gone (outside logs deleted): no log
            elif entry.name.startswith(EVENT_FILE_PREFIX):
                logs.events.append(Path(entry.path))
            elif scalars_dir is not None and entry.name.endswith(".csv"):
                logs.per_metric.append((Path(entry.path), Path(scalars_dir)))
            elif entry.name in STEP_COLUMNS and not (
                entry.name == METRICS_FILE and directory == str(job_dir)
            ):
                logs.wide.append(Path(entry.path))
    for found in logs:
        found.sort()
    return logs


class JobSeries(dict[str, Series]):
    """A job's series by name, and what is wrong with the log files they were read from
    (``problems``: one line per file cut or damaged, naming it; empty: none)."""

    problems: tuple[str, ...] = ()


def job_series(job_dir: Path) -> JobSeries:
    """Every metric the job logged, by name (see the module docstring for precedence)."""
    out = JobSeries(metrics_csv_series(job_dir))
    logs = app_log_files(job_dir)
    problems: list[str] = []
    for found in (
        event_series(job_dir, logs.events, problems) if logs.events else {},
        csv_series(job_dir, logs.per_metric),
        wide_csv_series(job_dir, logs.wide),
    ):
        for name, series in found.items():
            out.setdefault(name, series)
    out.problems = tuple(problems)
    return out
