"""Two runs of the same job compared: the first place where what they wrote differs.

The two runs' trees are matched first (:func:`rlsweep.check.runs.match_runs`): a run folder
named by time or hash (``outputs/ppo_cartpole_3f2a1c_2026-12-02_10-11-12/``) is compared
with the other run's, whatever its name. What is compared, in this order of precedence for
"the first difference":

1. every logged series (:func:`rlsweep.series.job_series`: rlsweep's ``metrics.csv``, the
   app's TensorBoard event files and CSV logs), value by value up to a step
   limit: the first difference is the lowest step at which some series differs (a value,
   or a step one run logged and the other did not), named by its file and column. A
   series is paired by its name, run 2's names read with its matched folders' names as
   run 1's (a name can hold its event file's folder: ``<run folder>/train/reward``);
2. ``result.json``'s values (both runs finished);
3. every other file both runs wrote, byte for byte, run 2's matched folders' names and job
   directory read as run 1's (a file that records where it was written); then a file one
   run wrote and nothing of the other's matched (both runs finished).

Series and result values that measure time (wall time, speed, durations) differ between
any two runs and say nothing about the numbers: they are left out by name
(:data:`TIMING`), and the report says which were. Plain-text logs (:data:`TEXT_LOGS`:
``*.txt``, ``*.log``, ``*.out``, ``*.err``, ``stdout``, ...: a library's ``MUJOCO_LOG.TXT``,
Python's logging, rlsweep's ``app.log``) hold dates, times and process ids: they are not
the job's numbers and never a difference; the report says, for each, whether the two runs'
are the same, the same but for dates and times, or from which line they differ.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

import numpy as np

from rlsweep.check.runs import Matching, match_runs
from rlsweep.series import Series, job_series
from rlsweep.store import RESULT_FILE

# Names of series and result values that measure time or speed, not what a job computes.
TIMING = re.compile(
    r"(^|[/_.\- ])(time|times|timing|timer|speed|fps|sps|duration|durations|wall|clock|"
    r"elapsed|seconds|secs|throughput|it_per_s)([/_.\- ]|$)",
    re.IGNORECASE,
)
# Files that differ between any two runs (rlsweep's records of attempts, trackers and
# workers, its checkpoint) or are read as series above.
_SKIPPED_FILES = re.compile(
    r"(^|/)(\.trackers\.json$|attempts\.jsonl$|\.worker\.pid$|\.rlsweep\.claim$|"
    r"checkpoint\.pt$|events\.out\.tfevents\.[^/]*$|[^/]*\.csv$)"
)
# Plain-text logs (a library's, Python's logging, a captured stream): not compared as the
# job's numbers.
TEXT_LOGS = re.compile(
    r"(\.(txt|log|out|err|stdout|stderr)(\.\d+)?|(^|/)(stdout|stderr|log))$",
    re.IGNORECASE,
)
# Dates and times of day in a text log's lines ("2026-12-02", "10:11:12,345").
_CLOCK = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}:\d{2}([.,]\d+)?")


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
    # result.json's values compared (None: not compared).
    results: int | None = None
    # Series and result values left out as timings.
    timing: list[str] = field(default_factory=list)
    # Other files compared byte for byte (None: not compared).
    files: int | None = None
    # The last step compared (None: everything both runs logged).
    limit: float | None = None
    # Each text log (run 1's path) and how the two runs' compare ("same", ...).
    text_logs: list[tuple[str, str]] = field(default_factory=list)
    # The two runs' trees matched.
    matching: Matching = field(default_factory=Matching)

    @property
    def same(self) -> bool:
        """No difference found (so far)."""
        return self.difference is None


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


Pairs = dict[str, tuple[Series | None, Series | None]]


def pair_series(a: dict[str, Series], b: dict[str, Series], matching: Matching) -> Pairs:
    """Each name's series of run 1 and run 2 (None: that run has none): a name of run 2's
    that run 1 lacks is read with run 2's matched folders' names as run 1's."""
    renamed = matching.run2_names()
    out: Pairs = {name: (series, None) for name, series in a.items()}
    for name, series in b.items():
        mine = name
        if name not in a:
            mine = "/".join(renamed.get(part, part) for part in name.split("/"))
            if mine in out and out[mine][1] is not None:
                mine = name
        out[mine] = (out.get(mine, (None, None))[0], series)
    return out


def common_last_step(pairs: Pairs) -> float | None:
    """The last step both runs logged in every series they share (runs stopped by time)."""
    lasts = [
        min(float(x.steps[-1]), float(y.steps[-1]))
        for x, y in pairs.values()
        if x is not None and y is not None
    ]
    return min(lasts) if lasts else None


def compare_series(pairs: Pairs, limit: float | None, out: JobDiff) -> None:
    """Set ``out.difference`` to the earliest series difference, if any."""
    found: list[Difference] = []
    for name in sorted(pairs):
        if TIMING.search(name):
            out.timing.append(name)
            continue
        a, b = pairs[name]
        if a is None or b is None:
            present = a or b
            assert present is not None
            step = float(present.steps[0])
            value = _number(float(present.values[0]))
            first, second = (value, "missing") if a is not None else ("missing", value)
            found.append(Difference(present.source, name, step, first, second))
            continue
        out.series += 1
        out.values += int(np.sum(a.steps <= (limit if limit is not None else math.inf)))
        difference = _series_difference(a, b, limit)
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
    out.results = 0
    for key in sorted(first.keys() | second.keys()):
        if key == "rlsweep" or TIMING.search(key):
            if key != "rlsweep":
                out.timing.append(f"{RESULT_FILE}: {key}")
            continue
        out.results += 1
        x, y = first.get(key, "missing"), second.get(key, "missing")
        if json.dumps(x, sort_keys=True) != json.dumps(y, sort_keys=True):
            out.difference = Difference(RESULT_FILE, key, None, _short(x), _short(y))
            return


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _as_run1(b: Path, a: Path, matching: Matching) -> list[tuple[bytes, bytes]]:
    """What run 2's files say where run 1's say otherwise, and run 1's words for it: its job
    directory, and its folders' and files' names matched under another name (6 characters
    or more: a short name is no run's own), longest first."""
    swaps = {str(b): str(a), **matching.run2_names()}
    return sorted(
        ((x.encode(), y.encode()) for x, y in swaps.items() if len(x) >= 6 and x != y),
        key=lambda swap: -len(swap[0]),
    )


def _text_log(x: bytes, y: bytes) -> str:
    """How two runs' text logs compare, in words."""
    if x == y:
        return "same"
    lines = zip_longest(
        x.decode(errors="replace").splitlines(), y.decode(errors="replace").splitlines()
    )
    for i, (p, q) in enumerate(lines, 1):
        if p is None or q is None or _CLOCK.sub("", p) != _CLOCK.sub("", q):
            return f"differs from line {i}"
    return "same but for dates and times"


def _file_difference(rel: str, x: bytes, y: bytes) -> Difference:
    """Where two runs' versions of a file (not the same) first differ."""
    found = _json_difference(rel, x, y) if rel.endswith(".json") else None
    if found is not None:
        return found
    offset = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), None)
    where = f"byte {offset}" if offset is not None else f"length {len(x)} vs {len(y)}"
    return Difference(rel, None, None, f"differs at {where}", "")


def compare_files(a: Path, b: Path, out: JobDiff) -> None:
    """Set ``out.difference`` to the first other file that differs, or that one run wrote
    and the other did not, if any; list the text logs in ``out.text_logs``."""
    swaps = _as_run1(b, a, out.matching)
    for rel, rel_b in out.matching.files:
        logged = TEXT_LOGS.search(rel)
        if rel == RESULT_FILE or _SKIPPED_FILES.search(rel) or not (logged or out.same):
            continue
        x, y = (a / rel).read_bytes(), (b / rel_b).read_bytes()
        for theirs, ours in swaps:
            y = y.replace(theirs, ours)
        if logged:
            out.text_logs.append((rel, _text_log(x, y)))
            continue
        out.files = (out.files or 0) + 1
        if x != y:
            out.difference = _file_difference(rel, x, y)
    for run, paths in enumerate(out.matching.only):
        for rel in paths:
            if TEXT_LOGS.search(rel):
                out.text_logs.append((rel, f"run {run + 1}'s only"))
            elif out.same and not _SKIPPED_FILES.search(rel):
                other = 2 - run
                shown = f"written by run {run + 1} only (no file of run {other}'s matches it)"
                out.difference = Difference(rel, None, None, shown, "")


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
    """Compare two runs' job directories (``limit``: the last step compared, None: every
    step of a finished run, the last step both logged of one stopped; ``finished``: both
    runs finished, so their results and other files are compared too)."""
    matching = match_runs(a, b)
    pairs = pair_series(job_series(a), job_series(b), matching)
    if limit is None and not finished:
        limit = common_last_step(pairs)
    out = JobDiff(limit=limit, matching=matching)
    compare_series(pairs, limit, out)
    if out.same and finished:
        compare_results(a, b, out)
    if finished:
        compare_files(a, b, out)
    return out
