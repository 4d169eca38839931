"""Adaptive comparisons (``compare.rounds=N``) of a tiny app, run as a user would.

The app (tests/apps/compare) scores ``mean`` plus a standard normal draw from its shared seed
(common random numbers): at the same replicate, arms with means 0 and 10 differ by exactly
10, and arms with equal means score exactly the same. So the outcomes are hand-checkable:
with 4 replicates a round there are C(8, 4) = 70 splits of a round, the smallest p-value of
round 1 is 2/70 > 0.05/4 (no decision), and of round 2 is 2/4900 < 0.05/2 (a decision); a
pair of equal arms has T = 0 at every round and ends "equal" at the last.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from conftest import run_python

APP = Path(__file__).parent / "apps" / "compare" / "app.py"
SERIAL = "rlsweep=serial"
JOBLIB = "hydra.launcher.n_jobs=2"


def run_app(
    args: Sequence[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python tests/apps/compare/app.py -m ARGS`` in ``cwd`` (never raises)."""
    cwd.mkdir(parents=True, exist_ok=True)
    return run_python([str(APP), "-m", *args], cwd, env=env, timeout=120)


def record(cwd: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((cwd / "multirun" / "app" / "compare.json").read_text())
    return data


def executed(log: Path) -> list[str]:
    return sorted(log.read_text().split()) if log.exists() else []


def job_dirs(cwd: Path) -> list[str]:
    return sorted(p.name for p in (cwd / "multirun" / "app").iterdir() if p.is_dir())


def test_different_arms_decided_early_same_on_any_launcher_and_resumed(tmp_path: Path) -> None:
    """Means 0 and 10: decided ("smaller") at round 2, 8 seeds each of a fixed-N's 16, the
    same serially and under joblib; a second run runs nothing and writes the same file; a
    grid seed=range(16) in the same directory runs only the 16 replicates not needed."""
    args = ["mean=0,10", "compare.rounds=4"]
    with ThreadPoolExecutor(2) as pool:
        serial = pool.submit(run_app, [*args, SERIAL], tmp_path / "serial")
        joblib = pool.submit(run_app, [*args, JOBLIB], tmp_path / "joblib")
        procs = {"serial": serial.result(), "joblib": joblib.result()}
    for name, proc in procs.items():
        assert proc.returncode == 0, (name, proc.stderr[-3000:])
    got = record(tmp_path / "serial")
    assert record(tmp_path / "joblib") == {**got, "overrides": []}  # less rlsweep=serial
    assert (got["status"], got["metric"], got["rounds_run"]) == ("decided", "score", 2)
    assert got["pairs"] == [{"a": "mean=0", "b": "mean=10", "decision": "smaller", "round": 2}]
    assert [a["seeds_spent"] for a in got["arms"]] == [8, 8]
    assert (got["seeds_spent"], got["fixed_n_per_arm"], got["fixed_n_total"]) == (16, 16, 32)
    low, high = (a["scores"] for a in got["arms"])
    assert [round(h - lo, 9) for lo, h in zip(low, high, strict=True)] == [10.0] * 8
    assert "mean=0 vs mean=10 | mean=0 < mean=10" in procs["serial"].stderr
    assert "16 spent; a fixed-N design runs 32" in procs["serial"].stderr
    report = (tmp_path / "serial" / "multirun" / "app" / "report.md").read_text()
    assert "## Adaptive comparison (AdaStop)" in report
    assert "Seeds spent: 16 of a fixed-N design's 32 (50%)." in report
    # the comparison's jobs are a plain grid's jobs: compare.rounds is not in them
    assert job_dirs(tmp_path / "serial") == sorted(
        f"mean={m},seed={s}" for m in (0, 10) for s in range(8)
    )

    log = tmp_path / "executions.log"
    env = {"COMPARE_APP_LOG": str(log)}
    before = (tmp_path / "serial" / "multirun" / "app" / "compare.json").read_bytes()
    again = run_app([*args, SERIAL], tmp_path / "serial", env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert executed(log) == []
    assert "16 job(s) already complete (skipped), 0 run" in again.stderr
    assert (tmp_path / "serial" / "multirun" / "app" / "compare.json").read_bytes() == before

    grid = run_app(["mean=0,10", "seed=range(16)", SERIAL], tmp_path / "serial", env=env)
    assert grid.returncode == 0, grid.stderr[-3000:]
    assert executed(log) == sorted(f"mean={m},seed={s}" for m in (0, 10) for s in range(8, 16))


def test_an_app_that_only_logs_its_score_is_compared_on_the_series_last_value(
    tmp_path: Path,
) -> None:
    """log_only=true: the app returns nothing and logs its score as TorchRL's CSVLogger does
    (``logs/scalars/eval/score.csv``, an earlier value first); compare.metric=eval/score
    compares each job's last logged value: the comparison of the returned score."""
    args = ["mean=0,10", "compare.rounds=4", SERIAL, "log_only=true", "compare.metric=eval/score"]
    proc = run_app(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = record(tmp_path)
    assert (got["status"], got["metric"], got["rounds_run"]) == ("decided", "eval/score", 2)
    assert got["pairs"] == [{"a": "mean=0", "b": "mean=10", "decision": "smaller", "round": 2}]
    for arm, mean in zip(got["arms"], (0, 10), strict=True):
        jobs = [tmp_path / "multirun" / "app" / f"mean={mean},seed={s}" for s in range(8)]
        lines = [(j / "logs" / "scalars" / "eval" / "score.csv").read_text() for j in jobs]
        assert arm["scores"] == [float(text.split()[-1].split(",")[1]) for text in lines]
        assert all(not (j / "result.json").read_text().count('"score"') for j in jobs)


def test_equal_arms_end_equal_at_the_maximum(tmp_path: Path) -> None:
    """Four arms (arm a, b x mean 0, 10): the pairs of equal means are "equal" after the 4th
    round, every other pair is decided at round 2; every arm stays in an undecided pair, so
    each runs all 16 replicates."""
    proc = run_app(["arm=a,b", "mean=0,10", "compare.rounds=4", SERIAL], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = record(tmp_path)
    assert (got["status"], got["rounds_run"], got["seeds_spent"]) == ("decided", 4, 64)
    decisions = {(p["a"], p["b"]): (p["decision"], p["round"]) for p in got["pairs"]}
    assert decisions == {
        ("arm=a,mean=0", "arm=a,mean=10"): ("smaller", 2),
        ("arm=a,mean=0", "arm=b,mean=0"): ("equal", 4),
        ("arm=a,mean=0", "arm=b,mean=10"): ("smaller", 2),
        ("arm=a,mean=10", "arm=b,mean=0"): ("larger", 2),
        ("arm=a,mean=10", "arm=b,mean=10"): ("equal", 4),
        ("arm=b,mean=0", "arm=b,mean=10"): ("smaller", 2),
    }
    assert [a["seeds_spent"] for a in got["arms"]] == [16] * 4
    assert re.search(r"\| arm=a,mean=0 vs arm=b,mean=0 +\| no difference shown +\| 4 ", proc.stderr)


def test_a_failed_job_stops_the_comparison_and_a_rerun_decides(tmp_path: Path) -> None:
    """Replicate 5 of mean=10 fails: round 2 is not analysed, the sweep exits 1 naming the
    job, compare.json says so; run again (the failure gone), only that job runs and the
    comparison decides as if nothing had failed."""
    args = ["mean=0,10", "compare.rounds=4", SERIAL]
    failing = run_app(args, tmp_path, env={"COMPARE_APP_FAIL": "10:5"})
    assert failing.returncode == 1, failing.stderr[-3000:]
    assert "planned failure of mean=10 at replicate 5" in failing.stderr
    assert "Stopped: the job rlsweep=serial mean=10 seed=5 failed" in failing.stderr
    got = record(tmp_path)
    assert (got["status"], got["rounds_run"], got["seeds_spent"]) == ("failed", 1, 8)
    assert got["pairs"][0]["decision"] == "undecided"
    assert got["failed_jobs"][0]["overrides"] == [SERIAL, "mean=10", "seed=5"]
    report = (tmp_path / "multirun" / "app" / "report.md").read_text()
    assert "Stopped: the job `rlsweep=serial mean=10 seed=5` failed" in report

    log = tmp_path / "executions.log"
    rerun = run_app(args, tmp_path, env={"COMPARE_APP_LOG": str(log)})
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert executed(log) == ["mean=10,seed=5"]
    got = record(tmp_path)
    assert (got["status"], got["rounds_run"], got["failed_jobs"]) == ("decided", 2, [])
    assert got["pairs"][0]["decision"] == "smaller"


def test_wrong_settings_are_refused_naming_the_key(tmp_path: Path) -> None:
    cases = {
        "seed": (["mean=0,10", "seed=range(4)", "compare.rounds=4"], "sets the replicate key"),
        "one arm": (["mean=0", "compare.rounds=4"], "the sweep has one arm"),
        "unknown": (["mean=0,10", "compare.rounds=4", "+compare.when=1"], "'compare.when'"),
        "interval": (["mean=interval(0,1)", "compare.rounds=2"], "over a range of values"),
        "rounds": (["mean=0,10", "compare.rounds=0"], "compare.rounds must be an integer"),
        "metric": (["mean=0,10", "compare.rounds=4", "compare.metric=loss"], "compare.metric"),
    }
    with ThreadPoolExecutor(3) as pool:
        futures = {
            name: pool.submit(run_app, [*args, SERIAL], tmp_path / name.replace(" ", "_"))
            for name, (args, _) in cases.items()
        }
        procs = {name: f.result() for name, f in futures.items()}
    for name, (_, expected) in cases.items():
        proc = procs[name]
        assert proc.returncode != 0, name
        assert expected in proc.stderr, (name, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, (name, proc.stderr[-2000:])
    assert "compare.per_round" in procs["seed"].stderr
    assert "(its numbers: score)" in procs["metric"].stderr
    assert "returned no number and logged no series by that name" in procs["metric"].stderr
