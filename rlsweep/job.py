"""One job, end to end: seed everything, train, evaluate, write the results.

The job's outputs, in its directory:

- ``seeds.json``: the root, keys and every concrete seed used (written first);
- ``metrics.csv``: one row per evaluation (step, wall time, evaluation return mean and
  std, training episode returns since the previous row), flushed as it goes;
- ``result.json``: written last and atomically, so a job is complete iff it exists.
"""

from __future__ import annotations

import csv
import logging
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from omegaconf import DictConfig

from rlsweep.agents import load_agent_module
from rlsweep.agents.base import AgentContext
from rlsweep.config import JobConfig, load_job_config, to_plain
from rlsweep.envs import evaluate, make_vector_env, seed_vector_env
from rlsweep.seeding import JobSeeds, derive_job_seeds, seed_global_rngs
from rlsweep.store import METRICS_FILE, RESULT_FILE, SEEDS_FILE, atomic_write_json

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


@dataclass
class MetricsLog:
    """Appends one row per evaluation to metrics.csv, flushed so progress is visible."""

    file: TextIO
    writer: Any = field(init=False)

    def __post_init__(self) -> None:
        self.writer = csv.writer(self.file)
        self.writer.writerow(METRICS_COLUMNS)

    def row(self, values: tuple[Any, ...]) -> None:
        self.writer.writerow(values)
        self.file.flush()


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
        agent_identity=to_plain(job.agent),
        n_train_envs=job.agent.n_envs,
        n_eval_episodes=job.eval.episodes,
        common_random_numbers=job.seeding.common_random_numbers,
    )


def state_fingerprint(state: Any) -> str:
    """SHA-256 of every number in a (nested) state dict: equal iff bitwise equal."""
    import hashlib

    import torch

    digest = hashlib.sha256()

    def feed(obj: Any) -> None:
        if isinstance(obj, dict):
            for key in sorted(obj, key=str):
                digest.update(str(key).encode())
                feed(obj[key])
        elif isinstance(obj, list | tuple):
            for item in obj:
                feed(item)
        elif isinstance(obj, torch.Tensor):
            digest.update(obj.detach().cpu().contiguous().numpy().tobytes())
        elif isinstance(obj, np.ndarray):
            digest.update(np.ascontiguousarray(obj).tobytes())
        else:
            digest.update(repr(obj).encode())

    feed(state)
    return digest.hexdigest()


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


def train_and_evaluate(job: JobConfig, out_dir: Path, *, echo: bool = False) -> dict[str, Any]:
    """Train ``job.agent`` on ``job.env`` for the budget, evaluating on a schedule."""
    start = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    seeds = job_seeds(job)
    atomic_write_json(out_dir / SEEDS_FILE, seeds.to_json())
    _set_torch_threads(job.torch_threads)
    seed_global_rngs(seeds)
    module = load_agent_module(job.agent.name)
    envs = make_vector_env(job.env, job.agent.n_envs)
    eval_envs = make_vector_env(job.env, job.eval.episodes, vectorization="sync")
    times = PhaseTimes()
    total, every = job.train.total_steps, job.eval.every_steps
    try:
        obs = seed_vector_env(envs, seeds.train_envs, seeds.action_space)
        agent = module.build(
            job.agent,
            AgentContext(
                envs=envs,
                first_obs=obs,
                total_steps=total,
                rng=np.random.default_rng(seeds.agent),
            ),
        )
        steps, next_eval = 0, 0
        recent: list[float] = []
        with (out_dir / METRICS_FILE).open("w", newline="") as f:
            metrics = MetricsLog(f)
            while True:
                if steps >= next_eval or steps >= total:
                    t = time.perf_counter()
                    returns = evaluate(agent.act, eval_envs, seeds.eval_episodes)
                    times.evaluate += time.perf_counter() - t
                    metrics.row(
                        (
                            steps,
                            round(time.perf_counter() - start, 4),
                            float(returns.mean()),
                            float(returns.std()),
                            float(np.mean(recent)) if recent else "",
                            len(recent),
                        )
                    )
                    line = (
                        f"step {steps:>9,d}  eval return {returns.mean():9.2f} "
                        f"+- {returns.std():7.2f}  ({time.perf_counter() - start:6.1f} s)"
                    )
                    log.info(line)
                    if echo:
                        print(line, file=sys.stderr, flush=True)
                    recent = []
                    next_eval = (steps // every + 1) * every
                if steps >= total:
                    break
                info = agent.train_iteration()
                steps += info.env_steps
                times.collect += info.collect_seconds
                times.train += info.train_seconds
                recent.extend(info.episode_returns)
        fingerprint = state_fingerprint(agent.state_dict())
    finally:
        envs.close()
        eval_envs.close()
    result = {
        "agent": job.agent.name,
        "env": job.env.id,
        "replicate": job.seed,
        "final_return": float(returns.mean()),
        "final_return_std": float(returns.std()),
        "final_episode_returns": [float(r) for r in returns],
        "steps": steps,
        # Fingerprint of the final agent state (networks, optimiser, RNGs): bitwise checks.
        "state_sha256": fingerprint,
        "wall_time_s": time.perf_counter() - start,
        "phase_seconds": times.as_dict(),
        "seeds_file": SEEDS_FILE,
        "versions": package_versions(),
        # The resolved, validated config, every default filled in.
        "config": to_plain(job),
    }
    atomic_write_json(out_dir / RESULT_FILE, result)
    return result


def output_dir() -> Path:
    """The job's directory: Hydra's output dir when run by Hydra, else the cwd."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir)
    return Path.cwd()


def run(cfg: DictConfig) -> dict[str, Any]:
    """The Hydra task: validate, run, and return the headline numbers."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    job = load_job_config(cfg)
    echo = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.RUN
    result = train_and_evaluate(job, output_dir(), echo=echo)
    return {k: result[k] for k in ("agent", "env", "replicate", "final_return", "steps")}
