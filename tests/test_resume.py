"""Sweeps that survive: resume, re-runs, the sweep lock, interrupts and a killed parent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import NO_REPORT, SLEEPING_ENV, TINY, results, run_cli

# Jobs of about 4 s (256 vector steps) that leave the CPU to the rest of the suite, so a
# sweep can be interrupted while its jobs run.
SLOW = (*SLEEPING_ENV, "train.total_steps=2048", "eval.every_steps=1024", "eval.episodes=2")
# In the sweep's own process: for tests of what a sweep skips and runs again, whatever
# runs its jobs (worker processes would only add their start-up).
SERIAL = "launcher=serial"


def fingerprints(sweep_dir: Path) -> dict[str, str]:
    return {name: str(r["state_sha256"]) for name, r in results(sweep_dir).items()}


def test_extending_the_grid_runs_only_the_new_jobs(workdir: Path) -> None:
    first = run_cli(["-m", "seed=range(2)", SERIAL, *TINY], workdir)
    assert first.returncode == 0, first.stderr[-2000:]
    sweep = workdir / "multirun" / "default"
    before = {p: p.stat().st_mtime_ns for p in sweep.glob("*/result.json")}
    second = run_cli(["-m", "seed=range(4)", SERIAL, *TINY], workdir)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "2 of 4 jobs already complete (skipped), 2 to run" in second.stderr
    assert "[rlsweep] 2/2 done" in second.stderr
    # The first two were not touched; the summary covers all four.
    assert {p: p.stat().st_mtime_ns for p in before} == before
    assert sorted(r["replicate"] for r in results(sweep).values()) == [0, 1, 2, 3]
    cells = json.loads((sweep / "summary.json").read_text())["cells"]
    assert cells[0]["completed"] == 4
    # rerun=all runs everything again, with the same results.
    third = run_cli(["-m", "seed=range(4)", "rerun=all", SERIAL, *TINY], workdir)
    assert third.returncode == 0 and "[rlsweep] 4/4 done" in third.stderr
    assert all(p.stat().st_mtime_ns != t for p, t in before.items())


def test_results_of_other_settings_are_never_mixed_with_new_ones(
    workdir: Path, tmp_path: Path
) -> None:
    experiment = tmp_path / "myconf" / "experiment" / "mine.yaml"
    experiment.parent.mkdir(parents=True)
    header = "# @package _global_\nname: mine\n"
    experiment.write_text(header + "agent:\n  learning_rate: 0.001\n")
    args = [
        "--config-dir",
        str(tmp_path / "myconf"),
        "-m",
        "+experiment=mine",
        SERIAL,
        *TINY,
        NO_REPORT,
    ]
    assert run_cli([*args, "seed=range(2)"], workdir).returncode == 0
    sweep = workdir / "multirun" / "mine"
    before = fingerprints(sweep)
    mtimes = {p: p.stat().st_mtime_ns for p in sweep.glob("*/result.json")}
    # The experiment file changes a setting: the same command refuses to skip the old jobs.
    experiment.write_text(header + "agent:\n  learning_rate: 0.0005\n")
    refused = run_cli([*args, "seed=range(2)"], workdir)
    assert refused.returncode != 0
    assert "2 of the 2 completed jobs" in refused.stderr
    assert "agent.learning_rate: 0.001 then, 0.0005 now" in refused.stderr
    assert "rerun=all" in refused.stderr and "Traceback" not in refused.stderr
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes
    # A setting the numbers do not depend on is no change: the jobs are skipped.
    experiment.write_text(
        header + "agent:\n  learning_rate: 0.001\ntrain:\n  checkpoint_every_s: 0\n"
    )
    same = run_cli([*args, "seed=range(3)"], workdir)
    assert same.returncode == 0, same.stderr[-2000:]
    assert "2 of 3 jobs already complete (skipped), 1 to run" in same.stderr
    assert {k: v for k, v in fingerprints(sweep).items() if k in before} == before


def test_failed_jobs_run_again_and_rerun_failed_runs_only_them(
    workdir: Path, tmp_path: Path
) -> None:
    trigger = tmp_path / "broken"
    trigger.touch()
    args = [
        "-m", "env=fault", "env.kwargs.fault_replicates=[1]", f"env.kwargs.trigger_file={trigger}",
        "seed=range(3)", SERIAL, *TINY, NO_REPORT,
    ]  # fmt: skip
    assert run_cli(args, workdir).returncode != 0
    sweep = workdir / "multirun" / "default"
    assert len(results(sweep)) == 2
    # "Fix the bug" and run the same command: only the failed job runs, and succeeds.
    trigger.unlink()
    again = run_cli([*args, "rerun=failed"], workdir)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "2 of 3 jobs already complete (skipped), 1 to run" in again.stderr
    assert sorted(r["replicate"] for r in results(sweep).values()) == [0, 1, 2]
    assert not list(sweep.glob("*/error.txt"))


def test_a_second_sweep_into_the_same_directory_is_refused(workdir: Path) -> None:
    first = subprocess.Popen(
        [sys.executable, "-m", "rlsweep", "-m", "seed=range(2)", SERIAL, *SLOW, NO_REPORT],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        lock = workdir / "multirun" / "default" / ".rlsweep.lock"
        deadline = time.monotonic() + 60
        while not (lock.exists() and lock.read_text()):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        second = run_cli(["-m", "seed=range(2)", *TINY], workdir)
        assert second.returncode != 0
        assert "Another sweep is already running into" in second.stderr
        assert f"pid {first.pid}" in second.stderr
    finally:
        first.kill()
        first.wait()


def _our_processes(marker: str) -> list[int]:
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker.encode() in environ.read_bytes():
                pids.append(int(environ.parent.name))
        except OSError:
            continue
    return pids


@pytest.fixture(scope="module", autouse=True)
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Future[dict[str, str]]]:
    """Fingerprints of an uninterrupted sweep of seed=range(4), run serially in the
    background from the module's first test on (its jobs mostly sleep), for the tests that
    interrupt their own sweeps on joblib: the numbers must not depend on which ran them."""
    work = tmp_path_factory.mktemp("reference")

    def run() -> dict[str, str]:
        proc = run_cli(["-m", "seed=range(4)", SERIAL, *SLOW, NO_REPORT], work)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return fingerprints(work / "multirun" / "default")

    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(run)


def _start_and_wait_for_running_jobs(
    workdir: Path, grid: list[str], env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlsweep", *grid],
        cwd=workdir,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sweep = workdir / "multirun" / "default"
    deadline = time.monotonic() + 120
    while len(list(sweep.glob("*/metrics.csv"))) < 2:  # two jobs are running
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    time.sleep(1.0)
    return proc


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
def test_interrupt_stops_cleanly_and_resume_matches_an_uninterrupted_sweep(
    workdir: Path, signum: int, code: int, reference: Future[dict[str, str]]
) -> None:
    marker = f"rlsweep-test-{uuid.uuid4()}"
    grid = ["-m", "seed=range(4)", *SLOW, NO_REPORT]
    proc = _start_and_wait_for_running_jobs(workdir, grid, {"RLSWEEP_TEST_MARKER": marker})
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code
    assert "Run the same command again to resume" in err
    if signum == signal.SIGHUP:  # an ssh session dropped: said as such
        assert "[rlsweep] hung up (SIGHUP: its terminal or ssh session closed)" in err
    time.sleep(0.5)
    assert _our_processes(marker) == []  # no orphan workers
    sweep = workdir / "multirun" / "default"
    assert len(results(sweep)) < 4
    if signum == signal.SIGINT:  # resuming is the same after either signal: check it once
        resumed = run_cli(grid, workdir)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert fingerprints(sweep) == reference.result()


def test_parent_killed_with_sigkill_then_the_same_command_completes(
    workdir: Path, reference: Future[dict[str, str]]
) -> None:
    marker = f"rlsweep-test-{uuid.uuid4()}"
    grid = ["-m", "seed=range(4)", *SLOW, NO_REPORT]
    proc = _start_and_wait_for_running_jobs(workdir, grid, {"RLSWEEP_TEST_MARKER": marker})
    proc.kill()
    proc.communicate(timeout=30)  # returns once the orphaned workers have exited too
    deadline = time.monotonic() + 10
    while _our_processes(marker):  # the workers notice their parent is gone and exit
        assert time.monotonic() < deadline, "workers outlived their killed parent"
        time.sleep(0.2)
    resumed = run_cli(grid, workdir, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert fingerprints(workdir / "multirun" / "default") == reference.result()


def test_ctrl_c_while_a_large_grid_is_checked_prints_the_short_message(tmp_path: Path) -> None:
    """Interrupted while its 20,000 jobs are checked (after the first, when the pool's
    workers start booting): exit 130, one short message, no traceback, nothing written."""
    app = Path(__file__).parent / "apps" / "plain" / "app.py"
    trace = tmp_path / "trace.txt"
    args = [sys.executable, str(app), "-m", "seed=range(20000)", "hydra.sweep.dir=sweep"]
    proc = subprocess.Popen(
        args,
        cwd=tmp_path,
        env={**os.environ, "RLSWEEP_TRACE": str(trace)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while "workers-starting" not in (trace.read_text() if trace.exists() else ""):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert (
        "[rlsweep] interrupted while checking the sweep's jobs: nothing was run or written." in err
    )
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 3, err
    assert not list((tmp_path / "sweep").glob("*/result.json"))
