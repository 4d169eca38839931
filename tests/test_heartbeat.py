"""The progress line in a log (stderr not a terminal, as under CI or in SLURM's output
file): a heartbeat line naming the running jobs every RLSWEEP_HEARTBEAT_S seconds while
nothing changes, and the final line once, on every executor. Real sweeps of the plain app
(tests/apps/plain), whose jobs sleep PLAIN_APP_SLEEP_S seconds."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import NO_REPORT, run_python

APP = Path(__file__).parent / "apps" / "plain" / "app.py"


def sweep(
    executor: str, cwd: Path, heartbeat: str = "1", sleep: str = "4"
) -> subprocess.CompletedProcess[str]:
    env = {"RLSWEEP_HEARTBEAT_S": heartbeat, "PLAIN_APP_SLEEP_S": sleep}
    args = [str(APP), "-m", "x=1,2", f"rlsweep={executor}", NO_REPORT]
    return run_python(args, cwd, env=env)


def progress_lines(stderr: str) -> list[str]:
    return [
        line for line in stderr.splitlines() if line.startswith("[rlsweep] ") and " done | " in line
    ]


@pytest.mark.parametrize("executor", ["submitit_local", "serial", "joblib"])
def test_a_log_gets_heartbeats_naming_what_runs_and_the_final_line_once(
    executor: str, tmp_path: Path
) -> None:
    proc = sweep(executor, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = progress_lines(proc.stderr)
    beats = [line for line in lines if " | running: " in line]
    # 4 s of each job at one line a second (two jobs at once, or one after the other).
    assert len(beats) >= 3, proc.stderr
    for line in beats:
        names = line.split(" | running: ", 1)[1].split(", ")
        assert names and set(names) <= {"x=1", "x=2"}, line
    final = [line for line in lines if line.startswith("[rlsweep] 2/2 done | 0 failed")]
    assert len(final) == 1, proc.stderr
    assert lines[-1] == final[0]


def test_no_heartbeat_when_it_is_off(tmp_path: Path) -> None:
    proc = sweep("serial", tmp_path, heartbeat="0", sleep="1.5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = progress_lines(proc.stderr)
    assert not [line for line in lines if " | running: " in line], proc.stderr
    assert sum(line.startswith("[rlsweep] 2/2 done") for line in lines) == 1


def test_a_bad_heartbeat_interval_is_refused(tmp_path: Path) -> None:
    proc = sweep("serial", tmp_path, heartbeat="soon", sleep="0")
    assert proc.returncode != 0
    assert "RLSWEEP_HEARTBEAT_S='soon'" in proc.stderr and "a number >= 0" in proc.stderr
    assert "Traceback" not in proc.stderr
