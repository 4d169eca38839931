"""A job's processes end with it: a job that fails (or completes) with sub-processes still
running is recorded, its sub-processes ended, and the sweep exits within seconds, on the
pool and serially (tests/apps/children: non-daemon children sleeping 300 s)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import NO_REPORT, run_python

APP = Path(__file__).parent / "apps" / "children" / "app.py"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


@pytest.mark.parametrize(
    ("launcher", "start", "fail"),
    [("joblib", "spawn", True), ("serial", "spawn", True), ("serial", "fork", False)],
)
def test_the_processes_a_job_leaves_running_end_with_it(
    tmp_path: Path, launcher: str, start: str, fail: bool
) -> None:
    began = time.monotonic()
    args = [str(APP), "-m", f"+rlsweep={launcher}", f"start={start}", f"fail={fail}"]
    proc = run_python([*args, "hydra.sweep.dir=sweep", NO_REPORT], tmp_path, timeout=120)
    elapsed = time.monotonic() - began
    assert proc.returncode == (1 if fail else 0), proc.stderr[-3000:]
    assert elapsed < 60, f"the sweep took {elapsed:.0f} s: it waited for the job's children"
    job_dir = next((tmp_path / "sweep").glob("*/children.txt")).parent
    pids = [int(p) for p in (job_dir / "children.txt").read_text().split()]
    assert len(pids) == 2 and not [p for p in pids if alive(p)]
    if fail:
        assert "1 of 1 jobs failed" in proc.stderr
        assert (
            "planned failure with sub-processes still running"
            in (job_dir / "error.txt").read_text()
        )
    log = "".join(p.read_text() for p in job_dir.glob("*.log")) + proc.stderr
    assert "ended 2 sub-process(es) the job left running" in log
