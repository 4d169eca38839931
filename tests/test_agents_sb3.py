"""The Stable-Baselines3 adapter (rlsweep/agents/sb3/): the job's per-sub-env seeds,
SB3's VecEnv semantics on gymnasium's NEXT_STEP vector env, a job stopped and resumed, and
the CLI. Its bit-for-bit re-runs and resumes (PPO; DQN with its replay buffer) are in
tests/test_agents_determinism.py, with every other agent's."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from agent_cases import BY_ID, SB3_PPO, job_config
from conftest import Bandit
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

from rlsweep import checkpoint
from rlsweep.agents import load_agent_module, sb3
from rlsweep.agents.base import AgentContext
from rlsweep.config import EnvConfig
from rlsweep.envs import Snapshot, make_vector_env, seed_vector_env
from rlsweep.errors import ConfigError, Preempted
from rlsweep.job import train_and_evaluate
from rlsweep.seeding import derive_job_seeds

# Agents train with one torch thread, as jobs do by default (see conftest).
pytestmark = pytest.mark.usefixtures("one_torch_thread")

CARTPOLE = EnvConfig(id="CartPole-v1")


def test_vec_env_steps_like_sb3s_dummy_vec_env() -> None:
    """Same seeds, same actions: the adapter on gymnasium's NEXT_STEP vector env returns
    what SB3's DummyVecEnv (+ Monitor) returns: the next episode's first observation in the
    step that ended one, the terminal observation and truncation in its info, and no
    extra reset step."""
    n, seeds = 3, [11, 22, 33]
    spec = EnvConfig(id="CartPole-v1", max_episode_steps=12)  # truncations too
    envs = make_vector_env(spec, n, snapshots=True)
    first = seed_vector_env(envs, seeds, None)
    adapter = sb3.RlsweepVecEnv(envs, first, copy.deepcopy(envs.single_action_space))
    dummy = DummyVecEnv(
        [lambda: Monitor(gym.make("CartPole-v1", max_episode_steps=12)) for _ in range(n)]
    )
    dummy._seeds = list(seeds)  # one seed per sub-env, as the job's (not seed + i)

    np.testing.assert_array_equal(adapter.reset(), dummy.reset())
    actions = np.random.default_rng(0).integers(0, 2, size=(120, n))
    ended = truncated = 0
    returns: list[float] = []
    for a in actions:
        obs, rew, done, info = adapter.step(a)
        d_obs, d_rew, d_done, d_info = dummy.step(a)
        np.testing.assert_array_equal(obs, d_obs)
        np.testing.assert_array_equal(rew, d_rew)
        np.testing.assert_array_equal(done, d_done)
        assert rew.dtype == d_rew.dtype == np.float32
        for i in np.flatnonzero(done):
            np.testing.assert_array_equal(
                info[i]["terminal_observation"], d_info[i]["terminal_observation"]
            )
            assert info[i]["TimeLimit.truncated"] == d_info[i]["TimeLimit.truncated"]
            assert info[i]["episode"]["r"] == d_info[i]["episode"]["r"]
            assert info[i]["episode"]["l"] == d_info[i]["episode"]["l"]
            returns.append(d_info[i]["episode"]["r"])
            ended += 1
            truncated += info[i]["TimeLimit.truncated"]
    assert ended > 20 and 0 < truncated < ended
    assert adapter.pop_finished() == returns and adapter.pop_finished() == []
    with pytest.raises(RuntimeError, match="seed"):
        adapter.seed(0)
    envs.close()
    dummy.close()


@pytest.fixture
def reset_seeds(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[int, list[Any]]]:
    """The ``seed`` of every reset of every Snapshot-wrapped sub-env, by sub-env."""
    calls: dict[int, list[Any]] = {}
    original = Snapshot.reset

    def reset(self: Snapshot, **kwargs: Any) -> Any:
        calls.setdefault(id(self), []).append(kwargs.get("seed"))
        return original(self, **kwargs)

    monkeypatch.setattr(Snapshot, "reset", reset)
    yield calls


def test_sub_envs_use_the_jobs_seeds_and_are_never_reseeded(
    reset_seeds: dict[int, list[Any]],
) -> None:
    """Each sub-env starts from the job's own derived seed (SB3's seed + i is never used:
    replicate 0's sub-env 1 is not replicate 1's sub-env 0), later episodes continue each
    sub-env's stream, and the process-global RNGs are left as they were."""
    config = sb3.Config(**copy.deepcopy(SB3_PPO))
    first_obs = {}
    for replicate in (0, 1):
        seeds = derive_job_seeds(
            root=0,
            replicate=replicate,
            env_identity=CARTPOLE.identity(),
            agent_identity=config.identity(),
            n_train_envs=config.n_envs,
            n_eval_episodes=1,
        )
        reset_seeds.clear()
        envs = make_vector_env(CARTPOLE, config.n_envs, snapshots=True)
        obs = seed_vector_env(envs, seeds.train_envs, seeds.action_space)
        numpy_before = copy.deepcopy(np.random.get_state(legacy=False))
        torch_before = torch.get_rng_state()
        agent = sb3.build(
            config, AgentContext(envs, obs, 5_000, np.random.default_rng(seeds.agent))
        )
        np.testing.assert_array_equal(agent.model._last_obs, obs)
        info = agent.train_iteration()
        agent.train_iteration()
        assert info.episode_returns  # episodes ended, so sub-envs were reset
        np.testing.assert_equal(np.random.get_state(legacy=False), numpy_before)
        assert torch.equal(torch.get_rng_state(), torch_before)

        envs_by_id = {id(env): i for i, env in enumerate(envs.envs)}  # type: ignore[attr-defined]
        calls = {envs_by_id[key]: seeds_ for key, seeds_ in reset_seeds.items()}
        assert sorted(calls) == list(range(config.n_envs))
        for i, seeds_of_env in calls.items():
            assert seeds_of_env[0] == seeds.train_envs[i]  # the job's seed for sub-env i
            assert all(s is None for s in seeds_of_env[1:])  # then its own stream only
        assert sum(len(s) for s in calls.values()) > config.n_envs
        for i, seed in enumerate(seeds.train_envs):
            reference, _ = gym.make("CartPole-v1").reset(seed=seed)
            np.testing.assert_array_equal(obs[i], reference)
        first_obs[replicate] = obs
        envs.close()
    assert not np.array_equal(first_obs[0][1], first_obs[1][0])


def test_schedules_run_over_the_jobs_budget() -> None:
    """lin_ schedules decay over the budget (total_steps), not over one learn call."""
    agent, envs = dataclasses.replace(BY_ID["sb3-ppo"], total_steps=4 * 64).make(0)
    rates = [agent.train_iteration().stats["learning_rate"] for _ in range(5)]
    assert rates == pytest.approx([7.5e-4, 5e-4, 2.5e-4, 0.0, 0.0])
    envs.close()


def test_ppo_learns_the_bandit() -> None:
    n = 4
    envs = gym.vector.SyncVectorEnv([Bandit for _ in range(n)])
    obs, _ = envs.reset(seed=list(range(n)))
    settings: dict[str, Any] = {
        "algo": "PPO",
        "n_envs": n,
        "steps_per_iteration": 64,
        "hyperparameters": {"n_steps": 16, "batch_size": 32, "learning_rate": 0.01},
    }
    agent = sb3.build(
        sb3.Config(**settings), AgentContext(envs, obs, 2_000, np.random.default_rng(0))
    )
    infos = [agent.train_iteration() for _ in range(10)]
    assert len(infos[0].episode_returns) == 64  # every step ends a one-step episode
    assert np.mean(infos[-1].episode_returns) > 0.9
    np.testing.assert_array_equal(agent.act(np.zeros((2, 1), np.float32)), [1, 1])
    envs.close()


def test_unsupported_algorithms_spaces_and_settings_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^algo must be .*Did you mean 'PPO'"):
        sb3.Config(algo="ppo")
    with pytest.raises(ValueError, match=r"^algo 'no_such_pkg.X': cannot import"):
        sb3.Config(algo="no_such_pkg.X")
    with pytest.raises(ValueError, match=r"^hyperparameters.n_step is not .*'n_steps'"):
        sb3.Config(hyperparameters={"n_step": 8})
    with pytest.raises(ValueError, match=r"^hyperparameters.seed cannot be set"):
        sb3.Config(hyperparameters={"seed": 1})
    with pytest.raises(ValueError, match=r"^hyperparameters.learning_rate: 'lin_x'"):
        sb3.Config(hyperparameters={"learning_rate": "lin_x"})
    with pytest.raises(ValueError, match=r"^policy must be one of"):
        sb3.Config(policy="Mlp")
    with pytest.raises(ValueError, match=r"^steps_per_iteration must be >= 1"):
        sb3.Config(steps_per_iteration=0)

    envs = gym.make_vec("Pendulum-v1", num_envs=1, vectorization_mode="sync")
    obs, _ = envs.reset(seed=[0])  # type: ignore[arg-type]
    context = AgentContext(envs, obs, 100, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"DQN cannot train on this env .*Box"):
        sb3.build(sb3.Config(algo="DQN", n_envs=1), context)
    with pytest.raises(ValueError, match="n_envs is 2"):
        sb3.build(sb3.Config(algo="SAC", n_envs=2), context)
    envs.close()


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_shipped_configs_load_and_bad_ones_name_the_key() -> None:
    for name, algo in (("sb3_ppo", "PPO"), ("sb3_a2c", "A2C"), ("sb3_dqn", "DQN")):
        agent = job_config([f"agent={name}"]).agent
        assert isinstance(agent, sb3.Config) and agent.algo == algo
        assert load_agent_module(agent.name) is sb3
    ppo = job_config(["agent=sb3_ppo"]).agent
    assert isinstance(ppo, sb3.Config)
    assert (ppo.n_envs, ppo.steps_per_iteration) == (8, 256)
    assert ppo.hyperparameters == {
        "n_steps": 32,
        "batch_size": 256,
        "gae_lambda": 0.8,
        "gamma": 0.98,
        "n_epochs": 20,
        "ent_coef": 0.0,
        "learning_rate": "lin_0.001",
        "clip_range": "lin_0.2",
    }
    with pytest.raises(ConfigError, match=r"agent\.algo must be"):
        job_config(["agent=sb3_ppo", "agent.algo=FOO"])
    with pytest.raises(ConfigError, match=r"agent\.hyperparameters\.n_step is not"):
        job_config(["agent=sb3_ppo", "+agent.hyperparameters.n_step=3"])


@pytest.mark.usefixtures("hydra_restore_singletons")
@pytest.mark.parametrize(
    ("overrides", "boundary", "resumed_at"),
    [
        (["agent=sb3_ppo"], 3, 512),
        # Stopped at step 640: the replay buffer holds 640 transitions, 340 of them since
        # the gradient steps began.
        (
            [
                *("agent=sb3_dqn", "agent.hyperparameters.learning_starts=300"),
                *("agent.hyperparameters.gradient_steps=8", "agent.steps_per_iteration=128"),
                "agent.hyperparameters.train_freq=128",
            ],
            6,
            640,
        ),
    ],
    ids=["ppo", "dqn"],
)
def test_stopped_and_resumed_job_is_bitwise_equal_to_uninterrupted(
    overrides: list[str],
    boundary: int,
    resumed_at: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job's checkpoint (agent state, Snapshot-wrapped envs, global RNGs) resumes an
    SB3 agent mid-training exactly."""
    budget = ["train.total_steps=1024", "eval.every_steps=512", "eval.episodes=2"]
    job = job_config([*overrides, *budget, "train.checkpoint_every_s=null"])
    reference = train_and_evaluate(job, tmp_path / "reference")

    calls = [0]

    def stop_requested() -> str | None:
        calls[0] += 1
        return "test stop" if calls[0] == boundary else None

    monkeypatch.setattr(checkpoint, "stop_requested", stop_requested)
    with pytest.raises(Preempted, match="test stop"):
        train_and_evaluate(job, tmp_path / "interrupted")
    resumed = train_and_evaluate(job, tmp_path / "interrupted")

    assert resumed["resumed_at_steps"] == [resumed_at]
    assert resumed["state_sha256"] == reference["state_sha256"]
    assert resumed["final_episode_returns"] == reference["final_episode_returns"]
