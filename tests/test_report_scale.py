"""The report of a hyperparameter grid scales with it (issue 31, item 0): 1,000 groups of one
replicate and 100 groups of five, each summarised and reported in a fresh process within 10 s
of CPU time and 500 MB of peak memory, its pairwise sections bounded and said so.

The job directories are written as rlsweep's launcher leaves them for a trivial app swept
over ``x=range(N)`` and ``seed=range(R)`` (bench/report_scale.py, which also times a real
sweep end to end). CPU time, not wall time: the suite runs on busy machines, where the wall
time of the same work varies with the load; the benchmark gives the wall times.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rlsweep.report import files
from rlsweep.report.html import markdown_tables

BENCH = Path(__file__).resolve().parent.parent / "bench" / "report_scale.py"
# CPU seconds and peak resident MB of the process that writes the summary and report. The
# peak is the kernel's high-water mark of this program's memory (VmHWM): getrusage's
# ru_maxrss would start from the parent's peak (Linux carries it across fork and exec, and
# the test process that starts this one may hold far more than 500 MB after other tests).
MEASURE = """
import re, resource, sys
from pathlib import Path
from rlsweep.summary import summarize
summarize(Path(sys.argv[1]), echo=False)
usage = resource.getrusage(resource.RUSAGE_SELF)
hwm = re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text())
print(usage.ru_utime + usage.ru_stime, int(hwm.group(1)) / 1024)
"""


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("report_scale", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def summarized(sweep: Path) -> tuple[float, float]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(sweep)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cpu, peak = done.stdout.split()[-2:]
    return float(cpu), float(peak)


def table(text: str, first_cell: str) -> list[list[str]]:
    """The rows of report.md's table whose header starts with ``first_cell``."""
    (found,) = [t for t in markdown_tables(text) if t[0][0] == first_cell]
    return found[1:]


@pytest.mark.parametrize(("groups", "replicates"), [(1000, 1), (100, 5)])
def test_a_grid_is_reported_within_10_s_and_500_mb(
    tmp_path: Path, groups: int, replicates: int
) -> None:
    sweep = bench().write_grid(tmp_path / "sweep", groups, replicates)
    cpu, peak = summarized(sweep)
    assert cpu <= 10.0 and peak <= 500.0, (cpu, peak)
    text = (sweep / "report.md").read_text()
    # Every group once, sorted by its value (x=2 before x=10); the top groups by IQM (the
    # score grows with x, give or take 0.1: the best are among the highest x).
    rows = table(text, "group")
    assert [r[0] for r in rows] == [f"x={x}" for x in range(groups)]
    top = table(text, "rank")
    assert len(top) == 10 and {r[1] for r in top} <= {f"x={x}" for x in range(groups - 20, groups)}
    assert "## The metric against each swept key" in text
    assert (sweep / files.KEYS_PNG).is_file()
    if replicates == 1:
        # Nothing pairwise between single runs; said so.
        assert "1000 group(s) with fewer than two runs are left out" in text
        assert "P(x=" not in text and " − x=" not in text
        assert not (sweep / files.IMPROVEMENT_PNG).exists()
    else:
        # The 8 best groups compared pairwise: 28 pairs, the rest left out and said so.
        assert "Compared: the 8 groups of highest IQM among the 100 with two runs or more" in text
        assert len(table(text, "comparison")) == 28 and len(table(text, "A − B")) == 28
        assert "Holm p (28 tests)" in text
    assert (sweep / "report.html").stat().st_size < 3_000_000
