"""One job, end to end: seed everything, train, evaluate, write the results.

The job's outputs, in its directory:

- ``seeds.json``: the root, keys and every concrete seed used (written first);
- ``metrics.csv``: one row per evaluation (step, wall time, evaluation return mean and
  std, training episode returns since the previous row), flushed as it goes;
- ``checkpoint.pt``: while it runs, the state to resume from (see rlsweep.checkpoint);
  deleted once the job is complete;
- ``result.json``: what :func:`run_agent_job` returns, written last and atomically by
  :func:`rlsweep.task`, so a job is complete iff it exists.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import platform
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from omegaconf import DictConfig

from rlsweep import checkpoint, numerics
from rlsweep.agents import load_agent_module
from rlsweep.agents.base import AgentContext
from rlsweep.config import JobConfig, load_job_config
from rlsweep.envs import evaluate, make_vector_env, seed_vector_env
from rlsweep.errors import Preempted
from rlsweep.identity import Identity
from rlsweep.seeding import (
    JobSeeds,
    Seeds,
    capture_global_rngs,
    derive_job_seeds,
    restore_global_rngs,
    seed_global_rngs,
)
from rlsweep.store import CHECKPOINT_FILE, SEEDS_FILE, atomic_write_json
from rlsweep.task_api import Job, current

if TYPE_CHECKING:
    import gymnasium as gym

    from rlsweep.agents.base import Agent

log = logging.getLogger(__name__)

THREADS_ENV = "RLSWEEP_THREADS_PER_JOB"
METRICS_COLUMNS = (
    "step",
    "wall_time",
    "eval_return_mean",
    "eval_return_std",
    "train_return_mean",
    "train_episodes",
)
_PACKAGES = ("rlsweep", "torch", "gymnasium", "numpy", "hydra-core", "omegaconf", "joblib")


@dataclass
class PhaseTimes:
    """Seconds spent per phase, as DI-engine's step timers report them."""

    collect: float = 0.0
    train: float = 0.0
    evaluate: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {"collect": self.collect, "train": self.train, "evaluate": self.evaluate}


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def job_seeds(job: JobConfig) -> JobSeeds:
    """The job's seeds: a pure function of its config (see rlsweep.seeding)."""
    return derive_job_seeds(
        root=job.seeding.root,
        replicate=job.seed,
        env_identity=job.env.identity(),
        agent_identity=job.agent.identity(),
        n_train_envs=job.agent.n_envs,
        n_eval_episodes=job.eval.episodes,
        common_random_numbers=job.seeding.common_random_numbers,
    )


def job_identity(job: JobConfig) -> Identity:
    """The job's identity: its computation config; seeds keyed by the env's identity and,
    agent-side, the agent's (see rlsweep.seeding)."""
    return Identity(
        config=computation_config(job),
        replicate=job.seed,
        shared=job.env.identity(),
        agent=job.agent.identity(),
        root=job.seeding.root,
        crn=job.seeding.common_random_numbers,
        threads=job.torch_threads,
    )


def _set_torch_threads(threads: int) -> None:
    """Use the job's own thread count; warn if the launcher's cap is lower."""
    import torch

    cap = os.environ.get(THREADS_ENV)
    if cap and threads > int(cap):
        log.warning(
            f"torch_threads={threads} exceeds the launcher's cap of {cap} threads per job: "
            "the cores are oversubscribed (results are unaffected)"
        )
    torch.set_num_threads(threads)


@dataclass
class LoopState:
    """The job loop's own progress: checkpointed with the agent and the envs."""

    steps: int = 0  # env steps trained so far
    next_eval: int = 0  # env steps at which the next evaluation runs
    recent: list[float] = field(default_factory=list)  # training returns since the last row
    rows: list[tuple[Any, ...]] = field(default_factory=list)  # metrics.csv rows so far
    returns: list[float] = field(default_factory=list)  # the latest evaluation's returns
    times: PhaseTimes = field(default_factory=PhaseTimes)
    elapsed: float = 0.0  # wall seconds spent by earlier attempts
    resumed_at: list[int] = field(default_factory=list)  # steps at which the job resumed


def computation_config(job: JobConfig) -> dict[str, Any]:
    """The settings a job's numbers depend on (not its name, launcher or checkpoint cadence)."""
    plain = dataclasses.asdict(job)
    for key in ("name", "n_jobs", "rerun", "report"):
        plain.pop(key, None)
    plain["train"].pop("checkpoint_every_s", None)
    return plain


def _resume(
    path: Path, job: JobConfig, agent: Any, envs: Any, digest: str, setting: str
) -> LoopState | None:
    """Load ``path`` into the agent, envs and global RNGs if it is this job's checkpoint (a
    job of numerics ``setting``: the log says if the checkpoint's fingerprint differs)."""
    saved, why = checkpoint.load(path, digest)
    if saved is None:
        if path.exists():
            log.warning(f"not resuming from {path.name}: {why}; starting from scratch")
        return None
    agent.load_state_dict(saved["agent"])
    checkpoint.restore_envs(envs, saved["envs"])
    restore_global_rngs(saved["global_rngs"])
    loop: LoopState = saved["loop"]
    loop.resumed_at.append(loop.steps)
    log.info(f"resumed from {path.name} at step {loop.steps:,d} of {job.train.total_steps:,d}")
    numerics.say_resumed(saved.get("numerics"), setting)
    return loop


def _can_checkpoint(envs: Any) -> bool:
    """Whether the envs can be saved; if not, the job runs on without checkpoints."""
    try:
        checkpoint.capture_envs(envs)
    except checkpoint.NotCheckpointable as exc:
        log.warning(
            f"checkpoints are off for this job: {exc}. It runs to the end, but if it is "
            "killed, preempted or timed out it starts again from scratch."
        )
        return False
    return True


def _save(attempt: Attempt, wall: float) -> None:
    """Save the job's state; the saved loop counts ``wall`` seconds as spent (the live loop
    keeps counting from its own start, so saving twice never counts a second twice)."""
    agent, envs, loop = attempt.agent, attempt.envs, attempt.loop
    checkpoint.save(
        attempt.checkpoint_path,
        {
            "config_sha256": attempt.digest,
            "numerics": numerics.fingerprint(attempt.numerics),
            "agent": agent.state_dict(),
            "envs": checkpoint.capture_envs(envs),
            "global_rngs": capture_global_rngs(),
            "loop": replace(loop, elapsed=wall),
        },
    )


@dataclass
class Attempt:
    """One attempt at a job (the first, or one resumed from its checkpoint): what the
    loop works with. ``loop`` is what a checkpoint saves besides the agent and the envs."""

    job: JobConfig
    seeds: JobSeeds
    agent: Agent
    envs: gym.vector.VectorEnv
    eval_envs: gym.vector.VectorEnv
    checkpoint_path: Path
    digest: str  # of the computation config: a checkpoint of another config is not loaded
    loop: LoopState
    checkpoints: bool  # False if the envs cannot be saved
    started: float  # perf_counter() at the start of this attempt
    echo: bool  # also print the evaluation lines to stderr
    numerics: str  # the job's numerics setting (rlsweep.numerics)
    last_save: float = field(default_factory=time.monotonic)

    def wall(self) -> float:
        """Wall seconds spent on the job: by earlier attempts, and by this one so far."""
        return self.loop.elapsed + time.perf_counter() - self.started


def train_and_evaluate(
    job: JobConfig, out_dir: Path, *, echo: bool = False, metrics: Job | None = None
) -> dict[str, Any]:
    """Train ``job.agent`` on ``job.env`` for the budget, evaluating on a schedule.

    Resumes from ``checkpoint.pt`` in ``out_dir`` when it holds this job's checkpoint, and
    writes one between iterations (periodically, and before stopping when a stop was
    requested, raising :class:`~rlsweep.errors.Preempted`). An interrupted and resumed
    job computes exactly what an uninterrupted one does. Each evaluation's row goes
    through ``metrics`` (the running job of the public API: metrics.csv and the trackers;
    by default a job of its own, writing metrics.csv only).
    """
    started = time.perf_counter()
    seeds = _prepare(job, out_dir)
    setting = metrics.identity.numerics if metrics is not None else "native"
    with ExitStack() as stack:  # closes the envs, whatever happens
        attempt = _start(job, seeds, out_dir, stack, started, echo, setting)
        log_to = metrics or Job(job_identity(job), out_dir)
        if attempt.loop.rows:  # resumed: the rows so far, as the checkpoint holds them
            log_to.restore_metrics([_row_values(row) for row in attempt.loop.rows])
        _train(attempt, log_to)
        fingerprint = checkpoint.state_fingerprint(attempt.agent.state_dict())
    return _result(job, attempt.loop, fingerprint, attempt.wall())


def _prepare(job: JobConfig, out_dir: Path) -> JobSeeds:
    """Before anything else: the job's seeds (written to seeds.json), its torch threads and
    the process-global RNGs, seeded from its identity."""
    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = job_seeds(job)
    atomic_write_json(out_dir / SEEDS_FILE, seeds.to_json())
    _set_torch_threads(job.torch_threads)
    seed_global_rngs(Seeds(job_identity(job)))
    return seeds


def _start(
    job: JobConfig,
    seeds: JobSeeds,
    out_dir: Path,
    stack: ExitStack,
    started: float,
    echo: bool,
    setting: str,
) -> Attempt:
    """Make the envs (``stack`` closes them), reset the training envs from their seeds,
    build the agent, and resume from the checkpoint in ``out_dir`` if it is this job's."""
    module = load_agent_module(job.agent.name)
    envs = make_vector_env(job.env, job.agent.n_envs, snapshots=True)
    stack.callback(envs.close)
    eval_envs = make_vector_env(job.env, job.eval.episodes, vectorization="sync")
    stack.callback(eval_envs.close)
    obs = seed_vector_env(envs, seeds.train_envs, seeds.action_space)
    rng = np.random.default_rng(seeds.agent)
    agent = module.build(job.agent, AgentContext(envs, obs, job.train.total_steps, rng))
    path = out_dir / CHECKPOINT_FILE
    digest = checkpoint.config_digest(computation_config(job))
    loop = _resume(path, job, agent, envs, digest, setting) or LoopState()
    checkpoints = _can_checkpoint(envs)
    return Attempt(
        job, seeds, agent, envs, eval_envs, path, digest, loop, checkpoints, started, echo, setting
    )


def _row_values(row: tuple[Any, ...]) -> dict[str, Any]:
    """A metrics row as the checkpoint keeps it, by column ("" is a missing value)."""
    return {k: (None if v == "" else v) for k, v in zip(METRICS_COLUMNS, row, strict=True)}


def _train(attempt: Attempt, metrics: Job) -> None:
    """The loop: evaluate when due, checkpoint (or stop) when due, train one iteration."""
    loop, total = attempt.loop, attempt.job.train.total_steps
    while True:
        if loop.steps >= loop.next_eval or loop.steps >= total:
            _evaluate(attempt, metrics)
        if loop.steps >= total:
            return
        _checkpoint_if_due(attempt)
        info = attempt.agent.train_iteration()
        loop.steps += info.env_steps
        loop.times.collect += info.collect_seconds
        loop.times.train += info.train_seconds
        loop.recent.extend(info.episode_returns)


def _evaluate(attempt: Attempt, metrics: Job) -> None:
    """Evaluate the deterministic policy and write its metrics row (and log line)."""
    loop = attempt.loop
    t = time.perf_counter()
    returns = evaluate(attempt.agent.act, attempt.eval_envs, attempt.seeds.eval_episodes)
    loop.times.evaluate += time.perf_counter() - t
    loop.returns = [float(r) for r in returns]
    recent = loop.recent
    row = (
        loop.steps,
        round(attempt.wall(), 4),
        float(returns.mean()),
        float(returns.std()),
        float(np.mean(recent)) if recent else "",
        len(recent),
    )
    loop.rows.append(row)
    values = _row_values(row)
    metrics.log(values.pop("step"), **values)
    line = (
        f"step {loop.steps:>9,d}  eval return {returns.mean():9.2f} "
        f"+- {returns.std():7.2f}  ({attempt.wall():6.1f} s)"
    )
    log.info(line)
    if attempt.echo:
        print(line, file=sys.stderr, flush=True)
    loop.recent = []
    every = attempt.job.eval.every_steps
    loop.next_eval = (loop.steps // every + 1) * every


def _checkpoint_if_due(attempt: Attempt) -> None:
    """Save a checkpoint when ``train.checkpoint_every_s`` has passed since the last one or
    a stop was requested; after the latter, stop (raise Preempted)."""
    reason = checkpoint.stop_requested()
    every = attempt.job.train.checkpoint_every_s
    due = every is not None and time.monotonic() - attempt.last_save >= every
    if not ((reason or due) and attempt.checkpoints):
        return
    loop, path = attempt.loop, attempt.checkpoint_path
    _save(attempt, attempt.wall())
    attempt.last_save = time.monotonic()
    if reason:
        log.info(f"checkpointed at step {loop.steps:,d} and stopped ({reason})")
        raise Preempted(f"stopped at step {loop.steps:,d} ({reason}); resumes from {path}")


def _result(job: JobConfig, loop: LoopState, fingerprint: str, wall: float) -> dict[str, Any]:
    """What :func:`run_agent_job` returns (result.json's values)."""
    final = np.asarray(loop.returns)
    return {
        "agent": job.agent.name,
        "env": job.env.id,
        "replicate": job.seed,
        "final_return": float(final.mean()),
        "final_return_std": float(final.std()),
        "final_episode_returns": loop.returns,
        "steps": loop.steps,
        # Fingerprint of the final agent state (networks, optimiser, RNGs): bitwise checks.
        "state_sha256": fingerprint,
        # Wall time over every attempt; the steps at which the job resumed from checkpoints.
        "wall_time_s": wall,
        "resumed_at_steps": loop.resumed_at,
        "phase_seconds": loop.times.as_dict(),
        "seeds_file": SEEDS_FILE,
        "versions": package_versions(),
        # The resolved, validated config, every default filled in.
        "config": dataclasses.asdict(job),
    }


def run_agent_job(cfg: DictConfig) -> dict[str, Any]:
    """The Hydra task: validate, run, and return the result (result.json's values)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    job = load_job_config(cfg)
    echo = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.RUN
    running = current()
    return train_and_evaluate(job, running.directory, echo=echo, metrics=running)
