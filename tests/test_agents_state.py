"""Agent registry, config validation, determinism and bit-for-bit checkpoint/restore."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import random
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import assert_replays_identically

from rlsweep.agents import BUILTIN_AGENTS, a2c, load_agent_module, ppo
from rlsweep.agents.base import AgentConfig, AgentContext

# Agents train with one torch thread, as jobs do by default (see conftest).
pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = {"n_envs": 4, "n_steps": 16}


def make_agent(
    module: ModuleType, env_id: str, seed: int, env_seed: int = 0, **overrides: Any
) -> tuple[Any, gym.vector.VectorEnv]:
    """Build an agent the way the job does: seeded envs, seeded global RNGs, own stream."""
    config = module.Config(**{**SMALL, **overrides})
    envs = gym.make_vec(env_id, num_envs=config.n_envs, vectorization_mode="sync")
    obs, _ = envs.reset(seed=[env_seed * 100 + i for i in range(config.n_envs)])  # type: ignore[arg-type]
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    context = AgentContext(envs, obs, 50_000, np.random.default_rng(seed))
    return module.build(config, context), envs


def parameters(agent: Any) -> list[torch.Tensor]:
    return list(agent.model.state_dict().values())


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


CASES = [
    (ppo, "CartPole-v1", {}),
    (a2c, "CartPole-v1", {}),
    (ppo, "Pendulum-v1", {"normalize_obs": True, "normalize_reward": True, "batch_size": 16}),
    (a2c, "Pendulum-v1", {"normalize_obs": True, "normalize_reward": True}),
]
IDS = ["ppo-discrete", "a2c-discrete", "ppo-continuous-normalized", "a2c-continuous-normalized"]


@pytest.mark.parametrize(("module", "env_id", "overrides"), CASES, ids=IDS)
def test_same_seeds_give_identical_parameters_and_different_seeds_differ(
    module: ModuleType, env_id: str, overrides: dict[str, Any]
) -> None:
    runs = []
    for seed in (0, 0, 1):
        agent, envs = make_agent(module, env_id, seed, **overrides)
        returns = [agent.train_iteration().episode_returns for _ in range(4)]
        runs.append((parameters(agent), returns))
        envs.close()
    assert same(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]
    assert not same(runs[0][0], runs[2][0])


def test_agent_seed_alone_changes_training() -> None:
    """Same init and envs, different agent stream: different actions, different params."""
    agents = []
    for stream in (0, 1):
        agent, envs = make_agent(ppo, "CartPole-v1", 0)
        agent.rng = agent.collector.rng = np.random.default_rng(stream)
        agent.train_iteration()
        agents.append(parameters(agent))
        envs.close()
    assert not same(*agents)


@pytest.mark.parametrize(("module", "env_id", "overrides"), CASES, ids=IDS)
def test_checkpoint_restore_continues_bit_for_bit(
    module: ModuleType, env_id: str, overrides: dict[str, Any]
) -> None:
    agent, envs = make_agent(module, env_id, 3, **overrides)
    for _ in range(3):
        agent.train_iteration()
    env_copy = copy.deepcopy(envs)
    state = copy.deepcopy(agent.state_dict())
    continued = [agent.train_iteration() for _ in range(3)]

    # A fresh agent: other global seeds, other agent stream, its own first observations.
    _, fresh_envs = make_agent(module, env_id, 99, env_seed=7, **overrides)
    fresh_envs.close()
    context = AgentContext(
        env_copy, env_copy.observation_space.sample(), 50_000, np.random.default_rng(5)
    )
    restored = module.build(module.Config(**{**SMALL, **overrides}), context)
    restored.load_state_dict(state)
    replayed = [restored.train_iteration() for _ in range(3)]

    assert same(parameters(agent), parameters(restored))
    assert_replays_identically(agent, restored, continued, replayed, envs)
    envs.close()
    env_copy.close()


def flatten(state: Any) -> list[Any]:
    """Every leaf of a nested state dict, arrays as bytes: equal iff bitwise equal."""
    if isinstance(state, dict):
        return [(key, flatten(state[key])) for key in sorted(state)]
    if isinstance(state, list | tuple):
        return [flatten(item) for item in state]
    if isinstance(state, torch.Tensor):
        return [state.numpy().tobytes()]
    if isinstance(state, np.ndarray):
        return [state.tobytes()]
    return [repr(state)]


def test_state_dict_is_a_snapshot() -> None:
    agent, envs = make_agent(ppo, "Pendulum-v1", 0, normalize_obs=True, normalize_reward=True)
    agent.train_iteration()
    state = agent.state_dict()
    before = flatten(copy.deepcopy(state))
    agent.train_iteration()
    assert flatten(state) == before
    assert flatten(agent.state_dict()) != before
    envs.close()


def test_iteration_info_counts_every_vector_step_slot() -> None:
    agent, envs = make_agent(a2c, "CartPole-v1", 0)
    info = agent.train_iteration()
    assert info.env_steps == SMALL["n_envs"] * SMALL["n_steps"]
    assert info.collect_seconds > 0 and info.train_seconds > 0
    assert {"policy_loss", "value_loss", "entropy", "learning_rate"} <= set(info.stats)
    envs.close()


def test_linear_schedule_decays_learning_rate_and_clip_range() -> None:
    agent, envs = make_agent(ppo, "CartPole-v1", 0)
    agent.total_steps = 4 * SMALL["n_envs"] * SMALL["n_steps"]
    infos = [agent.train_iteration() for _ in range(4)]
    assert [i.stats["learning_rate"] for i in infos] == pytest.approx([7.5e-4, 5e-4, 2.5e-4, 0.0])
    assert [i.stats["clip_range"] for i in infos] == pytest.approx([0.15, 0.1, 0.05, 0.0])
    envs.close()


def test_act_is_deterministic_and_clipped_to_the_action_bounds() -> None:
    agent, envs = make_agent(ppo, "Pendulum-v1", 0)
    assert agent.model.log_std is not None
    agent.model.actor[-1].bias.fill(100.0)
    obs = np.zeros((5, 3), np.float32)
    actions = agent.act(obs)
    assert actions.shape == (5, 1)
    assert np.all(actions == 2.0)
    np.testing.assert_array_equal(actions, agent.act(obs))
    envs.close()


def test_unsupported_spaces_are_refused() -> None:
    envs = gym.make_vec("FrozenLake-v1", num_envs=2, vectorization_mode="sync")
    obs, _ = envs.reset(seed=[0, 1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Box observation space"):
        ppo.build(ppo.Config(n_envs=2), AgentContext(envs, obs, 100, np.random.default_rng(0)))
    envs.close()
    envs = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    obs, _ = envs.reset(seed=[0, 1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_envs"):
        ppo.build(ppo.Config(n_envs=3), AgentContext(envs, obs, 100, np.random.default_rng(0)))
    envs.close()


def test_registry_loads_builtins_and_dotted_paths() -> None:
    assert BUILTIN_AGENTS == ("ppo", "a2c", "dqn", "es", "sb3")
    assert load_agent_module("ppo") is ppo
    assert load_agent_module("a2c") is a2c
    assert load_agent_module("rlsweep.agents.a2c") is a2c
    with pytest.raises(ValueError, match=r"unknown agent 'sac'.*ppo, a2c, dqn, es, sb3"):
        load_agent_module("sac")
    with pytest.raises(ModuleNotFoundError):
        load_agent_module("no_such_package.agent")


@pytest.mark.parametrize("module", [ppo, a2c], ids=["ppo", "a2c"])
def test_config_contract(module: ModuleType) -> None:
    assert issubclass(module.Config, AgentConfig)
    assert frozenset({"discrete", "continuous"}) == module.ACTION_SPACES
    assert module.Config().name == module.__name__.rsplit(".", 1)[-1]
    # Every field has a '#' doc comment right above its declaration in some class of the MRO.
    sources = "\n".join(
        inspect.getsource(cls)
        for cls in module.Config.__mro__
        if "__dataclass_fields__" in vars(cls)
    )
    lines = sources.splitlines()
    for field in dataclasses.fields(module.Config):
        declared = [i for i, line in enumerate(lines) if line.strip().startswith(f"{field.name}:")]
        assert declared, field.name
        assert all(lines[i - 1].strip().startswith("#") for i in declared), field.name


def test_zoo_defaults() -> None:
    p = ppo.Config()
    assert (p.n_envs, p.n_steps, p.batch_size, p.n_epochs) == (8, 32, 256, 20)
    assert (p.gamma, p.gae_lambda, p.learning_rate, p.clip_range) == (0.98, 0.8, 1e-3, 0.2)
    assert (p.schedule, p.ent_coef, p.vf_coef, p.max_grad_norm) == ("linear", 0.0, 0.5, 0.5)
    assert p.normalize_advantage and not p.normalize_obs and not p.normalize_reward
    a = a2c.Config()
    assert (a.n_envs, a.n_steps, a.gamma, a.gae_lambda, a.learning_rate) == (8, 5, 0.99, 1.0, 7e-4)
    assert (a.ent_coef, a.vf_coef, a.max_grad_norm, a.normalize_advantage) == (0.0, 0.5, 0.5, False)
    assert (a.rms_prop_alpha, a.rms_prop_eps, a.schedule) == (0.99, 1e-5, "constant")


BAD_VALUES = [
    (ppo, "n_envs", 0),
    (ppo, "n_steps", 0),
    (ppo, "gamma", 1.5),
    (ppo, "gamma", -0.1),
    (ppo, "gae_lambda", 1.01),
    (ppo, "learning_rate", 0.0),
    (ppo, "schedule", "cosine"),
    (ppo, "ent_coef", -0.01),
    (ppo, "vf_coef", -1.0),
    (ppo, "max_grad_norm", 0.0),
    (ppo, "batch_size", 0),
    (ppo, "n_epochs", 0),
    (ppo, "clip_range", 0.0),
    (ppo, "clip_range_vf", -0.2),
    (ppo, "target_kl", 0.0),
    (a2c, "n_steps", -5),
    (a2c, "gamma", 2.0),
    (a2c, "rms_prop_alpha", 1.0),
    (a2c, "rms_prop_eps", 0.0),
]


@pytest.mark.parametrize(
    ("module", "field", "value"),
    BAD_VALUES,
    ids=[f"{m.__name__.rsplit('.', 1)[-1]}-{f}={v}" for m, f, v in BAD_VALUES],
)
def test_out_of_range_values_name_the_field(module: ModuleType, field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"^{field} must be"):
        module.Config(**{field: value})


def test_optional_fields_accept_none_and_valid_values() -> None:
    config = ppo.Config(clip_range_vf=0.2, target_kl=0.01, gamma=1.0, gae_lambda=0.0)
    assert config.clip_range_vf == 0.2 and config.target_kl == 0.01
    assert ppo.Config().clip_range_vf is None and ppo.Config().target_kl is None
