"""Every scalar of a job's TensorBoard event files, as series named by their tags.

A *run* is a directory holding event files (TensorBoard's meaning: its files are one run,
read in order). Rules, in the order they apply:

- A file's events are read up to a truncated or damaged record (see ``tfrecord``): what a
  job killed mid-write left is read as far as it is whole, and said: the file, what is wrong
  with it, the last step read and how many records were kept (:attr:`EventFile.problem`).
- Files are ordered by their first event's wall time (then path); within a run, and across
  the runs merged below, a later event wins on a repeated step, and a ``SessionLog.START``
  at step s (how rlsweep's tracker and TensorFlow mark a resumed run) drops what earlier
  events logged at steps >= s, as TensorBoard does.
- A tag logged by one run is named by the tag. A tag logged by several runs one after the
  other (each run's events end before the next one's begin: a resumed job writing into a
  new directory, as TorchRL's loggers do with a fresh experiment name) is one series, merged
  as above. A tag logged by several runs at the same time (their wall times overlap: say
  ``train/`` and ``eval/`` writers each logging ``reward``) means something different in
  each: each run's series is named ``<run>/<tag>``, the run's directory relative to the
  deepest directory those runs share (``train/reward``, ``eval/reward``; a run in that
  directory itself keeps the bare tag). A name taken twice keeps the first (tags in sorted
  order). The limit of judging by time: two writers that each log once, one after the
  other, look like one run resumed, and are merged.
"""

from __future__ import annotations

import bisect
import itertools
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from rlsweep.series.base import Series, from_columns
from rlsweep.series.event_proto import decode_event
from rlsweep.series.tfrecord import CUT, DAMAGED_LENGTH, first_damaged, frame

EVENT_FILE_PREFIX = "events.out.tfevents."

# What a record that is not an Event message raises when decoded.
_UNDECODABLE = (ValueError, IndexError, struct.error)


@dataclass
class Column:
    """One tag's scalars in one file, in logging order: event index, step, value."""

    seqs: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def cut(self, seq: int) -> None:
        """Keep what events before event ``seq`` logged."""
        keep = bisect.bisect_left(self.seqs, seq)
        del self.seqs[keep:], self.steps[keep:], self.values[keep:]


@dataclass
class EventFile:
    """What one event file holds, in logging order (``seq``: an event's index in the file).
    Plain lists of numbers, no object per event: a file holds up to millions."""

    # Relative to the job directory, POSIX separators.
    source: str
    # The directory holding it, relative to the job directory ("." for the job directory).
    run: str
    # The wall times of its first and last events (0.0 for a file without events).
    start: float = 0.0
    end: float = 0.0
    scalars: dict[str, Column] = field(default_factory=dict)
    # (seq, step) per restart marker.
    restarts: list[tuple[int, int]] = field(default_factory=list)
    # What is wrong with it, if anything, and what was kept of it (None: read whole).
    problem: str | None = None


# What a file's first bad record is, by how it was found.
_DAMAGE = {
    CUT: "cut mid-record (a write cut short)",
    DAMAGED_LENGTH: "damaged (a record's length fails its checksum)",
    "data": "damaged (a record fails its checksum)",
    "undecodable": "damaged (a record is not a TensorBoard event)",
}


def _problem(source: str, damage: str, steps: list[int], kept: int) -> str:
    """What a reader needs of a damaged or cut file: which, what, the last step kept."""
    what = f"`{source}`: {_DAMAGE[damage]}"
    if not steps:
        return f"{what}, before any scalar: nothing read from it"
    return (
        f"{what} after step {steps[-1]}: read up to step {steps[-1]} ({kept} records "
        "kept), the rest of the file not read"
    )


def read_event_file(path: Path, job_dir: Path) -> EventFile:
    """One event file, read up to its first truncated, damaged or undecodable record."""
    data = path.read_bytes()
    spans, end = frame(data)
    relative = path.relative_to(job_dir)
    out = EventFile(source=relative.as_posix(), run=relative.parent.as_posix())
    walls, used, steps = [], [], []
    damage = end if end in _DAMAGE else None
    for seq, (start, stop) in enumerate(spans):
        try:
            event = decode_event(data, start, stop)
        except _UNDECODABLE:  # not an Event: read no further, as with a damaged record
            damage = "undecodable" if first_damaged(data, [(start, stop)]) is None else "data"
            break
        walls.append(event.wall_time)
        if event.restart:
            out.restarts.append((seq, event.step))
        for tag, value in event.scalars:
            column = out.scalars.get(tag) or out.scalars.setdefault(tag, Column())
            column.seqs.append(seq)
            column.steps.append(event.step)
            column.values.append(value)
        if event.scalars or event.restart:
            used.append(seq)
            steps.append(event.step)
    damaged = first_damaged(data, [spans[i] for i in used])
    if damaged is not None:
        damage = "data"
        del walls[used[damaged] :], steps[damaged:]
        out.restarts = [r for r in out.restarts if r[0] < used[damaged]]
        for column in out.scalars.values():
            column.cut(used[damaged])
        out.scalars = {tag: column for tag, column in out.scalars.items() if column.seqs}
    if walls:
        out.start, out.end = walls[0], walls[-1]
    if damage is not None:
        out.problem = _problem(out.source, damage, steps, len(walls))
    return out


def _columns(files: list[EventFile], tag: str) -> tuple[list[int], list[float]]:
    """The tag's steps and values over ``files`` in order, restarts applied."""
    steps: list[int] = []
    values: list[float] = []
    for f in files:
        column = f.scalars.get(tag, Column())
        done = 0
        for mark_seq, mark_step in f.restarts:
            before = bisect.bisect_left(column.seqs, mark_seq)
            steps += column.steps[done:before]
            values += column.values[done:before]
            done = before
            keep = [j for j, step in enumerate(steps) if step < mark_step]
            steps, values = [steps[j] for j in keep], [values[j] for j in keep]
        steps += column.steps[done:]
        values += column.values[done:]
    return steps, values


def _one_after_another(runs: list[list[EventFile]]) -> bool:
    """Whether each run's events end before the next one's begin (runs by start)."""
    spans = sorted((min(f.start for f in r), max(f.end for f in r)) for r in runs)
    return all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans))


def _run_names(runs: list[str]) -> dict[str, str]:
    """Each run directory relative to the deepest directory they all share."""
    common = os.path.commonpath([os.path.join("/", r) for r in runs])
    return {r: os.path.relpath(os.path.join("/", r), common).replace(os.sep, "/") for r in runs}


def _groups(files: list[EventFile], tag: str) -> list[tuple[str, list[EventFile]]]:
    """The series one tag makes: (name, the files merged into it, in order)."""
    by_run: dict[str, list[EventFile]] = {}
    for f in files:
        if tag in f.scalars:
            by_run.setdefault(f.run, []).append(f)
    runs = list(by_run.values())
    if len(runs) == 1 or _one_after_another(runs):
        return [(tag, [f for f in files if f.run in by_run])]
    names = _run_names(list(by_run))
    return [
        (tag if names[run] == "." else f"{names[run]}/{tag}", [f for f in files if f.run == run])
        for run in by_run
    ]


def event_series(
    job_dir: Path, paths: list[Path], problems: list[str] | None = None
) -> dict[str, Series]:
    """Every scalar tag of the event files ``paths`` (under ``job_dir``), by name; what is
    wrong with a damaged or cut file appended to ``problems``."""
    files = sorted((read_event_file(p, job_dir) for p in paths), key=lambda f: (f.start, f.source))
    if problems is not None:
        problems += [f.problem for f in sorted(files, key=lambda f: f.source) if f.problem]
    out: dict[str, Series] = {}
    for tag in sorted({tag for f in files for tag in f.scalars}):
        for name, merged in _groups(files, tag):
            if name in out:
                continue
            sources = ", ".join(f.source for f in merged)
            series = from_columns(name, sources, *_columns(merged, tag))
            if series is not None:
                out[name] = series
    return out
