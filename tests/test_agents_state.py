"""Agent registry, config validation and the on-policy agents' loop (their determinism
and checkpoints: tests/test_agents_determinism.py)."""

from __future__ import annotations

import dataclasses
import inspect
import re
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from agent_cases import ON_POLICY, Case, job_config, parameters, same

from rlsweep.agents import BUILTIN_AGENTS, a2c, load_agent_module, ppo
from rlsweep.agents.base import AgentConfig, AgentContext
from rlsweep.agents.configs import observation_problem
from rlsweep.errors import ConfigError

# Agents train with one torch thread, as jobs do by default (see conftest).
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def on_policy_agent(
    module: ModuleType, env_id: str, seed: int = 0
) -> tuple[Any, gym.vector.VectorEnv]:
    return Case(module.__name__, module, env_id, ON_POLICY).make(seed)


def test_agent_seed_alone_changes_training() -> None:
    """Same init and envs, different agent stream: different actions, different params."""
    agents = []
    for stream in (0, 1):
        agent, envs = on_policy_agent(ppo, "CartPole-v1", 0)
        agent.rng = agent.collector.rng = np.random.default_rng(stream)
        agent.train_iteration()
        agents.append(parameters(agent))
        envs.close()
    assert not same(*agents)


def test_iteration_info_counts_every_vector_step_slot() -> None:
    agent, envs = on_policy_agent(a2c, "CartPole-v1", 0)
    info = agent.train_iteration()
    assert info.env_steps == ON_POLICY["n_envs"] * ON_POLICY["n_steps"]
    assert info.collect_seconds > 0 and info.train_seconds > 0
    assert {"policy_loss", "value_loss", "entropy", "learning_rate"} <= set(info.stats)
    envs.close()


def test_linear_schedule_decays_learning_rate_and_clip_range() -> None:
    agent, envs = on_policy_agent(ppo, "CartPole-v1", 0)
    agent.total_steps = 4 * ON_POLICY["n_envs"] * ON_POLICY["n_steps"]
    infos = [agent.train_iteration() for _ in range(4)]
    assert [i.stats["learning_rate"] for i in infos] == pytest.approx([7.5e-4, 5e-4, 2.5e-4, 0.0])
    assert [i.stats["clip_range"] for i in infos] == pytest.approx([0.15, 0.1, 0.05, 0.0])
    envs.close()


def test_act_is_deterministic_and_clipped_to_the_action_bounds() -> None:
    agent, envs = on_policy_agent(ppo, "Pendulum-v1", 0)
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


@pytest.mark.usefixtures("hydra_restore_singletons")
@pytest.mark.parametrize(
    ("overrides", "key", "network"),
    [
        (["agent=ppo", "+agent.policy=CnnPolicy"], "policy", r"a tanh MLP of \(64, 64\)"),
        (["agent=a2c", "+agent.net_arch=[256,256]"], "net_arch", r"a tanh MLP of \(64, 64\)"),
        (["agent=dqn", "+agent.activation_fn=tanh"], "activation_fn", "a ReLU MLP"),
        (["agent=es", "+agent.policy_kwargs={net_arch:[8]}"], "policy_kwargs", "a tanh MLP"),
    ],
    ids=["ppo-policy", "a2c-net_arch", "dqn-activation", "es-policy_kwargs"],
)
def test_a_network_a_builtin_agent_lacks_is_refused_by_name(
    overrides: list[str], key: str, network: str
) -> None:
    """Before any job starts: the key, the agent's own network, and where other networks
    are (the SB3 adapter, your own agent)."""
    name = overrides[0].removeprefix("agent=")
    with pytest.raises(ConfigError) as raised:
        job_config(overrides)
    message = str(raised.value)
    assert message.startswith(f"Unsupported config key 'agent.{key}' for agent.name='{name}'")
    assert re.search(f"the built-in {name}'s network is {network}", message)
    assert "vector observations" in message and "agent=sb3_ppo" in message
    assert "CnnPolicy" in message and "your own agent" in message


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_the_networks_own_settings_are_accepted() -> None:
    assert job_config(["agent=dqn", "agent.net_arch=[32]"]).agent.net_arch == [32]
    assert job_config(["agent=es", "agent.net_arch=[]"]).agent.net_arch == []


class Images(gym.Env[np.ndarray, np.int64]):
    """Pixel observations: a built-in agent's MLP does not take them."""

    observation_space = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return np.zeros((8, 8, 3), np.uint8), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return np.zeros((8, 8, 3), np.uint8), 0.0, False, False, {}


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_observations_a_builtin_agent_cannot_read_are_refused_before_any_job() -> None:
    with pytest.raises(
        ConfigError, match=r"Invalid env\.id='FrozenLake-v1' for agent\.name"
    ) as raised:
        job_config(["agent=ppo", "env.id=FrozenLake-v1"])
    assert "needs a Box observation space of vector observations" in str(raised.value)
    assert "got a Discrete observation space, not a Box" in str(raised.value)
    assert "agent=sb3_ppo" in str(raised.value)

    box = gym.spaces.Box
    for name in ("ppo", "a2c", "dqn", "es"):
        assert observation_problem(name, box(-1.0, 1.0, (4,))) is None
        assert observation_problem(name, box(-1.0, 1.0, (4, 3))) is None  # flattened
        assert observation_problem(name, box(0, 255, (128,), np.uint8)) is None  # e.g. RAM
        for image in (box(0, 255, (8, 8, 3), np.uint8), box(0, 255, (8, 8), np.uint8)):
            assert "image observations" in str(observation_problem(name, image))
        assert observation_problem(name, box(0.0, 1.0, (3, 8, 8))) is not None
    assert observation_problem("sb3", box(0, 255, (8, 8, 3), np.uint8)) is None  # CnnPolicy

    envs = gym.vector.SyncVectorEnv([Images, Images])
    obs, _ = envs.reset(seed=[0, 1])
    with pytest.raises(ValueError, match=r"agent 'ppo' needs .*got image observations"):
        ppo.build(ppo.Config(n_envs=2), AgentContext(envs, obs, 100, np.random.default_rng(0)))
    envs.close()
