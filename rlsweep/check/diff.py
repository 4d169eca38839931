"""Two runs of the same job compared: the first place where what they wrote differs.

What is compared, in this order of precedence for "the first difference":

1. every logged series (:func:`rlsweep.series.job_series`: rlsweep's ``metrics.csv``, the
   app's TensorBoard event files and CSV logs), value by value up to a step
   limit: the first difference is the lowest step at which some series differs (a value,
   or a step one run logged and the other did not), named by its file and column;
2. ``result.json``'s values (both runs finished);
3. every other file both runs wrote, byte for byte (both runs finished).

Series and result values that measure time (wall time, speed, durations) differ between
any two runs and say nothing about the numbers: they are left out by name
(:data:`TIMING`), and the report says which were.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlsweep.series import Series, job_series
from rlsweep.store import RESULT_FILE

# Names of series and result values that measure time or speed, not what a job computes.
TIMING = re.compile(
    r"(^|[/_.\- ])(time|times|timing|timer|speed|fps|sps|duration|durations|wall|clock|"
    r"elapsed|seconds|secs|throughput|it_per_s)([/_.\- ]|$)",
    re.IGNORECASE,
)
# Files that differ between any two runs (logs, timestamps, process ids) or are read as
# series above; directories of trackers' own stores.
_SKIPPED_FILES = re.compile(
    r"(^|/)(\.hydra/|wandb/|mlruns/|\.trackers\.json$|attempts\.jsonl$|\.worker\.pid$|"
    r"checkpoint\.pt$|[^/]*\.log$|events\.out\.tfevents\.[^/]*$|[^/]*\.csv$)"
)


@dataclass(frozen=True)
class Difference:
    """Where two runs first differ."""

    # The file, relative to the job directory.
    file: str
    # The series or value ("eval/reward"); None for a whole file.
    column: str | None
    # The step of the first differing value (None: no step, a result or a file).
    step: float | None
    # What each run has there ("missing" when one has nothing).
    first: str
    second: str

    def __str__(self) -> str:
        where = self.file + (f", {self.column}" if self.column else "")
        if not self.second:  # a whole file: what differs is in ``first``
            return f"{where}: {self.first}"
        at = f" at step {_number(self.step)}" if self.step is not None else ""
        return f"{where}{at}: {self.first} (run 1) vs {self.second} (run 2)"


@dataclass
class JobDiff:
    """The outcome of comparing two job directories."""

    difference: Difference | None = None
    # Series compared, and values compared in them.
    series: int = 0
    values: int = 0
    # Series and result values left out as timings.
    timing: list[str] = field(default_factory=list)
    # Other files compared byte for byte.
    files: int = 0


def _number(value: float | None) -> str:
    if value is None:
        return "missing"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _series_difference(a: Series, b: Series, limit: float | None) -> Difference | None:
    """The first step at which two runs' series of one name differ (up to ``limit``)."""
    steps_a = a.steps if limit is None else a.steps[a.steps <= limit]
    steps_b = b.steps if limit is None else b.steps[b.steps <= limit]
    n = min(len(steps_a), len(steps_b))
    for i in range(n):
        same_step = steps_a[i] == steps_b[i]
        va, vb = a.values[i], b.values[i]
        if not same_step or not (va == vb or (math.isnan(va) and math.isnan(vb))):
            step = float(min(steps_a[i], steps_b[i]))
            first = _number(float(va)) if steps_a[i] == step else "missing"
            second = _number(float(vb)) if steps_b[i] == step else "missing"
            return Difference(a.source, a.name, step, first, second)
    if len(steps_a) != len(steps_b):
        longer, which = (steps_a, 0) if len(steps_a) > n else (steps_b, 1)
        value = (a if which == 0 else b).values[n]
        shown = (_number(float(value)), "missing")
        return Difference(
            a.source, a.name, float(longer[n]), *(shown if which == 0 else shown[::-1])
        )
    return None


def compare_series(
    a: dict[str, Series], b: dict[str, Series], limit: float | None, out: JobDiff
) -> None:
    """Set ``out.difference`` to the earliest series difference, if any."""
    found: list[Difference] = []
    for name in sorted(a.keys() | b.keys()):
        if TIMING.search(name):
            out.timing.append(name)
            continue
        if name not in a or name not in b:
            present = a.get(name) or b[name]
            step = float(present.steps[0])
            value = _number(float(present.values[0]))
            first, second = (value, "missing") if name in a else ("missing", value)
            found.append(Difference(present.source, name, step, first, second))
            continue
        out.series += 1
        out.values += int(np.sum(a[name].steps <= (limit if limit is not None else math.inf)))
        difference = _series_difference(a[name], b[name], limit)
        if difference is not None:
            found.append(difference)
    if found:
        out.difference = min(found, key=lambda d: d.step if d.step is not None else math.inf)


def _result_values(job_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((job_dir / RESULT_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def compare_results(a: Path, b: Path, out: JobDiff) -> None:
    """Set ``out.difference`` to the first value of result.json that differs, if any."""
    first, second = _result_values(a), _result_values(b)
    if first is None or second is None:
        return
    for key in sorted(first.keys() | second.keys()):
        if key == "rlsweep" or TIMING.search(key):
            if key != "rlsweep":
                out.timing.append(f"{RESULT_FILE}: {key}")
            continue
        x, y = first.get(key, "missing"), second.get(key, "missing")
        if json.dumps(x, sort_keys=True) != json.dumps(y, sort_keys=True):
            out.difference = Difference(RESULT_FILE, key, None, _short(x), _short(y))
            return


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _files(job_dir: Path) -> Iterator[str]:
    for path in sorted(job_dir.rglob("*")):
        rel = path.relative_to(job_dir).as_posix()
        if path.is_file() and rel != RESULT_FILE and not _SKIPPED_FILES.search(rel):
            yield rel


def compare_files(a: Path, b: Path, out: JobDiff) -> None:
    """Set ``out.difference`` to the first other file that differs, if any."""
    names_a, names_b = set(_files(a)), set(_files(b))
    for rel in sorted(names_a | names_b):
        if rel not in names_a or rel not in names_b:
            shown = ("present", "missing") if rel in names_a else ("missing", "present")
            out.difference = Difference(rel, None, None, *shown)
            return
        out.files += 1
        x, y = (a / rel).read_bytes(), (b / rel).read_bytes()
        if x != y and rel.endswith(".json"):
            out.difference = _json_difference(rel, x, y)
        if out.difference is not None:
            return
        if x != y:
            offset = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), None)
            where = f"byte {offset}" if offset is not None else f"length {len(x)} vs {len(y)}"
            out.difference = Difference(rel, None, None, f"differs at {where}", "")
            return


def _json_difference(rel: str, x: bytes, y: bytes) -> Difference | None:
    """The first value (by key path) where two JSON files differ, or None if not JSON."""
    try:
        first, second = json.loads(x), json.loads(y)
    except ValueError:
        return None

    def walk(p: Any, q: Any, path: str) -> Difference | None:
        if isinstance(p, dict) and isinstance(q, dict):
            for key in sorted(p.keys() | q.keys(), key=str):
                found = walk(p.get(key, "missing"), q.get(key, "missing"), f"{path}.{key}")
                if found is not None:
                    return found
            return None
        if isinstance(p, list) and isinstance(q, list) and len(p) == len(q):
            for i, (u, v) in enumerate(zip(p, q, strict=True)):
                found = walk(u, v, f"{path}[{i}]")
                if found is not None:
                    return found
            return None
        if json.dumps(p, sort_keys=True) == json.dumps(q, sort_keys=True):
            return None
        return Difference(rel, path.lstrip(".") or "(whole)", None, _short(p), _short(q))

    return walk(first, second, "")


def compare_jobs(a: Path, b: Path, *, limit: float | None, finished: bool) -> JobDiff:
    """Compare two runs' job directories (``limit``: the last step compared; ``finished``:
    both runs finished, so their results and other files are compared too)."""
    out = JobDiff()
    compare_series(job_series(a), job_series(b), limit, out)
    if out.difference is None and finished:
        compare_results(a, b, out)
    if out.difference is None and finished:
        compare_files(a, b, out)
    return out
