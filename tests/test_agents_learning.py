"""PPO and A2C learn one-state bandits (discrete and continuous actions)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import Bandit

from rlsweep.agents import a2c, ppo
from rlsweep.agents.base import AgentContext
from rlsweep.agents.networks import log_softmax, mlp_forward

# Agents train with one torch thread, as jobs do by default (see conftest).
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def train_on_bandit(module: ModuleType, continuous: bool, iterations: int, **overrides: Any) -> Any:
    torch.manual_seed(0)
    config = module.Config(**overrides)
    envs = gym.vector.SyncVectorEnv([lambda: Bandit(continuous)] * config.n_envs)
    obs, _ = envs.reset(seed=list(range(config.n_envs)))
    total = iterations * config.n_steps * config.n_envs
    agent = module.build(config, AgentContext(envs, obs, total, np.random.default_rng(0)))
    for _ in range(iterations):
        agent.train_iteration()
    return agent


def good_arm_probability(agent: Any) -> float:
    logits = mlp_forward(agent.model.actor, np.zeros((1, 1), np.float32))[-1]
    return float(np.exp(log_softmax(logits))[0, 1])


@pytest.mark.parametrize(
    ("module", "iterations", "overrides"),
    [(ppo, 10, {}), (a2c, 40, {})],
    ids=["ppo", "a2c"],
)
def test_discrete_bandit_is_learned(module: ModuleType, iterations: int, overrides: Any) -> None:
    agent = train_on_bandit(module, False, iterations, **overrides)
    assert good_arm_probability(agent) > 0.9
    assert agent.act(np.zeros((3, 1), np.float32)).tolist() == [1, 1, 1]


@pytest.mark.parametrize(
    ("module", "iterations", "overrides"),
    [(ppo, 5, {"schedule": "constant"}), (a2c, 100, {})],
    ids=["ppo", "a2c"],
)
def test_continuous_bandit_mean_moves_to_optimum(
    module: ModuleType, iterations: int, overrides: Any
) -> None:
    agent = train_on_bandit(module, True, iterations, **overrides)
    mean = float(agent.act(np.zeros((1, 1), np.float32))[0, 0])
    assert abs(mean - 0.5) < 0.15, mean
