"""Per-metric CSV files, as TorchRL's ``CSVLogger`` writes them, as series.

TorchRL 0.14 writes ``<log_dir>/<exp_name>/scalars/<name>.csv`` per metric, one
``step,value`` line each time it is logged, no header, ``name`` as logged (so
``eval/reward`` lands in ``scalars/eval/reward.csv``). Here a per-metric CSV file is any
``*.csv`` under a directory named ``scalars``; its series is named by its path below that
directory without ``.csv`` (``eval/reward``).

Lines are ``step,value`` numbers (``nan``/``inf`` allowed, NaN dropped as everywhere); a first
line that is not numbers is a header and skipped, blank lines too; a last line cut short (no
newline, not two numbers: a job killed mid-write) is dropped. A file with any other line is not a per-metric
CSV and is not read. The same name in several files (a resumed run writing under a new
experiment name) is one series: the files merged in order of modification time (then path),
a later file winning on a repeated step.
"""

from __future__ import annotations

from pathlib import Path

from rlsweep.series.base import Series, in_write_order, merged_series

SCALARS_DIR = "scalars"


def csv_metric_name(path: Path, scalars_dir: Path) -> str:
    """The metric a per-metric CSV file holds: its path below ``scalars/``, no ``.csv``."""
    return path.relative_to(scalars_dir).with_suffix("").as_posix()


def _row(line: str, steps: list[float], values: list[float]) -> bool:
    """Append a ``step,value`` line's numbers; False if it is not two numbers."""
    step, _, value = line.partition(",")
    try:  # float() refuses "" (no comma) and "1,2" (a third cell)
        step_number, value_number = float(step), float(value)
    except ValueError:
        return False
    steps.append(step_number)
    values.append(value_number)
    return True


def read_csv_file(path: Path) -> tuple[list[float], list[float]] | None:
    """A per-metric CSV file's steps and values in order, or None if it is not one."""
    lines = path.read_text(errors="replace").split("\n")
    tail = lines.pop()  # after the last newline: "" or a last line without its newline
    steps: list[float] = []
    values: list[float] = []
    for i, line in enumerate(lines):
        if not _row(line, steps, values) and i > 0 and line.strip():
            return None  # neither a header nor a blank line
    if tail:
        _row(tail, steps, values)  # a line cut short is dropped
    return steps, values


def csv_series(job_dir: Path, files: list[tuple[Path, Path]]) -> dict[str, Series]:
    """The series of per-metric CSV files: ``files`` holds ``(path, its scalars/ dir)``."""
    scalars_dirs = dict(files)
    pieces = []
    for path in in_write_order(scalars_dirs):
        read = read_csv_file(path)
        if read is not None:
            name = csv_metric_name(path, scalars_dirs[path])
            pieces.append((name, path.relative_to(job_dir).as_posix(), *read))
    return merged_series(pieces)
