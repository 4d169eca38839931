"""Rollout collection under gymnasium's NEXT_STEP autoreset, GAE, and normalisation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from reference_agents import TorchActorCritic

from rlsweep.agents.networks import ActorCritic
from rlsweep.agents.normalize import ObsNormalizer, RewardScaler, RunningMeanStd
from rlsweep.agents.numpy_policy import NumpyPolicy
from rlsweep.agents.rollout import RolloutBuffer, RolloutCollector, compute_gae


class Counter(gym.Env[np.ndarray, np.int64]):
    """Observation = steps taken; reward 1 per step; ends after ``length`` steps.

    ``truncate`` makes the end a time-limit truncation instead of a termination.
    """

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int, truncate: bool = False) -> None:
        self.length, self.truncate, self.t = length, truncate, 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        end = self.t >= self.length
        obs = np.array([float(self.t)], np.float32)
        return obs, 1.0, end and not self.truncate, end and self.truncate, {}


def counter_collector(lengths: list[int], n_steps: int, truncate: bool = False) -> RolloutCollector:
    def factory(length: int) -> Callable[[], gym.Env[np.ndarray, np.int64]]:
        return lambda: Counter(length, truncate)

    envs = gym.vector.SyncVectorEnv([factory(n) for n in lengths])
    obs, _ = envs.reset(seed=list(range(len(lengths))))
    model = ActorCritic(1, 2, discrete=True)
    rng = np.random.default_rng(0)
    return RolloutCollector(envs, obs, 1, model, n_steps, rng, None, None)


def test_gae_matches_hand_computation() -> None:
    # One sub-env, six steps: a truncation at t=1 (its reset slot at t=2), a termination
    # at t=3 (reset slot at t=4), then an unfinished episode bootstrapped from last_value.
    rewards = np.array([[1.0], [2.0], [0.0], [3.0], [0.0], [4.0]], np.float32)
    values = np.array([[0.5], [0.6], [0.7], [0.8], [0.9], [1.0]], np.float32)
    terminated = np.array([[0], [0], [0], [1], [0], [0]], bool)
    truncated = np.array([[0], [1], [0], [0], [0], [0]], bool)
    valid = np.array([[1], [1], [0], [1], [0], [1]], bool)
    last_value = np.array([2.0], np.float32)
    g, lam = 0.9, 0.8

    adv, ret = compute_gae(
        rewards, values, terminated, terminated | truncated, valid, last_value, g, lam
    )

    a5 = 4.0 + g * 2.0 - 1.0  # bootstrap from V(obs after the rollout)
    a4 = 0.0  # reset slot: masked
    a3 = 3.0 - 0.8  # termination: no bootstrap, no recursion
    a2 = 0.0  # reset slot: masked
    a1 = 2.0 + g * 0.7 - 0.6  # truncation: bootstrap from V(final obs) = values[2]
    a0 = (1.0 + g * 0.6 - 0.5) + g * lam * a1
    expected = np.array([[a0], [a1], [a2], [a3], [a4], [a5]], np.float32)
    np.testing.assert_allclose(adv, expected, rtol=1e-6)
    np.testing.assert_allclose(ret, expected + values, rtol=1e-6)


def test_gae_does_not_leak_across_sub_envs_and_lambda_one_is_monte_carlo() -> None:
    rewards = np.array([[1.0, 10.0], [1.0, 10.0], [1.0, 10.0]], np.float32)
    values = np.zeros((3, 2), np.float32)
    no = np.zeros((3, 2), bool)
    terminated = np.array([[0, 0], [0, 0], [1, 0]], bool)
    adv, _ = compute_gae(
        rewards, values, terminated, terminated, ~no, np.array([0.0, 5.0], np.float32), 0.5, 1.0
    )
    np.testing.assert_allclose(adv[:, 0], [1.75, 1.5, 1.0])
    np.testing.assert_allclose(adv[:, 1], [10 + 5 + 2.5 + 0.625, 10 + 5 + 1.25, 10 + 2.5])


def test_buffer_batch_drops_reset_slots() -> None:
    buf = RolloutBuffer(3, 2, 1, (), np.int64)
    buf.obs[..., 0] = np.arange(6).reshape(3, 2)
    buf.valid[:] = [[True, True], [False, True], [True, False]]
    batch = buf.batch(0.99, 0.95)
    assert batch.obs[:, 0].tolist() == [0.0, 1.0, 3.0, 4.0]
    assert all(t.shape[0] == 4 for t in batch)


@pytest.mark.parametrize("truncate", [False, True])
def test_collector_marks_next_step_reset_slots(truncate: bool) -> None:
    collector = counter_collector([3, 2], n_steps=8, truncate=truncate)
    returns = collector.collect()
    buf = collector.buffer
    # Sub-env 0 ends every 3 steps, sub-env 1 every 2; the step after each end is a reset.
    assert buf.valid[:, 0].tolist() == [1, 1, 1, 0, 1, 1, 1, 0]
    assert buf.valid[:, 1].tolist() == [1, 1, 0, 1, 1, 0, 1, 1]
    # The observation at a reset slot is the final observation of the ended episode,
    # so the value computed there is V(final obs), the truncation bootstrap.
    assert buf.obs[:, 0, 0].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert buf.obs[:, 1, 0].tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    assert buf.dones[:, 0].tolist() == [0, 0, 1, 0, 0, 0, 1, 0]
    assert buf.terminated[:, 0].tolist() == ([0] * 8 if truncate else [0, 0, 1, 0, 0, 0, 1, 0])
    assert buf.rewards[~buf.valid].tolist() == [0.0] * int((~buf.valid).sum())
    assert sorted(returns) == [2.0, 2.0, 2.0, 3.0, 3.0]
    # Sub-env 1 ended on the last step: the next rollout starts with its reset slot.
    collector.collect()
    assert buf.valid[:, 0].tolist() == [1, 1, 1, 0, 1, 1, 1, 0]
    assert buf.valid[:, 1].tolist() == [0, 1, 1, 0, 1, 1, 0, 1]


def test_collector_carries_a_pending_reset_into_the_next_rollout() -> None:
    collector = counter_collector([2], n_steps=2)
    assert collector.collect() == [2.0]
    assert collector.episodes.reset_next.tolist() == [True]
    assert collector.collect() == []
    assert collector.buffer.valid[:, 0].tolist() == [False, True]
    # Values at the reset slot are V(final obs), as the numpy policy computes them.
    policy = NumpyPolicy(collector.model)
    expected = policy.forward(np.array([[2.0]], np.float32))[1]
    np.testing.assert_allclose(collector.buffer.values[0, 0], expected[0], rtol=1e-6)


def test_running_mean_std_matches_numpy_over_all_batches() -> None:
    rng = np.random.default_rng(0)
    data = [rng.normal(3.0, 2.0, (n, 3)) for n in (1, 7, 50, 2)]
    rms = RunningMeanStd((3,))
    for batch in data:
        rms.update(batch)
    everything = np.concatenate(data)
    np.testing.assert_allclose(rms.mean, everything.mean(0), rtol=1e-4)
    np.testing.assert_allclose(rms.var, everything.var(0), rtol=1e-3)


def test_obs_normalizer_standardises_and_clips() -> None:
    norm = ObsNormalizer((2,))
    norm.update(np.array([[0.0, 99.0], [2.0, 100.0], [4.0, 101.0]]))
    out = norm.normalize(np.array([[2.0, 100.0], [4.0, 1e9]]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0], [0.0, 0.0], atol=1e-2)
    assert out[1, 0] == pytest.approx(2.0 / np.sqrt(8.0 / 3.0), rel=1e-3)
    assert out[1, 1] == 10.0


def test_reward_scaler_divides_by_discounted_return_std_and_resets_at_done() -> None:
    scaler = RewardScaler(n_envs=2, gamma=0.5)
    all_valid = np.array([True, True])
    scaler(np.array([1.0, 2.0]), np.array([False, True]), all_valid)
    # Sub-env 0's return continues (1 * 0.5 + 1); sub-env 1's restarted (0 + 1).
    scaler(np.array([1.0, 1.0]), np.array([False, False]), all_valid)
    np.testing.assert_allclose(scaler.returns, [1.5, 1.0])
    rms = RunningMeanStd(())
    rms.update(np.array([1.0, 2.0]))
    rms.update(np.array([1.5, 1.0]))
    np.testing.assert_allclose(scaler.rms.var, rms.var)
    out = scaler(np.array([3.0, 0.0]), np.array([False, False]), np.array([True, False]))
    assert scaler.rms.count == pytest.approx(rms.count + 1)  # the reset slot is not counted
    assert out[0] == pytest.approx(3.0 / np.sqrt(scaler.rms.var + 1e-8))


def test_numpy_policy_matches_torch_forward() -> None:
    torch.manual_seed(0)
    for discrete in (True, False):
        network = ActorCritic(5, 3, discrete)
        model = TorchActorCritic(network)
        obs = torch.randn(16, 5)
        policy = NumpyPolicy(network)
        out, value = policy.forward(obs.numpy())
        with torch.no_grad():
            np.testing.assert_allclose(
                policy.deterministic_action(obs.numpy()),
                model.deterministic_action(obs).numpy(),
                rtol=1e-5,
                atol=1e-6,
            )
            np.testing.assert_allclose(out, model.actor(obs).numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(value, model.get_value(obs).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("use_sde", [False, True])
def test_a_refreshed_numpy_policy_equals_a_new_one_after_an_update(use_sde: bool) -> None:
    torch.manual_seed(2)
    model = ActorCritic(5, 2, discrete=False, use_sde=use_sde)
    policy = NumpyPolicy(model)
    with torch.no_grad():  # an "update": every parameter moves, log_std included
        model.flat.add_(torch.randn_like(model.flat))
    obs = np.random.default_rng(0).normal(size=(6, 5)).astype(np.float32)
    stale = policy.forward(obs)
    policy.refresh()
    fresh = NumpyPolicy(model)
    for got, want, old in zip(policy.forward(obs), fresh.forward(obs), stale, strict=True):
        np.testing.assert_array_equal(got, want)
        assert not np.array_equal(got, old)
    assert policy.log_std is not None and fresh.log_std is not None
    np.testing.assert_array_equal(policy.log_std, fresh.log_std)
    if use_sde:
        np.testing.assert_array_equal(policy.noise_var, fresh.noise_var)


@pytest.mark.parametrize("discrete", [True, False])
def test_numpy_sampling_log_probs_match_torch(discrete: bool) -> None:
    torch.manual_seed(1)
    network = ActorCritic(4, 3, discrete)
    model = TorchActorCritic(network)
    if network.log_std is not None:
        network.log_std[:] = [-0.5, 0.0, 0.3]
    obs = np.random.default_rng(0).normal(size=(2000, 4)).astype(np.float32)
    action, log_prob, value = NumpyPolicy(network).sample(obs, np.random.default_rng(0))
    with torch.no_grad():
        torch_obs = torch.from_numpy(obs)
        torch_log_prob = model.log_prob(model.policy_params(torch_obs), torch.from_numpy(action))
        torch_value = model.get_value(torch_obs)
    np.testing.assert_allclose(log_prob, torch_log_prob.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(value, torch_value.numpy(), rtol=1e-5, atol=1e-6)
    if discrete:  # empirical action frequencies follow the policy's probabilities
        probs = torch.softmax(model.actor(torch.from_numpy(obs)), -1).detach().numpy()
        freq = np.bincount(action, minlength=3) / len(action)
        np.testing.assert_allclose(freq, probs.mean(0), atol=0.03)
