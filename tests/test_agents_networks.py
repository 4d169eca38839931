"""The actor-critic network, the flat optimisers and the PPO/A2C updates on fixed batches."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from reference_agents import TorchActorCritic, as_arrays, as_tensors

from rlsweep.agents import a2c, ppo
from rlsweep.agents.gradients import LossGradient, UpdateNetwork
from rlsweep.agents.networks import ActorCritic
from rlsweep.agents.optim import Adam, FlatOptimizer, ModuleOptimizer, RMSprop, UpdateRule
from rlsweep.agents.rollout import RolloutBatch

# Agents train with one torch thread, as jobs do by default (see conftest).
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def optimizer(model: ActorCritic, rule: UpdateRule) -> FlatOptimizer:
    return FlatOptimizer(model.flat, model.shapes, rule)


def test_architecture_and_init_follow_sb3() -> None:
    torch.manual_seed(0)
    model = ActorCritic(4, 2, discrete=True)
    layers = [*model.actor, *model.critic]
    shapes = [(64, 4), (64, 64), (2, 64), (64, 4), (64, 64), (1, 64)]
    assert [layer.weight.shape for layer in layers] == shapes
    assert all(np.count_nonzero(layer.bias) == 0 for layer in layers)
    # Orthogonal init: W W^T = gain^2 I on the smaller side.
    hidden = model.actor[1].weight
    np.testing.assert_allclose(hidden @ hidden.T, 2.0 * np.eye(64), atol=1e-4, rtol=0)
    head = model.actor[-1].weight
    np.testing.assert_allclose(head @ head.T, 1e-4 * np.eye(2), atol=1e-7, rtol=0)
    value_head = model.critic[-1].weight
    assert float(np.linalg.norm(value_head)) == pytest.approx(1.0, abs=1e-5)
    assert model.log_std is None
    assert ActorCritic(3, 2, discrete=False).log_std is not None


@pytest.mark.parametrize(("discrete", "use_sde"), [(True, False), (False, False), (False, True)])
def test_parameters_are_views_of_one_vector_saved_as_a_torch_modules_state(
    discrete: bool, use_sde: bool
) -> None:
    """Every layer, the log std and the torch views the state is copied from share
    ``flat``, laid out as ``nn.Module.parameters()`` lists a torch module's (log_std
    first); checkpoints hold the tensors an ``nn.Module`` of that structure saves."""
    model = ActorCritic(3, 2, discrete, use_sde=use_sde, log_std_init=-0.5)
    reference = TorchActorCritic(model)
    assert list(reference.state_dict()) == list(model.state_dict()) == model.names
    assert [tuple(p.shape) for p in reference.parameters()] == model.shapes
    flat = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
    assert torch.equal(flat, model.flat)
    with torch.no_grad():
        model.flat.add_(1.0)  # seen by every view
    reference_flat = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
    assert torch.equal(flat + 1.0, reference_flat)
    layers = [*model.actor, *model.critic]
    arrays = [a for layer in layers for a in (layer.weight, layer.bias)]
    if model.log_std is not None:
        arrays.insert(0, model.log_std)
    np.testing.assert_array_equal(np.concatenate([a.reshape(-1) for a in arrays]), flat + 1.0)
    state = model.state_dict()
    assert all(not np.shares_memory(t.numpy(), model.flat.numpy()) for t in state.values())
    other = ActorCritic(3, 2, discrete, use_sde=use_sde)
    other.load_state_dict(state)
    assert torch.equal(other.flat, model.flat)
    with pytest.raises(ValueError, match="not this network"):
        other.load_state_dict({k: v for k, v in state.items() if k != "critic.head.bias"})
    bigger = ActorCritic(4, 2, discrete, use_sde=use_sde).state_dict()
    with pytest.raises(ValueError, match=r"actor.layers.0.weight has shape \(64, 4\)"):
        other.load_state_dict(bigger)


@pytest.mark.parametrize("discrete", [True, False])
def test_log_prob_and_entropy_match_torch_distributions(discrete: bool) -> None:
    torch.manual_seed(0)
    model = TorchActorCritic(ActorCritic(3, 4, discrete))
    if model.log_std is not None:
        model.log_std.data[:] = torch.tensor([-1.0, 0.0, 0.5, 1.0])
    obs = torch.randn(32, 3)
    action = model.sample(model.policy_params(obs))
    log_prob, entropy, value = model.evaluate_actions(obs, action)
    out = model.actor(obs)
    dist: torch.distributions.Distribution
    if discrete:
        dist = torch.distributions.Categorical(logits=out)
        torch.testing.assert_close(log_prob, dist.log_prob(action))
        torch.testing.assert_close(entropy, dist.entropy())
    else:
        assert model.log_std is not None
        dist = torch.distributions.Normal(out, model.log_std.exp())
        torch.testing.assert_close(log_prob, dist.log_prob(action).sum(-1))
        torch.testing.assert_close(entropy, dist.entropy().sum(-1))
    torch.testing.assert_close(value, model.critic(obs)[:, 0])


def test_torch_sampling_uses_the_given_generator() -> None:
    torch.manual_seed(0)
    model = TorchActorCritic(ActorCritic(3, 5, discrete=True))
    obs = torch.randn(1000, 3)
    draws = [
        model.sample(model.policy_params(obs), torch.Generator().manual_seed(s)) for s in (1, 1, 2)
    ]
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])
    assert int(draws[0].min()) >= 0 and int(draws[0].max()) <= 4


@pytest.mark.parametrize(
    ("rule", "reference"),
    [
        (
            lambda: Adam(1e-3, eps=1e-5),
            lambda p: torch.optim.Adam(p, 1e-3, eps=1e-5, foreach=False),
        ),
        (
            lambda: RMSprop(7e-4, alpha=0.99, eps=1e-5),
            lambda p: torch.optim.RMSprop(p, 7e-4, alpha=0.99, eps=1e-5, foreach=False),
        ),
    ],
    ids=["adam", "rmsprop"],
)
def test_flat_optimizer_equals_the_usual_torch_step(rule, reference) -> None:
    """A torch module's parameters stepped by ``ModuleOptimizer`` (DQN's) and by zero_grad,
    backward, clip_grad_norm_, torch.optim step: the same parameters, to rounding."""
    torch.manual_seed(0)
    network = ActorCritic(4, 2, discrete=True)
    ours = TorchActorCritic(network, share=False)
    theirs = TorchActorCritic(network, share=False)
    flat = ModuleOptimizer(ours, rule())
    optimizer = reference(list(theirs.parameters()))
    obs, actions = torch.randn(50, 4), torch.randint(0, 2, (50,))
    for step in range(5):
        scale = 100.0 if step % 2 else 0.01  # clipping active on odd steps only

        def loss(model: TorchActorCritic, scale: float = scale) -> torch.Tensor:
            log_prob, _, value = model.evaluate_actions(obs, actions)
            return scale * (log_prob.mean() + (value**2).mean())

        norm = flat.step(loss(ours), max_grad_norm=0.5)
        optimizer.zero_grad()
        loss(theirs).backward()
        ref_norm = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.5)
        optimizer.step()
        assert norm == pytest.approx(float(ref_norm), rel=1e-5)
        # Not bit for bit: the flat parameters are views laid out differently for MKL's
        # products, so the two models' gradients differ by rounding (up to 6e-6 at this
        # loss scale), which the optimiser carries into the parameters: up to 3e-7 over
        # seeds 0-3 with either tanh (torch's or numpy's), so 5e-7 absolute.
        for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=5e-7)


def test_flat_optimizer_keeps_parameters_as_views_across_load_state_dict() -> None:
    torch.manual_seed(0)
    model = TorchActorCritic(ActorCritic(3, 2, discrete=False), share=False)
    flat = ModuleOptimizer(model, Adam(1e-2))
    other = TorchActorCritic(ActorCritic(3, 2, discrete=False), share=False)
    model.load_state_dict(other.state_dict())
    assert torch.equal(flat.flat, torch.cat([p.detach().reshape(-1) for p in other.parameters()]))
    flat.step(model.get_value(torch.ones(2, 3)).sum(), 1.0)
    assert torch.equal(flat.flat, torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    assert not torch.equal(
        flat.flat, torch.cat([p.detach().reshape(-1) for p in other.parameters()])
    )


def test_the_networks_optimiser_and_passes_see_a_loaded_state() -> None:
    """``load_state_dict`` copies into the parameters in place: the optimiser's vector and
    the update's views follow, and a step moves the network itself."""
    torch.manual_seed(0)
    model, other = ActorCritic(3, 2, discrete=False), ActorCritic(3, 2, discrete=False)
    flat = optimizer(model, Adam(1e-2))
    network = UpdateNetwork(model)
    model.load_state_dict(other.state_dict())
    assert torch.equal(flat.flat, other.flat)
    obs, actions = np.ones((2, 3), np.float32), np.zeros((2, 2), np.float32)
    fwd = network.forward(obs, actions)
    np.testing.assert_array_equal(
        fwd.evaluation.value, UpdateNetwork(other).forward(obs, actions).evaluation.value
    )
    ones = np.ones(2, np.float32)
    network.backward(fwd, LossGradient(ones, None, ones), into=flat.grads)
    flat.apply_gradient(1.0)
    assert torch.equal(flat.flat, model.flat) and not torch.equal(model.flat, other.flat)


def test_clamp_form_of_the_clipped_surrogate_matches_the_min_form() -> None:
    torch.manual_seed(0)
    advantages = torch.randn(500)
    old_log_probs = torch.randn(500) * 0.1
    a = advantages.numpy()
    zeros: np.ndarray = np.zeros(500, np.float32)
    batch = RolloutBatch(zeros[:, None], zeros, old_log_probs.numpy(), a, a, a)
    mb = ppo.Minibatch.of(batch, normalize_advantage=False, clip_range=0.2)
    log_probs = (old_log_probs + torch.randn(500) * 0.3).requires_grad_()
    ratio = (log_probs - old_log_probs).exp()
    low, high = torch.from_numpy(mb.ratio_low), torch.from_numpy(mb.ratio_high)
    ours = -(advantages * ratio.clamp(low, high)).mean()
    (grad_ours,) = torch.autograd.grad(ours, log_probs)
    ratio = (log_probs - old_log_probs).exp()
    theirs = torch.max(-advantages * ratio, -advantages * ratio.clamp(0.8, 1.2)).mean()
    (grad_theirs,) = torch.autograd.grad(theirs, log_probs)
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(grad_ours, grad_theirs)


def fixed_batch(n: int, discrete: bool, seed: int = 0) -> RolloutBatch:
    """A batch of numpy arrays, as the agents' updates take them."""
    g = torch.Generator().manual_seed(seed)
    actions = torch.randint(0, 2, (n,), generator=g) if discrete else torch.randn(n, 2, generator=g)
    return RolloutBatch(
        obs=torch.randn(n, 3, generator=g).numpy(),
        actions=actions.numpy(),
        log_probs=(torch.randn(n, generator=g) * 0.1 - 1.0).numpy(),
        values=torch.randn(n, generator=g).numpy(),
        advantages=torch.randn(n, generator=g).numpy(),
        returns=torch.randn(n, generator=g).numpy(),
    )


@pytest.mark.parametrize("discrete", [True, False])
def test_ppo_update_options(discrete: bool) -> None:
    torch.manual_seed(0)
    model = ActorCritic(3, 2, discrete)
    flat = optimizer(model, Adam(1e-3, eps=1e-5))
    network = UpdateNetwork(model)
    batch = fixed_batch(100, discrete)
    rng = np.random.default_rng(0)
    config = ppo.Config(batch_size=32, n_epochs=3, clip_range_vf=0.2, ent_coef=0.01)
    stats = ppo.ppo_update(network, flat, batch, config, 0.5, rng)
    assert stats["gradient_steps"] == 9.0  # round(100 / 32) = 3 minibatches x 3 epochs
    assert stats["clip_range"] == pytest.approx(0.1)
    assert all(math.isfinite(v) for v in stats.values())
    # A tiny target_kl stops after the first minibatch of the second epoch at the latest.
    stopped = ppo.ppo_update(
        network, flat, batch, ppo.Config(batch_size=32, target_kl=1e-9), 1.0, rng
    )
    assert stopped["gradient_steps"] <= 3.0


def test_ppo_update_improves_its_objective_on_a_fixed_batch() -> None:
    torch.manual_seed(0)
    model = ActorCritic(3, 2, discrete=True)
    reference = TorchActorCritic(model)
    flat = optimizer(model, Adam(1e-3, eps=1e-5))
    batch = fixed_batch(256, discrete=True)
    t = as_tensors(batch)
    with torch.no_grad():
        log_probs, _, values = reference.evaluate_actions(t.obs, t.actions)
    batch = batch._replace(log_probs=log_probs.numpy(), values=values.numpy())
    config = ppo.Config(schedule="constant")
    ppo.ppo_update(UpdateNetwork(model), flat, batch, config, 1.0, np.random.default_rng(0))
    with torch.no_grad():
        new_log_probs, _, new_values = reference.evaluate_actions(t.obs, t.actions)
    # Actions with positive advantage became likelier, values moved toward the returns.
    change = new_log_probs - log_probs
    assert float((change * t.advantages).mean()) > 0
    assert F.mse_loss(new_values, t.returns) < F.mse_loss(values, t.returns)


@pytest.mark.parametrize(("discrete", "use_sde"), [(True, False), (False, False), (False, True)])
@pytest.mark.parametrize(("ent_coef", "clip_range_vf"), [(0.0, None), (0.01, 0.1)])
def test_ppo_gradient_step_is_torchs_adam_step(
    discrete: bool, use_sde: bool, ent_coef: float, clip_range_vf: float | None
) -> None:
    """One gradient step of ``ppo_update`` (one epoch, one minibatch) is torch's: autograd
    through the min-form clipped surrogate, the (clipped) value loss and the entropy
    bonus, then clip_grad_norm_ and torch.optim.Adam, to float32 rounding; for categorical,
    Gaussian and gSDE policies."""
    torch.manual_seed(0)
    model = ActorCritic(3, 2, discrete, use_sde=use_sde, log_std_init=-0.5)
    reference = TorchActorCritic(model, share=False)
    batch = as_tensors(fixed_batch(64, discrete))
    with torch.no_grad():  # ratios near 1, some beyond the clip range
        log_probs, _, values = reference.evaluate_actions(batch.obs, batch.actions)
    g = torch.Generator().manual_seed(1)
    batch = batch._replace(
        log_probs=log_probs + 0.3 * torch.randn(64, generator=g),
        values=values + 0.2 * torch.randn(64, generator=g),
    )
    config = ppo.Config(
        n_epochs=1,
        batch_size=64,
        ent_coef=ent_coef,
        clip_range_vf=clip_range_vf,
        schedule="constant",
    )
    flat = optimizer(model, ppo.make_adam(config))
    stats = ppo.ppo_update(
        UpdateNetwork(model), flat, as_arrays(batch), config, 1.0, np.random.default_rng(0)
    )
    assert stats["gradient_steps"] == 1.0

    advantages = (batch.advantages - batch.advantages.mean()) / (batch.advantages.std() + 1e-8)
    log_prob, entropy, new_values = reference.evaluate_actions(batch.obs, batch.actions)
    ratio = (log_prob - batch.log_probs).exp()
    surrogate = torch.min(advantages * ratio, advantages * ratio.clamp(0.8, 1.2))
    if clip_range_vf is not None:
        change = (new_values - batch.values).clamp(-clip_range_vf, clip_range_vf)
        new_values = batch.values + change
    loss = -surrogate.mean() + 0.5 * F.mse_loss(new_values, batch.returns)
    (loss - ent_coef * entropy.mean()).backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
    torch.optim.Adam(
        reference.parameters(), lr=config.learning_rate, eps=1e-5, foreach=False
    ).step()
    for a, b in zip(model.tensors.values(), reference.parameters(), strict=True):
        torch.testing.assert_close(a, b.detach(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("discrete", [True, False])
@pytest.mark.parametrize(("ent_coef", "normalize_advantage"), [(0.0, False), (0.01, True)])
def test_a2c_update_is_one_rmsprop_step_on_the_whole_batch(
    discrete: bool, ent_coef: float, normalize_advantage: bool
) -> None:
    """The written-out gradient's step is torch's: autograd through the same loss, then
    clip_grad_norm_ and torch.optim.RMSprop, to float32 rounding."""
    torch.manual_seed(0)
    model = ActorCritic(3, 2, discrete)
    reference = TorchActorCritic(model, share=False)
    config = a2c.Config(ent_coef=ent_coef, normalize_advantage=normalize_advantage)
    flat = optimizer(model, a2c.make_rmsprop(config))
    stats = a2c.a2c_update(UpdateNetwork(model), flat, fixed_batch(40, discrete), config)
    batch = as_tensors(fixed_batch(40, discrete))

    torch_optimizer = torch.optim.RMSprop(
        reference.parameters(), lr=7e-4, alpha=0.99, eps=1e-5, foreach=False
    )
    advantages = batch.advantages
    if normalize_advantage:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    log_prob, entropy, values = reference.evaluate_actions(batch.obs, batch.actions)
    pg_loss = -(advantages * log_prob).mean()
    value_loss = F.mse_loss(values, batch.returns)
    (pg_loss + 0.5 * value_loss - ent_coef * entropy.mean()).backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
    torch_optimizer.step()
    for a, b in zip(model.tensors.values(), reference.parameters(), strict=True):
        torch.testing.assert_close(a, b.detach(), rtol=1e-6, atol=1e-7)
    # float32 means: to 1e-5 of the value, or of the terms when they cancel (advantages
    # standardised to mean 0 leave a mean ~1e-3 of terms ~1).
    terms = float((advantages * log_prob).detach().abs().mean())
    assert stats["policy_loss"] == pytest.approx(pg_loss.item(), rel=1e-5, abs=1e-5 * terms)
    assert stats["value_loss"] == pytest.approx(value_loss.item(), rel=1e-5)
    assert stats["entropy"] == pytest.approx(entropy.mean().item(), rel=1e-5)
