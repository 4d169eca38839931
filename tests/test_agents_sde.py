"""gSDE (generalised State-Dependent Exploration) in the on-policy agents.

Known-answer log-probabilities, the noise-matrix schedule of a rollout and the config
checks (determinism, sync and async vector envs and checkpoints:
tests/test_agents_determinism.py).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from agent_cases import SDE, Case
from reference_agents import TorchActorCritic

from rlsweep.agents import a2c, ppo
from rlsweep.agents.base import AgentContext
from rlsweep.agents.networks import SDE_EPSILON, ActorCritic
from rlsweep.agents.numpy_policy import NumpyPolicy
from rlsweep.agents.rollout import SDENoise

# Agents train with one torch thread, as jobs do by default (see conftest).
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def hand_forward(network: ActorCritic, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(Gaussian mean, policy latent) written out layer by layer."""
    layers = [
        (torch.from_numpy(layer.weight), torch.from_numpy(layer.bias)) for layer in network.actor
    ]
    h = torch.tanh(obs @ layers[0][0].T + layers[0][1])
    latent = torch.tanh(h @ layers[1][0].T + layers[1][1])
    return latent @ layers[2][0].T + layers[2][1], latent


def sde_model(seed: int = 0) -> tuple[ActorCritic, TorchActorCritic]:
    """A gSDE network and its torch view."""
    g = torch.Generator().manual_seed(seed)
    network = ActorCritic(3, 2, discrete=False, use_sde=True, log_std_init=-1.0, generator=g)
    model = TorchActorCritic(network)
    assert model.log_std is not None
    with torch.no_grad():  # distinct per-entry stds and a head that is not ~0
        model.log_std.add_(0.5 * torch.randn(model.log_std.shape, generator=g))
        model.actor.head.weight.mul_(100.0)
    return network, model


def test_log_prob_and_entropy_match_the_gsde_normal() -> None:
    network, model = sde_model()
    assert model.log_std is not None and tuple(model.log_std.shape) == (64, 2)
    g = torch.Generator().manual_seed(1)
    obs, actions = torch.randn(32, 3, generator=g), torch.randn(32, 2, generator=g)
    with torch.no_grad():
        mean, latent = hand_forward(network, obs)
        assert SDE_EPSILON == 1e-6  # SB3's epsilon
        std = (latent**2 @ model.log_std.exp() ** 2 + 1e-6).sqrt()
        dist = torch.distributions.Normal(mean, std)
        out = model.policy_params(obs)
        torch.testing.assert_close(model.log_prob(out, actions), dist.log_prob(actions).sum(-1))
        torch.testing.assert_close(model.entropy(out), dist.entropy().sum(-1))
        # Evaluation acts with the mean, in torch and in numpy.
        torch.testing.assert_close(model.deterministic_action(obs), mean)
        np.testing.assert_allclose(
            NumpyPolicy(network).deterministic_action(obs.numpy()), mean.numpy(), rtol=1e-5
        )

        # The collector's path: noise = latent @ E_i for row i's own matrix E_i.
        matrices = torch.randn(32, 64, 2, generator=g) * model.log_std.exp()
        action, log_prob, value = NumpyPolicy(network).sample_sde(obs.numpy(), matrices.numpy())
        noise = torch.stack([latent[i] @ matrices[i] for i in range(32)])
        np.testing.assert_allclose(action, (mean + noise).numpy(), rtol=1e-5, atol=1e-5)
        expected = dist.log_prob(torch.from_numpy(action)).sum(-1)
        np.testing.assert_allclose(log_prob, expected.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(value, model.get_value(obs).numpy(), rtol=1e-5, atol=1e-6)


def test_variance_does_not_train_the_features_and_log_std_gets_gradients() -> None:
    """learn_features=False: the variance's latent is detached, the mean's is not."""
    _, model = sde_model()
    obs = torch.randn(8, 3, generator=torch.Generator().manual_seed(2))
    out = model.policy_params(obs)
    hidden = [p for layer in model.actor.layers for p in layer.parameters()]
    assert model.log_std is not None
    entropy = model.entropy(out).sum()
    grads = torch.autograd.grad(
        entropy, [model.log_std, *hidden], retain_graph=True, materialize_grads=True
    )
    assert bool(grads[0].abs().sum() > 0)
    assert all(not g.any() for g in grads[1:])
    mean_grads = torch.autograd.grad(out[:, :2].sum(), hidden)
    assert all(bool(g.abs().sum() > 0) for g in mean_grads)


def test_torch_sampling_follows_the_per_state_gaussian() -> None:
    _, model = sde_model()
    obs = torch.randn(1, 3, generator=torch.Generator().manual_seed(3)).expand(20_000, 3)
    with torch.no_grad():
        action = model.sample(model.policy_params(obs), torch.Generator().manual_seed(4))
        out = model.policy_params(obs[:1])
    torch.testing.assert_close(action.mean(0), out[0, :2], atol=0.03, rtol=0.0)
    torch.testing.assert_close(action.std(0), out[0, 2:].exp(), atol=0.0, rtol=0.03)


def test_noise_matrices_are_private_draws_from_n0_std() -> None:
    log_std = torch.linspace(-2.0, 1.0, 64 * 3).reshape(64, 3)
    draws = []
    global_state = torch.get_rng_state()
    for seed in (5, 5, 6):
        noise = SDENoise(40, 64, 3, -1, torch.Generator().manual_seed(seed))
        noise.resample(log_std.numpy())
        draws.append(noise.matrices)
    assert torch.equal(torch.get_rng_state(), global_state)
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])
    standardised = draws[0] / log_std.exp()
    assert abs(float(standardised.mean())) < 0.02
    assert float(standardised.std()) == pytest.approx(1.0, abs=0.02)


class Constant(gym.Env[np.ndarray, np.ndarray]):
    """The same observation every step, reward 0, never ends: the latent is constant,
    so each sub-env's action changes only when its noise matrix does."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-100.0, 100.0, (2,), np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return np.array([0.5, -0.3, 0.8], np.float32), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return np.array([0.5, -0.3, 0.8], np.float32), 0.0, False, False, {}


@pytest.mark.parametrize(
    ("sample_freq", "starts"),
    [(4, [0, 4, 8, 12]), (-1, [0]), (16, [0]), (5, [0, 5, 10, 15])],
)
def test_noise_is_constant_between_resamples_and_changes_on_resample(
    sample_freq: int, starts: list[int]
) -> None:
    """Resampled at the start of every rollout (16 steps) and every sample_freq steps."""
    envs = gym.vector.SyncVectorEnv([Constant] * 3)
    obs, _ = envs.reset(seed=[0, 1, 2])
    config = ppo.Config(n_envs=3, n_steps=16, use_sde=True, sde_sample_freq=sample_freq)
    agent = ppo.build(config, AgentContext(envs, obs, 10_000, np.random.default_rng(0)))
    sde = agent.collector.sde
    assert sde is not None
    resampled: list[torch.Tensor] = []
    resample = sde.resample

    def recording(log_std: np.ndarray) -> None:
        resample(log_std)
        resampled.append(sde.matrices.clone())

    sde.resample = recording  # type: ignore[method-assign]
    buffer = agent.collector.buffer
    rollouts = []
    for _ in range(2):
        agent.collector.collect()
        rollouts.append(buffer.actions.copy())
    windows = len(starts)
    assert len(resampled) == 2 * windows

    with torch.no_grad():
        mean, latent = hand_forward(agent.model, torch.from_numpy(buffer.obs[0]))
    bounds = [*starts, 16]
    for r, actions in enumerate(rollouts):
        for w, (start, end) in enumerate(itertools.pairwise(bounds)):
            window = actions[start:end]
            assert (window == window[0]).all()  # constant within the window
            matrices = resampled[r * windows + w]
            noise = torch.stack([latent[i] @ matrices[i] for i in range(3)])
            np.testing.assert_allclose(window[0], (mean + noise).numpy(), rtol=1e-5, atol=1e-5)
        firsts = actions[starts]  # a new draw at every resample, and per sub-env
        assert len(np.unique(firsts[:, :, 0])) == len(starts) * 3
    assert not np.array_equal(rollouts[0][0], rollouts[1][0])  # each rollout resamples
    envs.close()


def sde_agent(**overrides: Any) -> tuple[Any, gym.vector.VectorEnv]:
    """A PPO agent with gSDE on Pendulum (seed 0)."""
    return Case("ppo-sde", ppo, "Pendulum-v1", {**SDE, **overrides}).make(0)


def test_act_is_the_clipped_mean_whatever_the_noise() -> None:
    agent, envs = sde_agent()
    obs = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    before = agent.act(obs)
    agent.collector.sde.resample(agent.model.log_std)
    np.testing.assert_array_equal(agent.act(obs), before)
    with torch.no_grad():
        mean = TorchActorCritic(agent.model).deterministic_action(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(before, np.clip(mean, -2.0, 2.0), rtol=1e-5, atol=1e-6)
    envs.close()


def test_log_std_init_sets_the_initial_noise_scale() -> None:
    for use_sde, shape in ((True, (64, 1)), (False, (1,))):
        agent, envs = sde_agent(use_sde=use_sde, log_std_init=-2.0)
        assert agent.model.log_std is not None
        assert tuple(agent.model.log_std.shape) == shape
        assert bool((agent.model.log_std == -2.0).all())
        envs.close()


def test_gsde_is_refused_for_discrete_actions() -> None:
    envs = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    obs, _ = envs.reset(seed=[0, 1])  # type: ignore[arg-type]
    config = ppo.Config(n_envs=2, use_sde=True)
    with pytest.raises(ValueError, match=r"use_sde \(gSDE\) needs continuous \(Box\) actions"):
        ppo.build(config, AgentContext(envs, obs, 100, np.random.default_rng(0)))
    envs.close()


@pytest.mark.parametrize(
    ("field", "value"),
    [("sde_sample_freq", 0), ("sde_sample_freq", -2), ("log_std_init", math.nan)],
)
def test_bad_gsde_settings_name_the_field(field: str, value: Any) -> None:
    for module in (ppo, a2c):
        with pytest.raises(ValueError, match=rf"^{field} must be"):
            module.Config(**{field: value})


def test_defaults_leave_gsde_off() -> None:
    for config in (ppo.Config(), a2c.Config()):
        assert (config.use_sde, config.sde_sample_freq, config.log_std_init) == (False, -1, 0.0)
