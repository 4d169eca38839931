"""One job of a sweep run again, twice, each in a fresh process, with the command the sweep
was run with (``sweep.json``), optionally to a step or time budget."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from rlsweep.errors import ConfigError
from rlsweep.series import job_series
from rlsweep.store import HYDRA_DIR, SWEEP_FILE, iter_job_dirs

# Hydra's command-line flags that choose the config (kept when a job runs again), with
# whether each takes a value.
_CONFIG_FLAGS = {
    "--config-path": True,
    "-cp": True,
    "--config-name": True,
    "-cn": True,
    "--config-dir": True,
    "-cd": True,
}
# The hydra overrides a run of the check sets itself.
_OWN = ("hydra.sweep.dir", "hydra.sweep.subdir", "hydra.mode", "hydra.sweeper.report")
POLL_S = 0.5
GRACE_S = 10.0


@dataclass(frozen=True)
class Budget:
    """How far each run goes: to its end, to a logged step, or for some seconds."""

    steps: float | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class Rerun:
    """One run of the job: where it wrote, and how it ended."""

    job_dir: Path
    finished: bool
    returncode: int | None
    seconds: float
    stderr_tail: str


def _sweep_command(sweep_dir: Path) -> dict[str, Any]:
    try:
        record = json.loads((sweep_dir / SWEEP_FILE).read_text())
    except (OSError, ValueError):
        raise ConfigError(
            f"{sweep_dir} has no readable {SWEEP_FILE}: the determinism check runs a job with "
            "the command its sweep was run with, which rlsweep records there (sweeps run "
            "before this version of rlsweep did not). Run the sweep again to record it."
        ) from None
    app = record.get("app")
    if not isinstance(app, dict) or not app.get("command"):
        raise ConfigError(f"{sweep_dir / SWEEP_FILE} records no command to run a job with.")
    return app


def pick_job(sweep_dir: Path, name: str | None) -> Path:
    """The job directory to check: ``name``, else the first completed job."""
    jobs = list(iter_job_dirs(sweep_dir))
    if name is not None:
        chosen = sweep_dir / name
        if chosen not in jobs:
            listed = ", ".join(j.name for j in jobs[:8]) + (" ..." if len(jobs) > 8 else "")
            raise ConfigError(f"No job '{name}' in {sweep_dir}; its jobs: {listed or 'none'}.")
        return chosen
    done = [j for j in jobs if (j / "result.json").is_file()]
    if not (done or jobs):
        raise ConfigError(f"{sweep_dir} holds no job directory.")
    return (done or jobs)[0]


def job_command(sweep_dir: Path, job_dir: Path, out_dir: Path) -> tuple[list[str], Path]:
    """The command that runs ``job_dir``'s job alone into ``out_dir``, and where from."""
    app = _sweep_command(sweep_dir)
    hydra_file = job_dir / HYDRA_DIR / "hydra.yaml"
    if not hydra_file.is_file():
        raise ConfigError(f"{job_dir} has no {HYDRA_DIR}/hydra.yaml: not a job Hydra started.")
    overrides = OmegaConf.load(hydra_file).hydra.overrides
    flags: list[str] = []
    arguments = list(app.get("arguments") or [])
    for i, arg in enumerate(arguments):
        name = arg.split("=", 1)[0]
        if name in _CONFIG_FLAGS:
            flags.append(arg)
            if "=" not in arg and _CONFIG_FLAGS[name] and i + 1 < len(arguments):
                flags.append(arguments[i + 1])
    own = [
        str(o) for o in overrides.hydra if not str(o).split("=", 1)[0].lstrip("+~").startswith(_OWN)
    ]
    command = [
        *app["command"],
        *flags,
        "-m",
        *own,
        *[str(o) for o in overrides.task],
        f"hydra.sweep.dir={out_dir}",
        "hydra.sweeper.report=false",
        "hydra.launcher.executor=serial",
        "hydra.launcher.progress=false",
    ]
    return command, Path(app.get("cwd") or ".")


def _reached(out_dir: Path, steps: float) -> bool:
    """Whether the run's job logged a step at or beyond ``steps`` (any series)."""
    for job_dir in iter_job_dirs(out_dir):
        if any(s.steps[-1] >= steps for s in job_series(job_dir).values()):
            return True
    return False


def _stop(process: subprocess.Popen[str]) -> None:
    """Stop a run: SIGTERM (the sweep stops its job cleanly), then SIGKILL."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_twice(
    command: Sequence[str], cwd: Path, out_dirs: Sequence[Path], budget: Budget
) -> list[Rerun]:
    """Run ``command`` (each with its own ``hydra.sweep.dir``) at once, each in a fresh
    process; stop each at the budget."""
    start = time.monotonic()
    processes = []
    for out_dir in out_dirs:
        argv = [
            a if not a.startswith("hydra.sweep.dir=") else f"hydra.sweep.dir={out_dir}"
            for a in command
        ]
        processes.append(
            subprocess.Popen(
                argv,
                cwd=cwd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    stopped = [False] * len(processes)
    ended = [0.0] * len(processes)
    while any(p.poll() is None for p in processes):
        elapsed = time.monotonic() - start
        for i, (process, out_dir) in enumerate(zip(processes, out_dirs, strict=True)):
            if process.poll() is not None:
                ended[i] = ended[i] or elapsed
                continue
            over_time = budget.seconds is not None and elapsed >= budget.seconds
            if over_time or (budget.steps is not None and _reached(out_dir, budget.steps)):
                _stop(process)
                stopped[i], ended[i] = True, time.monotonic() - start
        time.sleep(POLL_S)
    runs = []
    for i, (process, out_dir) in enumerate(zip(processes, out_dirs, strict=True)):
        stderr = process.stderr.read() if process.stderr is not None else ""
        jobs = list(iter_job_dirs(out_dir))
        if not jobs:
            raise ConfigError(
                f"Run {i + 1} of the job wrote no job directory (exit {process.returncode}):\n"
                + "\n".join(stderr.strip().splitlines()[-15:])
            )
        finished = not stopped[i] and (jobs[0] / "result.json").is_file()
        seconds = ended[i] or time.monotonic() - start
        runs.append(Rerun(jobs[0], finished, process.returncode, seconds, stderr[-2000:]))
    return runs
