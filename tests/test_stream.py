"""Streaming launches (``launch_stream``): jobs released while the launch runs start as soon
as a worker is free, on every executor.

The app (tests/apps/stream) records when each job starts and ends; its sweeper, a search
stand-in, releases jobs from a plan as jobs end and records each ``more`` call and the
launch's returns. Each test runs the app as a user would, in a subprocess.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import run_python
from test_slurm import array_ids, cluster  # noqa: F401  (cluster: the fixture)

APP = Path(__file__).parent / "apps" / "stream" / "app.py"

# The long job holds one of the two workers while the chain a -> b, c -> d, e runs on
# the other: no job waits for the first batch to end. It lasts until d has started (120 s
# at most): with a barrier, b and d could only start after it ends.
PLAN: dict[str, Any] = {
    "start": [["name=long", "until=d", "sleep_s=120"], ["name=a"]],
    "releases": {"a": [["name=b"], ["name=c", "fail=true"]], "b": [["name=d"]], "c": [["name=e"]]},
}


def name_of(overrides: list[str]) -> str:
    return next(o.split("=", 1)[1] for o in overrides if o.startswith("name="))


def stream(
    plan: dict[str, Any], cwd: Path, *args: str
) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """Run the app's streaming sweep of ``plan``: the sweeper's record, the jobs' start and
    end events, and the run's stderr."""
    (cwd / "plan.json").write_text(json.dumps(plan))
    env = {
        "STREAM_PLAN": str(cwd / "plan.json"),
        "STREAM_RECORD": str(cwd / "record.json"),
        "STREAM_LOG": str(cwd / "events.jsonl"),
    }
    proc = run_python([str(APP), "-m", *args], cwd, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((cwd / "record.json").read_text())
    events = [json.loads(line) for line in (cwd / "events.jsonl").read_text().splitlines()]
    return record, events, proc.stderr


def check_contract(plan: dict[str, Any], record: dict[str, Any]) -> None:
    """``more`` once per job (failed ones included), from the sweep's main thread, with the
    job's final status; the returns: the first jobs in input order, then the released ones
    in release order."""
    released = [name_of(o) for jobs in plan["releases"].values() for o in jobs]
    first = [name_of(o) for o in plan["start"]]
    calls = record["calls"]
    assert sorted(c["name"] for c in calls) == sorted(first + released)
    assert all(c["main_thread"] for c in calls)
    assert sorted(record["released"]) == sorted(released)
    returns = record["returns"]
    assert [name for name, _ in returns] == first + record["released"]
    assert {c["name"]: c["status"] for c in calls} == dict(returns)
    failing = {name_of(o) for jobs in plan["releases"].values() for o in jobs if "fail=true" in o}
    failing |= {name_of(o) for o in plan["start"] if "fail=true" in o}
    assert {name for name, status in returns if status == "FAILED"} == failing


def times(events: list[dict[str, Any]], event: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for e in events:
        if e["event"] == event:
            out.setdefault(e["name"], []).append(e["t"])
    return out


def test_joblib_starts_released_jobs_while_the_first_batch_runs(workdir: Path) -> None:
    """Two loky workers; job c fails on both of its attempts (retries=1)."""
    record, events, _ = stream(PLAN, workdir, "hydra.launcher.retries=1")
    check_contract(PLAN, record)
    starts, ends = times(events, "start"), times(events, "end")
    runs = Counter({name: len(t) for name, t in starts.items()})
    assert runs == {"long": 1, "a": 1, "b": 1, "c": 2, "d": 1, "e": 1}
    # No barrier: released jobs (and theirs) started while the long first job still ran.
    (long_end,) = ends["long"]
    assert starts["b"][0] < long_end and starts["d"][0] < long_end
    # c was handed to `more` once, after its retry, with its final (failed) outcome.
    (c_call,) = [c for c in record["calls"] if c["name"] == "c"]
    assert c_call["t"] > max(ends["c"]) and c_call["status"] == "FAILED"
    attempts = (workdir / "multirun/stream/fail=true,name=c/attempts.jsonl").read_text()
    assert [json.loads(line)["outcome"] for line in attempts.splitlines()] == ["failed"] * 2


def test_serial_runs_released_jobs_in_its_loop_and_counts_them(workdir: Path) -> None:
    plan = {**PLAN, "start": [["name=long"], ["name=a"]]}
    record, events, stderr = stream(
        plan, workdir, "hydra.launcher.executor=serial", "hydra.launcher.progress=true"
    )
    check_contract(plan, record)
    order = ["long", "a", "b", "c", "d", "e"]
    assert [c["name"] for c in record["calls"]] == order
    assert [e["name"] for e in events if e["event"] == "start"] == order  # each job once
    assert "[rlsweep] 5/6 done | 1 failed | 0 running | 0 queued" in stderr  # the total grew


@pytest.mark.slurm
@pytest.mark.usefixtures("cluster")
def test_slurm_submits_released_jobs_as_further_arrays(workdir: Path) -> None:
    """The test cluster's MaxArraySize is 5: six jobs released at once go as arrays of at
    most five; a failed job's release runs too."""
    plan = {
        "start": [["name=a"], ["name=f", "fail=true"]],
        "releases": {"a": [[f"name=c{i}"] for i in range(6)], "f": [["name=g"]]},
    }
    record, events, _ = stream(plan, workdir, "hydra.launcher.executor=slurm")
    check_contract(plan, record)
    runs = Counter(e["name"] for e in events if e["event"] == "start")
    assert runs == {name: 1 for name in ["a", "f", "g", *(f"c{i}" for i in range(6))]}
    sweep = workdir / "multirun" / "stream"
    arrays = array_ids(sweep)
    assert len(arrays) >= 3  # the first jobs', then at least two for the seven released
    tasks = Counter(p.name.split("_")[0] for p in sweep.glob(".submitit/*/*_*") if p.is_dir())
    assert max(tasks.values()) <= 5
