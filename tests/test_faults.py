"""One bad job never takes the others down: exceptions, killed workers, hangs, retries."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import NO_REPORT, TINY, results, run_cli
from test_determinism import fingerprint

from rlsweep.store import read_sweep

FAULTY = ["-m", "env=fault", "env.kwargs.fault_replicates=[1]", "seed=range(4)", *TINY, NO_REPORT]


def failed_dir(sweep: Path) -> Path:
    (record,) = [r for r in read_sweep(sweep) if r.replicate == 1]
    return record.path


def attempts(job_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (job_dir / "attempts.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    ("fault", "expected"),
    [("sigkill", "exit code {SIGKILL(-9)}"), ("exit", "exit code {EXIT(3)}")],
)
def test_a_killed_worker_fails_only_its_job_and_the_pool_recovers(
    workdir: Path, fault: str, expected: str
) -> None:
    proc = run_cli([*FAULTY, f"env.kwargs.fault={fault}"], workdir)
    assert proc.returncode != 0
    sweep = workdir / "multirun" / "default"
    # Every other job completed, including those queued after the crash.
    assert sorted(r["replicate"] for r in results(sweep).values()) == [0, 2, 3]
    job = failed_dir(sweep)
    error = (job / "error.txt").read_text()
    assert "worker process died while running this job" in error and expected in error
    assert attempts(job)[-1]["outcome"] == "crashed"
    assert "[rlsweep] 3/4 done | 1 failed" in proc.stderr
    assert "1 of 4 jobs failed" in proc.stderr


def test_a_hanging_job_is_killed_at_its_time_limit(workdir: Path) -> None:
    """The limit is 40 s: with 12 s, a slower CPU (an Intel Xeon at 2.5 GHz) beside 4 busy
    processes timed out the jobs that do not hang too, whose workers were still importing
    torch; the hung job's worker sleeps meanwhile."""
    start = time.monotonic()
    proc = run_cli([*FAULTY, "env.kwargs.fault=hang", "hydra.launcher.job_timeout_s=40"], workdir)
    assert time.monotonic() - start < 240
    assert proc.returncode != 0
    sweep = workdir / "multirun" / "default"
    assert sorted(r["replicate"] for r in results(sweep).values()) == [0, 2, 3]
    job = failed_dir(sweep)
    assert "timed out" in (job / "error.txt").read_text()
    assert [a["outcome"] for a in attempts(job)] == ["timed_out"]


def test_retries_run_a_failing_job_again_and_log_every_attempt(workdir: Path) -> None:
    proc = run_cli([*FAULTY, "env.kwargs.fault=raise", "hydra.launcher.retries=2"], workdir)
    assert proc.returncode != 0
    job = failed_dir(workdir / "multirun" / "default")
    log = attempts(job)
    assert [a["attempt"] for a in log] == [1, 2, 3]
    assert all(a["outcome"] == "failed" and "InjectedFault" in str(a["error"]) for a in log)
    assert proc.stdout.count("retrying") == 2  # each retry is logged by the launcher too


def test_serial_launcher_also_isolates_failures(workdir: Path) -> None:
    proc = run_cli([*FAULTY, "launcher=serial"], workdir)
    assert proc.returncode != 0
    sweep = workdir / "multirun" / "default"
    assert sorted(r["replicate"] for r in results(sweep).values()) == [0, 2, 3]
    assert "InjectedFault" in (failed_dir(sweep) / "error.txt").read_text()


def test_timeouts_need_worker_processes(workdir: Path) -> None:
    proc = run_cli(
        ["-m", "seed=0,1", *TINY, "launcher=serial", "+hydra.launcher.job_timeout_s=5"], workdir
    )
    assert proc.returncode != 0
    assert "job_timeout_s needs jobs in worker processes" in proc.stderr


def test_a_killed_job_resumes_from_its_last_checkpoint(workdir: Path) -> None:
    """SIGKILL mid-iteration (as the OOM killer does): the next run of the same command
    resumes the job from the checkpoint it wrote before the kill, and its result is
    bitwise the uninterrupted one's."""
    trigger = workdir / "kill-now"  # relative below, so the job's identity is fixed
    trigger.touch()
    job = [
        "-m",
        "env=fault",
        "env.kwargs.fault=sigkill",
        "env.kwargs.at_step=150",  # per sub-env: inside the 5th PPO rollout of 32 steps
        f"env.kwargs.trigger_file={trigger.name}",
        "seed=0",
        "train.total_steps=2048",
        "eval.every_steps=512",
        "eval.episodes=3",
        "train.checkpoint_every_s=0",  # a checkpoint at every iteration boundary
        "n_jobs=1",
        NO_REPORT,
    ]
    # The uninterrupted reference runs meanwhile, serially (in its own process: no worker
    # to start), from a directory without the trigger file (the same relative name: the
    # same job).
    clean_dir = workdir.parent / "clean"
    clean_dir.mkdir()
    with ThreadPoolExecutor(1) as pool:
        running_clean = pool.submit(run_cli, [*job, "name=clean", "launcher=serial"], clean_dir)
        killed = run_cli([*job, "name=k"], workdir)
        clean = running_clean.result()
    assert clean.returncode == 0, clean.stderr[-2000:]
    assert killed.returncode != 0 and "SIGKILL" in killed.stderr, killed.stderr[-2000:]
    (job_dir,) = [p.parent for p in (workdir / "multirun/k").glob("*/checkpoint.pt")]
    assert not (job_dir / "result.json").exists()

    trigger.unlink()  # "fix" the machine; the job's identity is unchanged
    resumed = run_cli([*job, "name=k"], workdir)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    (result,) = results(workdir / "multirun/k").values()
    # The last iteration boundary before the kill (the eval envs count steps too, so an
    # evaluation may be where the 150th step falls).
    (resumed_at,) = result["resumed_at_steps"]
    assert 0 < resumed_at <= 4 * 256 and resumed_at % 256 == 0
    assert not (job_dir / "checkpoint.pt").exists()

    assert fingerprint(workdir / "multirun/k") == fingerprint(clean_dir / "multirun/clean")


def test_step_delay_makes_every_step_sleep() -> None:
    """``env.kwargs.step_delay_s``: a slow simulator (used by bench/vectorization.py)."""
    from rlsweep.faults import FaultEnv

    env = FaultEnv(fault="none", step_delay_s=0.02)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(5):
        env.step(0)
    assert time.perf_counter() - start >= 5 * 0.02
    with pytest.raises(ValueError, match="step_delay_s must be >= 0"):
        FaultEnv(step_delay_s=-1.0)
