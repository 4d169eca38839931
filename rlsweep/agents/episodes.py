"""The job's training vector env as the built-in agents step it.

The job makes the vector env with gymnasium's default ``NEXT_STEP`` autoreset: when a
sub-env's episode ends at step t, its step t+1 is a reset step that ignores the action
and returns reward 0 with the first observation of the next episode. An agent that steps
the env itself (PPO, A2C and DQN do) marks that reset step invalid and counts the raw
returns of the episodes in between: :class:`EpisodeReturns` does both.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlsweep.agents.configs import observation_problem


def check_vector_env(
    name: str, envs: gym.vector.VectorEnv, n_envs: int, *, next_step_autoreset: bool = True
) -> int:
    """The flat observation size of ``envs``; ValueError naming the agent ``name`` unless
    the observations are a Box (for a built-in agent: vector observations, see
    ``observation_problem``), there are ``n_envs`` sub-envs and, if asked, the autoreset
    mode is NEXT_STEP."""
    obs_space = envs.single_observation_space
    problem = observation_problem(name, obs_space)
    if problem is not None:
        raise ValueError(problem)
    if not isinstance(obs_space, gym.spaces.Box):
        raise ValueError(f"{name} needs a Box observation space, got {type(obs_space).__name__}")
    mode = envs.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if next_step_autoreset and mode != gym.vector.AutoresetMode.NEXT_STEP:
        raise ValueError(f"{name} needs a vector env with autoreset_mode NEXT_STEP, got {mode}")
    if envs.num_envs != n_envs:
        raise ValueError(f"n_envs is {n_envs} but the vector env has {envs.num_envs} sub-envs")
    return int(np.prod(obs_space.shape))


class EpisodeReturns:
    """Per sub-env: the raw return of the episode in progress, and whether its next step
    is an autoreset (the step after an episode ended: not a transition)."""

    def __init__(self, n_envs: int) -> None:
        self.reset_next = np.zeros(n_envs, dtype=bool)
        self.episode_returns = np.zeros(n_envs, dtype=np.float64)

    def valid(self) -> np.ndarray:
        """Which sub-envs' next step is a real transition (not an autoreset)."""
        return ~self.reset_next

    def step(self, rewards: np.ndarray, dones: np.ndarray, valid: np.ndarray) -> list[float]:
        """Count one vector step (``valid`` as :meth:`valid` gave it before the step);
        return the raw returns of the episodes that ended at it."""
        finished: list[float] = []
        self.episode_returns += rewards * valid
        if dones.any():
            finished = self.episode_returns[dones].tolist()
            self.episode_returns[dones] = 0.0
        self.reset_next = dones
        return finished

    def state_dict(self) -> dict[str, Any]:
        return {
            "reset_next": self.reset_next.copy(),
            "episode_returns": self.episode_returns.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.reset_next = np.array(state["reset_next"], dtype=bool)
        self.episode_returns = np.array(state["episode_returns"], dtype=np.float64)
