"""One logged metric of one job (:class:`Series`), built from (step, value) pairs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Series:
    """One logged metric of one job: ``values[i]`` was logged at ``steps[i]``."""

    # The metric's name as its writer gave it ("eval/reward", "episode_return").
    name: str
    # Where it was read, relative to the job directory ("metrics.csv", "logs/events.out...");
    # several files joined by ", ", in the order they were merged.
    source: str
    # The steps, increasing (a step logged twice keeps its last value).
    steps: np.ndarray
    # The values, float64 (NaN for an empty cell is dropped, not kept).
    values: np.ndarray

    @property
    def last(self) -> float:
        """The value at the last step (the series' final value)."""
        return float(self.values[-1])


def from_columns(
    name: str,
    source: str,
    steps: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
) -> Series | None:
    """A series from steps and values in logging order: sorted by step, the last value of a
    repeated step kept, NaN values and steps dropped (an earlier value of its step stands);
    None if nothing is left."""
    step_array = np.asarray(steps, dtype=np.float64)
    value_array = np.asarray(values, dtype=np.float64)
    logged = ~np.isnan(value_array) & ~np.isnan(step_array)
    if not logged.any():
        return None
    # np.unique keeps each step's first occurrence: of the reversed arrays, the last logged.
    last_first = step_array[logged][::-1], value_array[logged][::-1]
    unique, first = np.unique(last_first[0], return_index=True)
    return Series(name=name, source=source, steps=unique, values=last_first[1][first])


def in_write_order(paths: Iterable[Path]) -> list[Path]:
    """Log files in the order they were written: by modification time, then path (a resumed
    run's later file last)."""
    return [p for _, _, p in sorted((p.stat().st_mtime_ns, p.as_posix(), p) for p in paths)]


def merged_series(
    pieces: Iterable[tuple[str, str, Sequence[float], Sequence[float]]],
) -> dict[str, Series]:
    """Series from ``(name, source, steps, values)`` pieces in merge order: a name's pieces
    joined (a later piece winning on a repeated step, as in :func:`from_columns`), its
    sources listed in that order; names in sorted order."""
    joined: dict[str, tuple[list[float], list[float], list[str]]] = {}
    for name, source, steps, values in pieces:
        into = joined.setdefault(name, ([], [], []))
        into[0].extend(steps)
        into[1].extend(values)
        into[2].append(source)
    out = {}
    for name in sorted(joined):
        steps, values, sources = joined[name]
        series = from_columns(name, ", ".join(sources), steps, values)
        if series is not None:
            out[name] = series
    return out
