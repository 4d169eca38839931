"""The examples, each run as a user would: a sweep under joblib, killed half-way (the
sweep's process and its workers SIGKILLed at once) and resumed with the same command,
ending with exactly the numbers of an uninterrupted sweep; then reported."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import NO_REPORT, run_python

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# Values that depend on the clock or on the run having been interrupted.
NOT_NUMBERS = ("rlsweep", "wall_time_s", "phase_seconds", "resumed_at_steps", "versions")


def outcomes(sweep: Path) -> dict[str, tuple[dict[str, object], list[dict[str, str]]]]:
    """Each job's result.json values and metrics.csv rows, the clock's columns left out."""
    out = {}
    for result in sorted(sweep.glob("*/result.json")):
        values = {k: v for k, v in json.loads(result.read_text()).items() if k not in NOT_NUMBERS}
        rows = list(csv.DictReader(io.StringIO((result.parent / "metrics.csv").read_text())))
        out[result.parent.name] = (
            values,
            [{k: v for k, v in r.items() if k != "wall_time"} for r in rows],
        )
    return out


def caught_mid_job(sweep: Path) -> tuple[str, int] | None:
    """A job that has checkpointed and logged at least two metrics rows but not finished:
    its directory name and its number of metrics rows; None while there is none."""
    for ckpt in sweep.glob("*/checkpoint.pt"):
        job = ckpt.parent
        if (job / "result.json").exists() or not (job / "metrics.csv").exists():
            continue
        rows = len((job / "metrics.csv").read_text().splitlines()) - 1
        if rows >= 2:
            return job.name, rows
    return None


def kill_then_resume(
    args: Sequence[str],
    cwd: Path,
    sweep: Path,
    *,
    serial: str,
    env: dict[str, str] | None = None,
) -> None:
    """Run ``python ARGS`` into ``sweep`` (joblib, 2 workers) and SIGKILL the sweep's process
    and its workers at once (a machine lost) while a job is half-way through: checkpointed,
    with at least two metrics rows logged and at least two of its reference run's still to
    log; then run the same command again to the end. The uninterrupted reference runs
    serially (``serial``: the override that says so), without a report, into
    ``cwd/reference``, meanwhile, in a process of its own: the same numbers are expected
    whatever ran them."""
    with ThreadPoolExecutor(1) as pool:
        running_reference = pool.submit(
            run_python,
            [*args, serial, NO_REPORT, f"hydra.sweep.dir={cwd / 'reference'}"],
            cwd,
            env=env,
        )
        proc = subprocess.Popen(
            [sys.executable, *args, f"hydra.sweep.dir={sweep}"],
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 120
            while (caught := caught_mid_job(sweep)) is None:
                assert proc.poll() is None, "the sweep ended before any job was caught half-way"
                assert time.monotonic() < deadline, "no job got going"
                time.sleep(0.02)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reference = running_reference.result()
    assert reference.returncode == 0, reference.stderr[-3000:]
    # The kill came with at least two of the job's metrics rows still to log.
    job, rows = caught
    total = len((cwd / "reference" / job / "metrics.csv").read_text().splitlines()) - 1
    assert rows <= total - 2, f"{job} was caught at {rows} of its {total} metrics rows"
    assert len(list(sweep.glob("*/result.json"))) < len(outcomes(cwd / "reference"))
    resumed = run_python([*args, f"hydra.sweep.dir={sweep}"], cwd, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert outcomes(sweep) == outcomes(cwd / "reference")
    logs = [p.read_text() for p in sweep.glob("*/*.log")]
    assert any("resumed from checkpoint.pt" in text for text in logs)


def test_cleanrl_ppo_script(tmp_path: Path) -> None:
    script = str(EXAMPLES / "cleanrl_ppo" / "ppo.py")
    grid = [script, "-m", "learning_rate=2.5e-4,1e-3", "seed=range(2)"]
    grid += ["total_timesteps=2048", "num_steps=64", "eval_episodes=2", "checkpoint_every_s=0"]
    sweep = tmp_path / "sweep"
    kill_then_resume(grid, tmp_path, sweep, serial="rlsweep=serial")
    assert len(outcomes(sweep)) == 4
    report = (sweep / "report.md").read_text()  # the learning rates compared by replicate
    assert "learning_rate=0.00025" in report and "learning_rate=0.001" in report


def test_stable_baselines3_agents(tmp_path: Path) -> None:
    grid = ["-m", "rlsweep", "-m", "agent=sb3_ppo,sb3_a2c", "seed=range(2)"]
    grid += ["train.total_steps=1024", "eval.every_steps=256", "eval.episodes=2"]
    grid += ["train.checkpoint_every_s=0", "agent.n_envs=2"]
    sweep = tmp_path / "sweep"
    kill_then_resume(grid, tmp_path, sweep, serial="launcher=serial")
    results = outcomes(sweep)
    assert len(results) == 4
    assert {v["config"]["agent"]["algo"] for v, _ in results.values()} == {"PPO", "A2C"}  # type: ignore[index]
    # One derived seed per sub-env, never SB3's seed + i across replicates.
    ppo = sorted(sweep.glob("*agent=sb3_ppo,*"))
    seeds = [json.loads((d / "seeds.json").read_text())["seeds"]["train_envs"] for d in ppo]
    assert len(seeds) == 2 and seeds[0][1] != seeds[1][0]
    assert "sb3[algo=" in (sweep / "report.md").read_text()


def test_users_own_env_and_agent(tmp_path: Path) -> None:
    """A gymnasium env of the user's package (module:id) and an agent class by dotted path,
    with config files in the user's own config directory; rlsweep is not edited."""
    grid = ["-m", "rlsweep", "--config-dir", str(EXAMPLES / "mypkg" / "conf"), "-m"]
    grid += ["agent=qlearning,ppo", "env=tinychain", "seed=range(2)", "agent.n_envs=2"]
    grid += ["train.total_steps=2048", "eval.every_steps=256", "eval.episodes=2"]
    grid += ["train.checkpoint_every_s=0"]
    sweep = tmp_path / "sweep"
    path = os.pathsep.join(p for p in (str(EXAMPLES), os.environ.get("PYTHONPATH")) if p)
    kill_then_resume(grid, tmp_path, sweep, serial="launcher=serial", env={"PYTHONPATH": path})
    results = outcomes(sweep)
    assert {v["agent"] for v, _ in results.values()} == {"mypkg.qlearning", "ppo"}
    assert {v["env"] for v, _ in results.values()} == {"mypkg.envs:TinyChain-v0"}
    assert "mypkg.qlearning" in (sweep / "report.md").read_text()
