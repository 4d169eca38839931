"""The contract between the job and an algorithm.

An algorithm is one module in ``rlsweep.agents`` (or any importable module named by
``agent.name`` with a dot in it) that defines:

- ``Config``: a dataclass subclassing :class:`AgentConfig`, one doc comment per field;
  numeric ranges go in its ``BOUNDS`` table (checked for it), anything else in
  ``__post_init__``, which rejects bad values with :class:`ValueError`.
- ``ACTION_SPACES``: the action-space kinds it supports (``"discrete"``, ``"continuous"``).
- ``build(config, context) -> Agent``.

The job seeds Python's ``random``, numpy's global state and torch's global generator
before calling ``build``; the agent draws everything else from ``context.rng``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol

import gymnasium as gym
import numpy as np


@dataclass(frozen=True)
class Bound:
    """The values a numeric setting allows: ``low <= value <= high``, either end open."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def allows(self, value: float) -> bool:
        above = self.low < value if self.low_open else self.low <= value
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def describe(self) -> str:
        """The range in words: ``>= 1``, ``> 0``, ``in [0, 1)``."""
        if self.high == math.inf:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        left, right = "([ "[not self.low_open], ")]"[not self.high_open]
        return f"in {left}{self.low:g}, {self.high:g}{right}"


POSITIVE = Bound(0.0, low_open=True)
NON_NEGATIVE = Bound(0.0)
AT_LEAST_ONE = Bound(1.0)
UNIT = Bound(0.0, 1.0)


@dataclass
class AgentConfig:
    """Fields every agent has."""

    # Options added to an algorithm after its first release, with the value at which it
    # behaves as without them. At that value they stay out of the agent's identity (which its
    # seeds are derived from), so existing jobs keep their seeds and numbers. Every new
    # option goes here (tests/test_seeding.py pins the shipped agents' seeds).
    ADDED_LATER: ClassVar[dict[str, Any]] = {}
    # The numeric fields' allowed ranges, checked after construction. A subclass lists
    # its own fields; its bases' tables are checked too (base first). None passes (a field
    # typed ``float | None`` uses it for "off").
    BOUNDS: ClassVar[dict[str, Bound]] = {"n_envs": AT_LEAST_ONE}

    # Registry name: a module in rlsweep.agents, or a dotted module path of your own.
    name: str = "ppo"
    # Sub-environments in the training vector env (each with its own derived seed).
    n_envs: int = 8

    def __post_init__(self) -> None:
        for cls in reversed(type(self).__mro__):
            for name, bound in vars(cls).get("BOUNDS", {}).items():
                value = getattr(self, name)
                if value is not None and not bound.allows(value):
                    raise ValueError(f"{name} must be {bound.describe()}, got {value}")

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


def progress_state(
    agent: object, rng: np.random.Generator, counters: tuple[str, ...]
) -> dict[str, Any]:
    """The part of an agent's ``state_dict`` every agent has: its numpy generator's state
    (key ``rng``) and its integer progress counters (attributes ``counters``)."""
    return {"rng": rng.bit_generator.state, **{name: getattr(agent, name) for name in counters}}


def load_progress(
    agent: object, rng: np.random.Generator, counters: tuple[str, ...], state: dict[str, Any]
) -> None:
    """Restore what :func:`progress_state` saved."""
    rng.bit_generator.state = state["rng"]
    for name in counters:
        setattr(agent, name, int(state[name]))
