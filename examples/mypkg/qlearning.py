"""Tabular Q-learning for small discrete envs: a user's own agent, selected by its dotted
module path (``agent.name: mypkg.qlearning``) through a config file of the user's own
(``conf/agent/qlearning.yaml``); rlsweep is not edited.

An rlsweep agent module defines ``Config``, ``ACTION_SPACES`` and ``build`` (see
rlsweep/agents/base.py). The job seeds everything and hands over its own numpy Generator
(``context.rng``), which drives the exploration here; ``state_dict`` holds everything the
rest of training depends on, so a killed or preempted job resumes bit for bit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlsweep.agents.base import AgentConfig, AgentContext, IterationInfo

ACTION_SPACES = ("discrete",)


@dataclass
class Config(AgentConfig):
    """Tabular Q-learning with epsilon-greedy exploration (one-hot or integer states)."""

    # Registry name: this module's dotted path.
    name: str = "mypkg.qlearning"
    # Sub-environments in the training vector env (each with its own derived seed).
    n_envs: int = 4
    # Step size of the Q update.
    learning_rate: float = 0.5
    # Discount factor.
    gamma: float = 0.9
    # Probability of a uniformly random action.
    epsilon: float = 0.2
    # Vector steps per iteration.
    steps_per_iteration: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {self.epsilon}")


def state_index(obs: np.ndarray) -> np.ndarray:
    """A state per row: the hot index of a one-hot observation, or the integer itself."""
    obs = np.asarray(obs)
    return obs.argmax(axis=-1) if obs.ndim > 1 else obs.astype(np.int64)


class QLearning:
    def __init__(self, config: Config, context: AgentContext) -> None:
        self.config, self.envs, self.rng = config, context.envs, context.rng
        n_states = int(np.prod(context.envs.single_observation_space.shape))
        self.q = np.zeros((n_states, int(context.envs.single_action_space.n)))
        self.obs = context.first_obs
        self.ended = np.zeros(config.n_envs, dtype=bool)  # autoreset on the next step
        self.returns = np.zeros(config.n_envs)

    def act(self, obs: np.ndarray) -> np.ndarray:
        return self.q[state_index(obs)].argmax(axis=-1)

    def train_iteration(self) -> IterationInfo:
        start, c, finished = time.perf_counter(), self.config, []
        for _ in range(c.steps_per_iteration):
            s = state_index(self.obs)
            explore = self.rng.random(c.n_envs) < c.epsilon
            action = np.where(
                explore, self.rng.integers(0, self.q.shape[1], c.n_envs), self.act(self.obs)
            )
            obs, reward, terminated, truncated, _ = self.envs.step(action)
            live = ~self.ended  # a step after an episode's end is the reset, not a transition
            target = reward + c.gamma * self.q[state_index(obs)].max(axis=-1) * ~terminated
            self.q[s[live], action[live]] += c.learning_rate * (
                target[live] - self.q[s[live], action[live]]
            )
            self.returns += np.where(live, reward, 0.0)
            self.ended = np.logical_or(terminated, truncated)
            finished += [float(r) for r in self.returns[self.ended & live]]
            self.returns[self.ended] = 0.0
            self.obs = obs
        seconds = time.perf_counter() - start
        return IterationInfo(c.steps_per_iteration * c.n_envs, finished, seconds, 0.0, {})

    def state_dict(self) -> dict[str, Any]:
        return {
            "q": self.q.copy(),
            "obs": self.obs.copy(),
            "ended": self.ended.copy(),
            "returns": self.returns.copy(),
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.q, self.obs = state["q"].copy(), state["obs"].copy()
        self.ended, self.returns = state["ended"].copy(), state["returns"].copy()
        self.rng.bit_generator.state = state["rng"]


def build(config: Config, context: AgentContext) -> QLearning:
    return QLearning(config, context)
