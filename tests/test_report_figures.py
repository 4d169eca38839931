"""The figures of a report draw the very numbers of its tables: no randomness of their own.

Before the report became a package, the probability-of-improvement plot drew its own
bootstrap (another seed), so its intervals disagreed with report.md's table.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from test_report import paired_sweep
from test_report_any_app import two_groups

from rlsweep.report import build, figures, files
from rlsweep.report.analysis import ImprovementStats

if TYPE_CHECKING:  # matplotlib is imported by the tests that draw, not at collection
    from matplotlib.figure import Figure

REPS = 300


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> dict[str, Figure]:
    """The figures the report writes, by file name."""
    written: dict[str, Figure] = {}

    def keep(figure: Figure, path: Path) -> None:
        written[path.name] = figure
        files.write_png(figure, path)

    monkeypatch.setattr(figures, "write_png", keep)
    return written


def assert_draws(figure: Figure, improvements: tuple[ImprovementStats, ...]) -> None:
    """One row per P(X > Y) of the table, its bar from the table's low to its high, its
    mark at the table's estimate: to the bit."""
    from matplotlib.collections import LineCollection

    ax = figure.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"P({p.x} > {p.y})" for p in improvements]
    marks = ax.get_lines()[: len(improvements)]
    for p, bar, mark in zip(improvements, ax.collections, marks, strict=True):
        assert isinstance(bar, LineCollection)
        (segment,) = bar.get_segments()
        assert (segment[0][0], segment[1][0]) == (p.low, p.high)
        assert np.asarray(mark.get_xdata()).tolist() == [p.point]


def test_the_drawn_probability_of_improvement_is_the_tables(
    tmp_path: Path, drawn: dict[str, Figure]
) -> None:
    paired_sweep(tmp_path)
    rep = build.write_report([tmp_path], reps=REPS)
    assert len(rep.improvements) == 3
    assert_draws(drawn[files.IMPROVEMENT_PNG], rep.improvements)
    for p in rep.improvements:  # the same numbers in report.md
        (row,) = [line for line in rep.text.splitlines() if line.startswith(f"| P({p.x} > {p.y})")]
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1:] == [f"{p.point:.3f}", f"[{p.low:.3f}, {p.high:.3f}]"]
    assert (tmp_path / files.IMPROVEMENT_PNG).read_bytes()[:4] == b"\x89PNG"


def test_any_apps_drawn_probability_of_improvement_is_the_tables(
    tmp_path: Path, drawn: dict[str, Figure]
) -> None:
    two_groups(tmp_path)
    (tmp_path / "algo=b,seed=2" / "result.json").unlink()  # an incomplete run: b has 2
    rep = build.write_report([tmp_path], reps=REPS)
    (p,) = rep.improvements
    assert 0.0 <= p.low <= p.point <= p.high <= 1.0
    assert_draws(drawn[files.IMPROVEMENT_PNG], rep.improvements)
