"""What each benchmark reports to ``bench/all.py``: one record per measured figure, written
as JSON by the benchmark's ``--json FILE`` and read back to print every ratio side by side."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Figure:
    bench: str  # the benchmark's script, without .py
    figure: str  # what was measured, with its unit
    rlsweep: float
    anchor: float | None  # the anchor's value measured in the same run (None: no anchor)
    anchor_name: str  # what the anchor is ("" without one)
    lower_is_better: bool  # a time (True) or a rate (False)
    goal: str  # issue 19's goal for this figure, as text
    met: bool | None  # whether the goal is met (None: no goal)
    # rlsweep / anchor; a benchmark that pairs its runs gives the median of the pairs' ratios.
    ratio: float | None = None

    def __post_init__(self) -> None:
        if self.ratio is None and self.anchor:
            self.ratio = self.rlsweep / self.anchor


def write(path: Path | None, figures: list[Figure]) -> None:
    """Write ``figures`` to ``path`` (nothing when None: the benchmark was run alone)."""
    if path is not None:
        path.write_text(json.dumps([dataclasses.asdict(f) for f in figures], indent=1))


def read(path: Path) -> list[Figure]:
    return [Figure(**record) for record in json.loads(path.read_text())]
