"""The sections of a job's config: typed dataclasses whose ``__post_init__`` checks ranges.

Each field's comment says what it means and what is allowed; :mod:`rlsweep.config` merges
the composed YAML into them and reports what fails, naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlsweep.agents.base import AgentConfig

VECTORIZATION_MODES = ("sync", "async")


def _require(ok: bool, message: str) -> None:
    """A section's range check: ValueError(message) unless ``ok``."""
    if not ok:
        raise ValueError(message)


@dataclass
class EnvConfig:
    """The task: a gymnasium environment.

    An env registered only in the launching process (by a wrapper script, with its entry
    point in ``__main__``) is refused up front: the job processes start fresh and would
    not find it. Register it in an importable module and use ``env.id=<module>:<id>``.
    """

    # Gymnasium id: one registered when gymnasium or rlsweep is imported (e.g.
    # CartPole-v1), or gymnasium's "module:id" form for an env of your own package
    # (e.g. mypkg.envs:TinyChain-v0): every process that runs a job imports the module,
    # which registers the env, so it works under any launcher. The whole string is the
    # env's identity (seeds are derived from it).
    id: str = "CartPole-v1"
    # Keyword arguments passed to gymnasium.make.
    kwargs: dict[str, Any] = field(default_factory=dict)
    # Episode step limit; null keeps the env's registered limit.
    max_episode_steps: int | None = None
    # How training sub-envs run: sync (one process) or async (a process per sub-env,
    # shared memory). Results are identical; it is left out of the env's identity.
    vectorization: str = "sync"
    # Score of a random policy and a reference score, for normalised reports (optional).
    random_score: float | None = None
    reference_score: float | None = None

    def __post_init__(self) -> None:
        modes, steps = ", ".join(VECTORIZATION_MODES), self.max_episode_steps
        _require(
            self.vectorization in VECTORIZATION_MODES,
            f"vectorization must be one of {modes}, got {self.vectorization!r}",
        )
        _require(steps is None or steps >= 1, f"max_episode_steps must be >= 1, got {steps}")

    def identity(self) -> dict[str, Any]:
        """What defines the task for seeding (not how it is vectorised)."""
        return {"id": self.id, "kwargs": self.kwargs, "max_episode_steps": self.max_episode_steps}


@dataclass
class TrainConfig:
    """The training budget."""

    # Environment steps to train for, summed over sub-envs.
    total_steps: int = 100_000
    # Save a checkpoint at the first iteration boundary after this many seconds (0: after
    # every iteration; null: only when asked to stop, e.g. by SLURM before a time limit).
    # A killed or preempted job resumes from its last checkpoint, bit for bit.
    checkpoint_every_s: float | None = 300.0

    def __post_init__(self) -> None:
        every = self.checkpoint_every_s
        _require(self.total_steps >= 1, f"total_steps must be >= 1, got {self.total_steps}")
        _require(
            every is None or every >= 0, f"checkpoint_every_s must be >= 0 or null, got {every}"
        )


@dataclass
class EvalConfig:
    """Deterministic evaluation on a separate environment."""

    # Evaluate every this many training steps (and at step 0 and at the end).
    every_steps: int = 10_000
    # Episodes per evaluation, each with its own seed (the same seeds at every evaluation).
    episodes: int = 10

    def __post_init__(self) -> None:
        _require(self.every_steps >= 1, f"every_steps must be >= 1, got {self.every_steps}")
        _require(self.episodes >= 1, f"episodes must be >= 1, got {self.episodes}")


@dataclass
class SeedingConfig:
    """How a job's seeds are derived (see rlsweep.seeding)."""

    # Root seed of the whole study: change it to draw a fresh set of replicates.
    root: int = 0
    # Share environment-side seeds across agents at the same replicate (paired runs).
    common_random_numbers: bool = True

    def __post_init__(self) -> None:
        _require(self.root >= 0, f"root must be >= 0, got {self.root}")


@dataclass
class JobConfig:
    """One job: an agent trained on an env at one replicate index."""

    agent: AgentConfig
    env: EnvConfig
    train: TrainConfig
    eval: EvalConfig
    seeding: SeedingConfig
    # Replicate index (not an RNG seed): the job's seeds are derived from it.
    seed: int = 0
    # Experiment name: multirun sweeps go to multirun/<name>.
    name: str = "default"
    # Worker processes for the joblib launcher (null = all cores); not part of a job.
    n_jobs: int | None = None
    # Which jobs a sweep runs again (missing, failed, all); not part of a job.
    rerun: str = "missing"
    # Whether a sweep ends with its summary and report; not part of a job.
    report: bool = True
    # torch threads inside this job. Floating-point results depend on it (reductions
    # split differently), so it belongs to the job, not to the launcher: a job gives the
    # same numbers serial, under joblib or on SLURM. Small RL networks run fastest on 1.
    torch_threads: int = 1

    def __post_init__(self) -> None:
        threads, n_jobs = self.torch_threads, self.n_jobs
        _require(self.seed >= 0, f"seed must be a replicate index >= 0, got {self.seed}")
        _require(
            isinstance(self.report, bool), f"report must be true or false, got {self.report!r}"
        )
        _require(threads >= 1, f"torch_threads must be >= 1, got {threads}")
        _require(
            n_jobs is None or n_jobs >= 1,
            f"n_jobs must be >= 1 (or null for all cores), got {n_jobs}",
        )
