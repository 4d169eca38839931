"""DQN and ES: known-answer updates, bandits, replay semantics, config checks (their
determinism and checkpoints: tests/test_agents_determinism.py)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import Bandit

from rlsweep.agents import dqn, es
from rlsweep.agents.base import AgentContext
from rlsweep.agents.optim import Adam

# Agents train with one torch thread, as jobs do by default (see conftest).
pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]


class Counter(gym.Env[np.ndarray, Any]):
    """Observation = steps since reset; terminates at 3 steps, or is truncated by a TimeLimit."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space: gym.spaces.Space[Any] = gym.spaces.Discrete(2)

    def __init__(self, terminate: bool) -> None:
        self.terminate = terminate
        self.t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.terminate and self.t == 3, False, {}


def vector(make: Any, n: int) -> tuple[gym.vector.VectorEnv, np.ndarray]:
    envs = gym.vector.SyncVectorEnv([make] * n)
    obs, _ = envs.reset(seed=list(range(n)))
    return envs, obs


def build(module: ModuleType, envs: gym.vector.VectorEnv, obs: np.ndarray, **kw: Any) -> Any:
    config = module.Config(n_envs=envs.num_envs, **kw)
    return module.build(config, AgentContext(envs, obs, 10_000, np.random.default_rng(0)))


# --- DQN ---------------------------------------------------------------------------------

BANDIT_DQN = {
    "learning_rate": 1e-2,
    "buffer_size": 1000,
    "learning_starts": 0,
    "batch_size": 16,
    "train_freq": 16,
    "gradient_steps": 16,
    "net_arch": [16],
}


@pytest.mark.parametrize("dueling", [False, True], ids=["plain", "dueling"])
def test_dqn_learns_the_bandit_q_values(dueling: bool) -> None:
    """One-step episodes end in termination, so Q(s, a) = E[r | a]: exactly 0 and 1."""
    envs, obs = vector(Bandit, 2)
    agent = build(dqn, envs, obs, dueling=dueling, **BANDIT_DQN)
    for _ in range(40):
        agent.train_iteration()
    with torch.no_grad():
        q = agent.q_net(torch.zeros(1, 1))[0]
    torch.testing.assert_close(q, torch.tensor([0.0, 1.0]), atol=0.05, rtol=0)
    assert agent.act(np.zeros((3, 1), np.float32)).tolist() == [1, 1, 1]


def test_dueling_head_is_value_plus_centred_advantages_in_torch_and_numpy() -> None:
    net = dqn.QNetwork(2, 3, [], torch.Generator().manual_seed(0), dueling=True)
    layer = net.layers[0]
    assert isinstance(layer, torch.nn.Linear)
    with torch.no_grad():  # outputs: advantages (x0, 2 x0, 0), then the value x1
        layer.weight.copy_(torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 0.0], [0.0, 1.0]]))
        layer.bias.zero_()
    obs = torch.tensor([[3.0, 10.0], [-1.0, 0.5]])
    # mean advantage = x0; Q = x1 + A - x0 = (x1, x1 + x0, x1 - x0)
    expected = torch.tensor([[10.0, 13.0, 7.0], [0.5, -0.5, 1.5]])
    torch.testing.assert_close(net(obs), expected)
    np.testing.assert_allclose(dqn.q_values(net.array_pairs(), obs.numpy(), True), expected.numpy())


@pytest.mark.parametrize("terminate", [True, False], ids=["terminated", "truncated"])
def test_replay_drops_autoreset_steps_and_keeps_truncation_bootstrappable(
    terminate: bool,
) -> None:
    def make() -> gym.Env[np.ndarray, int]:
        return gym.wrappers.TimeLimit(Counter(terminate), max_episode_steps=3)

    envs, obs = vector(make, 2)
    agent = build(dqn, envs, obs, train_freq=16, learning_starts=1000)
    info = agent.train_iteration()
    buffer = agent.buffer
    # 8 vector steps per sub-env = two episodes of 3 steps plus 2 reset steps each.
    assert buffer.size == 12
    assert info.episode_returns == [3.0] * 4
    stored = slice(0, buffer.size)
    np.testing.assert_array_equal(buffer.next_obs[stored], buffer.obs[stored] + 1.0)
    np.testing.assert_array_equal(
        buffer.terminated[stored], (buffer.next_obs[stored, 0] == 3.0) & terminate
    )


@pytest.mark.parametrize("terminate", [True, False], ids=["terminated", "truncated"])
def test_n_step_returns_sum_discounted_rewards_up_to_the_episode_end(terminate: bool) -> None:
    """Counter episodes: observations 0, 1, 2 then 3 (the end), reward 1 per step.

    n = 2, gamma = 0.5: from 0 the return is 1 + 0.5 = 1.5, bootstrapping from 2 with
    discount 0.25; at the end, 1 (1.5 to 3, discount 0.25) and 2 (1 to 3, discount 0.5)
    are emitted together, terminal only if the episode terminated.
    """

    def make() -> gym.Env[np.ndarray, int]:
        return gym.wrappers.TimeLimit(Counter(terminate), max_episode_steps=3)

    envs, obs = vector(make, 2)
    agent = build(dqn, envs, obs, train_freq=8, learning_starts=1000, n_step=2, gamma=0.5)
    agent.train_iteration()  # 4 steps per sub-env: one episode each, then a reset step
    buffer = agent.buffer
    assert buffer.size == 6
    stored = slice(0, 6)
    end = float(terminate)
    # Step order: both sub-envs' first emission at step 2, then both episode ends at step 3.
    expected = [
        (0.0, 1.5, 2.0, 0.0, 0.25),
        (0.0, 1.5, 2.0, 0.0, 0.25),
        (1.0, 1.5, 3.0, end, 0.25),
        (2.0, 1.0, 3.0, end, 0.5),
        (1.0, 1.5, 3.0, end, 0.25),
        (2.0, 1.0, 3.0, end, 0.5),
    ]
    columns = [
        buffer.obs[stored, 0],
        buffer.rewards[stored],
        buffer.next_obs[stored, 0],
        buffer.terminated[stored],
        buffer.discounts[stored],
    ]
    np.testing.assert_array_equal(np.stack(columns, axis=1), np.array(expected, np.float32))
    # Nothing pending after the reset step; the next episode starts afresh.
    assert agent.accumulator.pending.tolist() == [0, 0]


def test_one_step_replay_stores_each_step_with_discount_gamma() -> None:
    envs, obs = vector(Bandit, 3)
    agent = build(dqn, envs, obs, train_freq=9, learning_starts=1000, gamma=0.9)
    agent.train_iteration()  # 3 vector steps: done, autoreset (not stored), done
    assert agent.buffer.size == 6
    np.testing.assert_array_equal(agent.buffer.discounts[:6], np.float32(0.9))
    np.testing.assert_array_equal(agent.buffer.terminated[:6], np.float32(1.0))


def test_dqn_exploration_schedule_and_target_updates() -> None:
    envs, obs = vector(Bandit, 2)
    agent = build(
        dqn, envs, obs, **{**BANDIT_DQN, "target_update_interval": 64, "exploration_fraction": 0.5}
    )
    assert agent.exploration_rate() == 1.0
    agent.num_timesteps = 2500  # a quarter of the 10,000-step budget: half-way down
    assert agent.exploration_rate() == pytest.approx(1.0 - 0.5 * 0.96)
    agent.num_timesteps = 6000
    assert agent.exploration_rate() == pytest.approx(0.04)
    agent.num_timesteps = 0

    def target_equals_online() -> bool:
        return all(
            torch.equal(a, b)
            for a, b in zip(agent.q_net.parameters(), agent.target_net.parameters(), strict=True)
        )

    # 16 env steps per iteration, an update every 64: after iterations 4, 8, ...
    synced = []
    for _ in range(8):
        agent.train_iteration()
        synced.append(target_equals_online())
    # Before the gradient phase of iterations 4 and 8 the target copies the online net;
    # the gradient steps then move the online net away again.
    assert synced == [False] * 8
    agent.config.gradient_steps = 0
    for _ in range(4):
        agent.train_iteration()
    assert target_equals_online()


def test_dqn_polyak_update_moves_the_target_part_way() -> None:
    envs, obs = vector(Bandit, 2)
    agent = build(dqn, envs, obs, **{**BANDIT_DQN, "tau": 0.5})
    online = [p.detach().clone() for p in agent.q_net.parameters()]
    with torch.no_grad():
        for p in agent.target_net.parameters():
            p.zero_()
    agent._update_target(2)  # (1 - 0.5)^2 of the old target stays: 0.75 of the online net
    for p, q in zip(agent.target_net.parameters(), online, strict=True):
        torch.testing.assert_close(p, 0.75 * q)


# --- ES ----------------------------------------------------------------------------------


def test_centered_ranks() -> None:
    ranks = es.centered_ranks(np.array([10.0, -3.0, 7.0, 0.0, 100.0]))
    np.testing.assert_allclose(ranks, [0.25, -0.5, 0.0, -0.25, 0.5])


def test_es_update_follows_the_rank_weighted_noise() -> None:
    """Returns increasing in eps . e_0: the ascent is sum_j (u+ - u-) eps_j / (n sigma)."""
    config = es.Config(n_envs=4, sigma=0.5, weight_decay=0.0, learning_rate=0.1)
    noise = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    returns = np.array([3.0, -3.0, 0.5, -0.5])  # ranks 1.0, 0.0, 0.667, 0.333 of 3 -> centred
    theta = torch.zeros(2)
    es.es_update(theta, Adam(0.1), noise, returns, config)
    # Weights: pair 0: 0.5 - (-0.5) = 1; pair 1: 1/6 - (-1/6) = 1/3; ascent = [1, 1/3] / 2.
    # Adam's first step moves each coordinate by lr in the sign of the ascent.
    torch.testing.assert_close(theta, torch.tensor([0.1, 0.1]))


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_es_learns_the_bandit(continuous: bool) -> None:
    envs, obs = vector(lambda: Bandit(continuous), 16)
    agent = build(
        es, envs, obs, learning_rate=0.05, net_arch=[8], output_gain=1.0, weight_decay=0.0
    )
    for _ in range(60):
        info = agent.train_iteration()
    assert info.env_steps == 16  # one vector step: every episode lasts one step
    action = agent.act(np.zeros((2, 1), np.float32))
    if continuous:
        assert abs(float(action[0, 0]) - 0.5) < 0.15, action
    else:
        assert action.tolist() == [1, 1]


def test_es_counts_every_sub_env_step_until_the_longest_episode_ends() -> None:
    envs, obs = vector(lambda: gym.make("CartPole-v1"), 4)
    agent = build(es, envs, obs)
    info = agent.train_iteration()
    assert info.env_steps == 4 * (max(info.episode_returns))
    assert len(info.episode_returns) == 4
    envs.close()


def test_es_population_members_are_antithetic_pairs() -> None:
    envs, obs = vector(lambda: Bandit(True), 4)
    agent = build(es, envs, obs, sigma=0.3)
    captured: list[np.ndarray] = []
    original = agent.evaluate_population

    def spy(params: np.ndarray, seeds: np.ndarray) -> tuple[np.ndarray, int]:
        captured.append(params.copy())
        assert seeds[0] == seeds[1] and seeds[2] == seeds[3]
        return original(params, seeds)

    agent.evaluate_population = spy
    theta = agent.theta.numpy().copy()
    agent.train_iteration()
    params = captured[0]
    np.testing.assert_allclose(params[0::2] + params[1::2], np.stack([2 * theta] * 2), atol=1e-5)
    assert not np.allclose(params[0], params[2])  # two independent directions


def test_es_batched_forward_matches_each_member_alone() -> None:
    envs, obs = vector(lambda: gym.make("Pendulum-v1"), 4)
    agent = build(es, envs, obs)
    rng = np.random.default_rng(1)
    params = rng.standard_normal((4, agent.n_params)).astype(np.float32)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    together = agent._policy(agent._layers(params), x)
    alone = [agent._policy(agent._layers(params[i : i + 1]), x[i : i + 1]) for i in range(4)]
    np.testing.assert_allclose(together, np.concatenate(alone), rtol=1e-6)
    assert np.all(np.abs(together) <= 2.0)
    envs.close()


# --- Shared: config (determinism and checkpoints: tests/test_agents_determinism.py) ------


@pytest.mark.parametrize(
    ("module", "overrides", "message"),
    [
        (dqn, {"learning_rate": 0.0}, "learning_rate"),
        (dqn, {"n_envs": 3, "train_freq": 256}, "multiple of n_envs"),
        (dqn, {"tau": 0.0}, "tau"),
        (dqn, {"exploration_final_eps": 1.5}, "exploration_final_eps"),
        (dqn, {"batch_size": 0}, "batch_size"),
        (dqn, {"learning_starts": -1}, "learning_starts"),
        (dqn, {"net_arch": []}, "net_arch"),
        (dqn, {"adam_eps": 0.0}, "adam_eps"),
        (dqn, {"n_step": 0}, "n_step"),
        (es, {"n_envs": 5}, "even"),
        (es, {"sigma": 0.0}, "sigma"),
        (es, {"weight_decay": -1.0}, "weight_decay"),
    ],
)
def test_config_rejects_out_of_range_values(
    module: ModuleType, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        module.Config(**overrides)


def test_dqn_refuses_continuous_actions() -> None:
    assert frozenset({"discrete"}) == dqn.ACTION_SPACES
    envs = gym.make_vec("Pendulum-v1", num_envs=1, vectorization_mode="sync")
    obs, _ = envs.reset(seed=[0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Discrete"):
        dqn.build(dqn.Config(), AgentContext(envs, obs, 100, np.random.default_rng(0)))
    envs.close()


@pytest.mark.parametrize("name", ["dqn", "es"])
def test_shipped_agent_yaml_matches_the_config(name: str) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("agent_yaml", ROOT / "scripts/agent_yaml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "conf/agent" / f"{name}.yaml").read_text() == module.agent_yaml(name)
