"""Importing this module registers ``TinyChain-v0`` with gymnasium."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

ENV_ID = "TinyChain-v0"


class TinyChain(gym.Env[np.ndarray, np.int64]):
    """A chain of 5 states: action 1 moves right, action 0 left (not past the start).

    Reaching the last state ends the episode with reward 1; every other step gives 0.
    The observation is the one-hot position (float32).
    """

    length = 5
    observation_space = gym.spaces.Box(0.0, 1.0, (length,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.position = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.length, np.float32)
        obs[self.position] = 1.0
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.position = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.position = max(0, self.position + (1 if int(action) == 1 else -1))
        reached = self.position == self.length - 1
        return self._obs(), float(reached), reached, False, {}


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="mypkg.envs:TinyChain", max_episode_steps=20)
