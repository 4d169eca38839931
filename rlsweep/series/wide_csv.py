"""Wide CSV logs (a column per metric, a row per logging call) as series.

rlsweep's own ``metrics.csv`` at the top of a job directory (``rlsweep.current().log``) has
this shape, with the step in column ``step``. So do two libraries' CSV loggers, read
wherever they are under a job directory:

- Lightning's ``CSVLogger`` (``<save_dir>/<name>/version_<n>/metrics.csv``): the step in
  column ``step``, a row per ``log_metrics`` call, empty cells for the metrics that call
  did not log (``epoch`` is a column like any other);
- Stable-Baselines3's CSV output (``configure(folder, ["csv"])``: ``<folder>/progress.csv``):
  a row per ``dump``, the step in ``time/total_timesteps``, which its algorithms record at
  every dump (the ``step`` SB3 passes to ``dump`` is not written).

Both rewrite the whole file with a wider header when a new metric appears. Every column but
the step is a series named by its header; an empty cell or one that is not a number is no
value, a row without a step number (or with a NaN step) is skipped, and a last line without
its newline (a job killed mid-write) is dropped. A file whose header has no step column
(another tool's ``metrics.csv``) is not read. Several files (Lightning's ``version_0`` and
``version_1`` of a resumed run) merge as per-metric CSV files do: in order of modification
time, then path, a later file winning on a repeated step.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from rlsweep.series.base import Series, from_columns, in_write_order, merged_series
from rlsweep.store import METRICS_FILE

# A wide CSV log's file name -> its step column.
STEP_COLUMNS = {METRICS_FILE: "step", "progress.csv": "time/total_timesteps"}

Columns = dict[str, tuple[list[float], list[float]]]


def _number(cell: str | None) -> float | None:
    try:
        return float(cell) if cell else None
    except ValueError:
        return None


def read_wide_csv(path: Path, step_column: str) -> Columns | None:
    """Each metric's steps and values in row order, or None if the header has no
    ``step_column``."""
    text = path.read_text(errors="replace")
    # A last line without its newline was cut short (a job killed mid-write): dropped.
    reader = csv.DictReader(io.StringIO(text[: text.rfind("\n") + 1], newline=""))
    if step_column not in (reader.fieldnames or ()):
        return None
    columns: Columns = {}
    for row in reader:
        step = _number(row.get(step_column))
        if step is None or math.isnan(step):
            continue
        for key, cell in row.items():
            value = None if key is None or key == step_column else _number(cell)
            if value is not None:
                steps, values = columns.setdefault(key, ([], []))
                steps.append(step)
                values.append(value)
    return columns


def columns_series(columns: Columns, source: str) -> dict[str, Series]:
    """One file's columns as series, in the order the columns first held a value."""
    out = {}
    for name, (steps, values) in columns.items():
        series = from_columns(name, source, steps, values)
        if series is not None:
            out[name] = series
    return out


def wide_csv_series(job_dir: Path, files: list[Path]) -> dict[str, Series]:
    """The series of an app's wide CSV logs under ``job_dir``, merged across files."""
    pieces = []
    for path in in_write_order(files):
        source = path.relative_to(job_dir).as_posix()
        for name, (steps, values) in (read_wide_csv(path, STEP_COLUMNS[path.name]) or {}).items():
            pieces.append((name, source, steps, values))
    return merged_series(pieces)
