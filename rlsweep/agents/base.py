"""The contract between the job and an algorithm.

An algorithm is one module in ``rlsweep.agents`` (or any importable module named by
``agent.name`` with a dot in it) that defines:

- ``Config``: a dataclass subclassing :class:`AgentConfig`, one doc comment per field;
  ``__post_init__`` rejects out-of-range values with :class:`ValueError`.
- ``ACTION_SPACES``: the action-space kinds it supports (``"discrete"``, ``"continuous"``).
- ``build(config, context) -> Agent``.

The job seeds Python's ``random``, numpy's global state and torch's global generator
before calling ``build``; the agent draws everything else from ``context.rng``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol

import gymnasium as gym
import numpy as np


@dataclass
class AgentConfig:
    """Fields every agent has."""

    # Options added to an algorithm after its first release, with the value that keeps
    # its old behaviour. At that value they stay out of the agent's identity (which its
    # seeds are derived from), so existing jobs keep their seeds and numbers. Every new
    # option goes here (tests/test_seeding.py pins the shipped agents' seeds).
    ADDED_LATER: ClassVar[dict[str, Any]] = {}

    # Registry name: a module in rlsweep.agents, or a dotted module path of your own.
    name: str = "ppo"
    # Sub-environments in the training vector env (each with its own derived seed).
    n_envs: int = 8

    def __post_init__(self) -> None:
        if self.n_envs < 1:
            raise ValueError(f"n_envs must be >= 1, got {self.n_envs}")

    def identity(self) -> dict[str, Any]:
        """What identifies this agent for seeding: every setting, except options added
        later that are at their neutral value (see ``ADDED_LATER``)."""
        plain = dataclasses.asdict(self)
        return {
            key: value
            for key, value in plain.items()
            if key not in self.ADDED_LATER or value != self.ADDED_LATER[key]
        }


class AgentContext(NamedTuple):
    """What the job hands to ``build``."""

    envs: gym.vector.VectorEnv  # training vector env, already reset with per-sub-env seeds
    first_obs: np.ndarray  # observations returned by that reset, shape (n_envs, *obs_shape)
    total_steps: int  # training budget in env steps (summed over sub-envs), for schedules
    rng: np.random.Generator  # the agent's own numpy stream (minibatch order, exploration)


class IterationInfo(NamedTuple):
    """What one ``train_iteration`` did."""

    env_steps: int  # env steps consumed (vector steps x n_envs)
    episode_returns: list[float]  # undiscounted raw returns of training episodes that ended
    collect_seconds: float  # wall time spent stepping envs and acting
    train_seconds: float  # wall time spent in gradient updates
    stats: dict[str, float]  # losses and diagnostics of the update, for the log


class Agent(Protocol):
    """A learning agent driven by the job loop."""

    def train_iteration(self) -> IterationInfo:
        """Collect experience and update once (one rollout for on-policy methods)."""
        ...

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions for a batch of raw observations (evaluation)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume training bit for bit (networks, optimiser, stats)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""
        ...


def action_space_kind(space: gym.Space[Any]) -> str:
    """``"discrete"`` or ``"continuous"``: the kinds listed in an agent's ACTION_SPACES."""
    if isinstance(space, gym.spaces.Discrete):
        return "discrete"
    if isinstance(space, gym.spaces.Box):
        return "continuous"
    return type(space).__name__
