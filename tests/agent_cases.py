"""The agents' test cases and the helpers their determinism, checkpoint and state tests
share (tests/test_agents_determinism.py runs those tests on every case), and the job
config as a sweep validates it (:func:`job_config`).

A :class:`Case` is an agent module, an env and small settings; :meth:`Case.make` builds
the agent the way the job does: Snapshot-wrapped sub-envs (what a checkpoint saves), one
explicit seed per sub-env, the agent's own numpy stream. The process-global RNGs are not
seeded: nothing an agent computes may depend on them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlsweep.agents import a2c, dqn, es, ppo, sb3
from rlsweep.agents.base import AgentContext
from rlsweep.checkpoint import state_fingerprint
from rlsweep.config import EnvConfig, JobConfig, load_job_config
from rlsweep.envs import make_vector_env, seed_vector_env
from rlsweep.paths import conf_dir


@dataclass(frozen=True)
class Case:
    """One agent configuration to test."""

    id: str
    module: ModuleType
    env_id: str
    settings: dict[str, Any]
    total_steps: int = 50_000  # the budget schedules run over
    iterations: int = 3  # per run, and before and after a checkpoint
    # What a saved state must hold besides what every agent saves.
    check_state: Callable[[dict[str, Any]], None] = field(default=lambda state: None)

    def config(self) -> Any:
        return self.module.Config(**copy.deepcopy(self.settings))

    def make(
        self, seed: int, env_seed: int = 0, vectorization: str = "sync"
    ) -> tuple[Any, gym.vector.VectorEnv]:
        """The agent (its stream seeded with ``seed``) on its own vector env."""
        config = self.config()
        envs = make_vector_env(
            EnvConfig(id=self.env_id), config.n_envs, vectorization=vectorization, snapshots=True
        )
        obs = seed_vector_env(envs, [env_seed * 100 + i for i in range(config.n_envs)], None)
        context = AgentContext(envs, obs, self.total_steps, np.random.default_rng(seed))
        return self.module.build(config, context), envs

    def restore(self, envs: gym.vector.VectorEnv, state: dict[str, Any]) -> Any:
        """A new agent (another stream, the envs' random first observations) on ``envs``,
        loaded from ``state``."""
        first_obs = envs.observation_space.sample()
        context = AgentContext(envs, first_obs, self.total_steps, np.random.default_rng(5))
        agent = self.module.build(self.config(), context)
        agent.load_state_dict(state)
        return agent


def job_config(overrides: list[str]) -> JobConfig:
    """The job config composed from the shipped conf/ with ``overrides`` and validated, as
    a sweep validates every job before any starts. (Tests that call it restore Hydra's
    singletons after: the ``hydra_restore_singletons`` fixture.)"""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
        cfg = compose("config", overrides=overrides)
    return load_job_config(cfg)


def parameters(agent: Any) -> list[torch.Tensor]:
    """A copy of the agent's trained parameters (its networks', or ES's mean)."""
    if isinstance(agent, es.ESAgent):
        return [agent.theta.clone()]
    module: torch.nn.Module
    if isinstance(agent, dqn.DQNAgent):
        module = agent.q_net
    elif isinstance(agent, sb3.SB3Agent):
        module = agent.model.policy
    else:
        return list(agent.model.state_dict().values())
    return [t.detach().clone() for t in module.state_dict().values()]


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def fingerprint(agent: Any) -> str:
    """Every number in the agent's state (the job's own state fingerprint)."""
    return state_fingerprint(agent.state_dict())


def global_rngs() -> tuple[Any, ...]:
    """The state of Python's, numpy's and torch's process-global generators."""
    import random

    return random.getstate(), np.random.get_state(legacy=False), torch.get_rng_state()


def assert_same_global_rngs(before: tuple[Any, ...]) -> None:
    after = global_rngs()
    assert after[0] == before[0]
    np.testing.assert_equal(after[1], before[1])
    assert torch.equal(after[2], before[2])


def assert_replays_identically(
    agent: Any, restored: Any, continued: list[Any], replayed: list[Any], envs: gym.vector.VectorEnv
) -> None:
    """A restored agent's iterations (``replayed``) equal the original's (``continued``) bit
    for bit, and both act alike afterwards."""
    assert [i.episode_returns for i in continued] == [i.episode_returns for i in replayed]
    assert [i.env_steps for i in continued] == [i.env_steps for i in replayed]
    np.testing.assert_equal([i.stats for i in continued], [i.stats for i in replayed])
    obs = envs.observation_space.sample()
    np.testing.assert_array_equal(agent.act(obs), restored.act(obs))


def _sde_state(state: dict[str, Any]) -> None:
    assert set(state["collector"]["sde"]) == {"matrices", "generator"}


def _sb3_dqn_state(state: dict[str, Any]) -> None:
    # The filled part of the replay buffer: 3 iterations x 64 steps of 2 sub-envs.
    assert state["replay_buffer"]["pos"] == 96
    assert state["replay_buffer"]["observations"].shape == (96, 2, 4)


ON_POLICY = {"n_envs": 4, "n_steps": 16}
NORMALIZED = {"normalize_obs": True, "normalize_reward": True}
SDE = {**ON_POLICY, "use_sde": True, "sde_sample_freq": 4}
SMALL_DQN = {"buffer_size": 500, "gradient_steps": 8, "batch_size": 8, "net_arch": [16]}
DQN = {**SMALL_DQN, "n_envs": 2, "train_freq": 64}
# Small versions of the shipped SB3 configs (conf/agent/sb3_ppo.yaml, sb3_dqn.yaml).
SB3_PPO: dict[str, Any] = {
    "algo": "PPO",
    "n_envs": 4,
    "steps_per_iteration": 64,
    "hyperparameters": {
        "n_steps": 16,
        "batch_size": 32,
        "n_epochs": 2,
        "learning_rate": "lin_0.001",
        "clip_range": "lin_0.2",
    },
}
SB3_DQN: dict[str, Any] = {
    "algo": "DQN",
    "n_envs": 2,
    "steps_per_iteration": 64,
    "hyperparameters": {
        "learning_starts": 64,
        "buffer_size": 2_000,
        "batch_size": 32,
        "train_freq": 16,
        "gradient_steps": 4,
        "target_update_interval": 40,
        "exploration_fraction": 0.5,
        "policy_kwargs": {"net_arch": [32, 32]},
    },
}

CASES = [
    Case("ppo-discrete", ppo, "CartPole-v1", ON_POLICY, iterations=4),
    Case("a2c-discrete", a2c, "CartPole-v1", ON_POLICY, iterations=4),
    Case(
        "ppo-continuous-normalized",
        ppo,
        "Pendulum-v1",
        {**ON_POLICY, **NORMALIZED, "batch_size": 16},
        iterations=4,
    ),
    Case(
        "a2c-continuous-normalized", a2c, "Pendulum-v1", {**ON_POLICY, **NORMALIZED}, iterations=4
    ),
    Case(
        "ppo-sde-freq4",
        ppo,
        "Pendulum-v1",
        {**SDE, "batch_size": 16, "n_epochs": 2},
        check_state=_sde_state,
    ),
    Case(
        "a2c-sde-freq4-normalized",
        a2c,
        "Pendulum-v1",
        {**SDE, **NORMALIZED},
        check_state=_sde_state,
    ),
    Case(
        "ppo-sde-per-rollout-normalized",
        ppo,
        "Pendulum-v1",
        {**SDE, "sde_sample_freq": -1, "normalize_obs": True, "batch_size": 32, "n_epochs": 2},
        check_state=_sde_state,
    ),
    Case("dqn", dqn, "CartPole-v1", {**DQN, "learning_starts": 64}, total_steps=5_000),
    Case("dqn-polyak", dqn, "CartPole-v1", {**DQN, "learning_starts": 0, "tau": 0.1}, 5_000),
    Case("dqn-dueling", dqn, "CartPole-v1", {**DQN, "learning_starts": 0, "dueling": True}, 5_000),
    Case(
        "dqn-3-step",
        dqn,
        "CartPole-v1",
        {**DQN, "train_freq": 62, "learning_starts": 0, "n_step": 3},
        total_steps=5_000,
    ),
    Case("es-discrete", es, "CartPole-v1", {"n_envs": 4, "net_arch": [8]}, total_steps=5_000),
    Case("es-continuous", es, "Pendulum-v1", {"n_envs": 4, "net_arch": [8]}, total_steps=5_000),
    Case("sb3-ppo", sb3, "CartPole-v1", SB3_PPO, total_steps=5_000),
    Case("sb3-dqn", sb3, "CartPole-v1", SB3_DQN, total_steps=5_000, check_state=_sb3_dqn_state),
]
BY_ID = {case.id: case for case in CASES}
