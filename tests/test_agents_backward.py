"""The hand-written gradients of PPO and A2C are autograd's, to float32 rounding.

PPO and A2C take their gradient steps in numpy, without autograd: each loss writes its
derivative with respect to each sample's log-probability, entropy and value
(``LossGradient``), and ``UpdateNetwork.backward`` carries it through the policy head and
both MLPs. Every piece is checked here against ``torch.autograd.grad`` of the torch
model's formulas (tests/reference_agents.py), on every kind of policy (categorical,
Gaussian, gSDE), with clamps that bind and ones that do not.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from reference_agents import TorchActorCritic

from rlsweep.agents import ppo
from rlsweep.agents.gradients import LossGradient, UpdateNetwork
from rlsweep.agents.networks import ActorCritic
from rlsweep.agents.optim import Adam, FlatOptimizer, ModuleOptimizer, RMSprop, UpdateRule

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# (obs_dim, action_dim, discrete, use_sde): CartPole, Acrobot, Pendulum, gSDE
MODELS = [(4, 2, True, False), (6, 3, True, False), (3, 1, False, False), (3, 2, False, True)]


def model_and_batch(
    obs_dim: int, action_dim: int, discrete: bool, use_sde: bool, batch: int, seed: int
) -> tuple[ActorCritic, TorchActorCritic, torch.Tensor, torch.Tensor]:
    """A model with non-zero biases (and its torch view), observations and actions it
    sampled."""
    generator = torch.Generator().manual_seed(seed)
    model = ActorCritic(
        obs_dim, action_dim, discrete, generator=generator, use_sde=use_sde, log_std_init=-0.5
    )
    reference = TorchActorCritic(model)
    for p in reference.parameters():  # biases away from their zero init
        p.data.add_(0.1 * torch.randn(p.shape, generator=generator))
    obs = torch.randn(batch, obs_dim, generator=generator)
    with torch.no_grad():
        actions = reference.sample(reference.policy_params(obs), generator)
    return model, reference, obs, actions


def autograd_loss(
    model: TorchActorCritic, obs: torch.Tensor, actions: torch.Tensor, grad: LossGradient
) -> torch.Tensor:
    """A loss whose derivative with respect to each sample's log-prob, entropy and value
    is ``grad``, computed through autograd from the parameters."""
    out = model.policy_params(obs)
    loss = (torch.from_numpy(grad.log_prob) * model.log_prob(out, actions)).sum()
    loss = loss + (torch.from_numpy(grad.value) * model.get_value(obs)).sum()
    if grad.entropy is not None:
        loss = loss + (torch.from_numpy(grad.entropy) * model.entropy(out)).sum()
    return loss


def random_gradient(batch: int, seed: int, with_entropy: bool) -> LossGradient:
    rng = np.random.default_rng(seed)
    return LossGradient(
        log_prob=rng.standard_normal(batch, dtype=np.float32),
        entropy=rng.standard_normal(batch, dtype=np.float32) if with_entropy else None,
        value=rng.standard_normal(batch, dtype=np.float32),
    )


@pytest.mark.parametrize(("obs_dim", "action_dim", "discrete", "use_sde"), MODELS)
@pytest.mark.parametrize("batch", [256, 40, 1])
@pytest.mark.parametrize("with_entropy", [True, False])
def test_backward_matches_autograd(
    obs_dim: int, action_dim: int, discrete: bool, use_sde: bool, batch: int, with_entropy: bool
) -> None:
    model, reference, obs, actions = model_and_batch(
        obs_dim, action_dim, discrete, use_sde, batch, seed=batch + obs_dim
    )
    grad = random_gradient(batch, batch, with_entropy)
    expected = torch.autograd.grad(
        autograd_loss(reference, obs, actions, grad), list(reference.parameters())
    )

    ours = FlatOptimizer(model.flat, model.shapes, RMSprop(1e-3)).grads
    network = UpdateNetwork(model)
    fwd = network.forward(obs.numpy(), actions.numpy())
    with torch.no_grad():  # the forward pass: the torch model's numbers, to rounding
        for got, want in zip(fwd.evaluation, reference.evaluate_actions(obs, actions), strict=True):
            torch.testing.assert_close(torch.from_numpy(got), want, rtol=1e-5, atol=1e-5)
    ours[0].fill(np.nan)  # every entry is written, none left from before
    network.backward(fwd, grad, into=ours)
    for name, a, b in zip(model.names, expected, ours, strict=True):
        # A sum over the batch rounds by up to a few ulp of its largest terms.
        scale = float(a.abs().max())
        torch.testing.assert_close(torch.from_numpy(b), a, rtol=1e-5, atol=4e-6 * scale, msg=name)


@pytest.mark.parametrize("clip_range_vf", [None, 0.1])
@pytest.mark.parametrize("ent_coef", [0.0, 0.01])
def test_ppo_loss_gradient_matches_autograd(clip_range_vf: float | None, ent_coef: float) -> None:
    """The clipped surrogate, the (clipped) value loss and the entropy bonus, with ratios
    and value changes on both sides of their clip ranges."""
    generator = torch.Generator().manual_seed(7)
    n = 64
    advantages = torch.randn(n, generator=generator)
    advantages[:4] = 0.0  # the A >= 0 boundary
    returns, old_values = torch.randn(n, generator=generator), torch.randn(n, generator=generator)
    mb = ppo.Minibatch.of(
        ppo.RolloutBatch(
            np.zeros((n, 1), np.float32),
            np.zeros(n, np.float32),
            np.zeros(n, np.float32),
            old_values.numpy(),
            advantages.numpy(),
            returns.numpy(),
        ),
        normalize_advantage=False,
        clip_range=0.2,
    )
    log_ratio = (0.5 * torch.randn(n, generator=generator)).requires_grad_()
    values = (old_values + 0.3 * torch.randn(n, generator=generator)).requires_grad_()
    entropy = torch.rand(n, generator=generator).requires_grad_()
    config = ppo.Config(clip_range_vf=clip_range_vf, ent_coef=ent_coef)

    ratio = log_ratio.exp()
    surrogate = torch.min(advantages * ratio, advantages * ratio.clamp(0.8, 1.2))
    assert bool((ratio > 1.2).any() and (ratio < 0.8).any())  # the clip binds on both sides
    predicted = values
    if clip_range_vf is not None:
        predicted = old_values + (values - old_values).clamp(-clip_range_vf, clip_range_vf)
        assert bool(((values - old_values).abs() > clip_range_vf).any())
    loss = -surrogate.mean() + 0.5 * F.mse_loss(predicted, returns) - ent_coef * entropy.mean()
    expected = torch.autograd.grad(loss, [log_ratio, values, entropy])

    pg_loss, value_loss, grad = ppo.ppo_loss(
        mb, log_ratio.detach().numpy(), values.detach().numpy(), config
    )
    assert pg_loss == pytest.approx(float(-surrogate.mean().detach()), rel=1e-6)
    assert value_loss == pytest.approx(float(F.mse_loss(predicted, returns).detach()), rel=1e-6)
    torch.testing.assert_close(torch.from_numpy(grad.log_prob), expected[0], rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(torch.from_numpy(grad.value), expected[1], rtol=1e-6, atol=1e-8)
    if ent_coef == 0.0:
        assert grad.entropy is None
    else:
        assert grad.entropy is not None
        torch.testing.assert_close(torch.from_numpy(grad.entropy), expected[2])


def test_apply_gradient_matches_step() -> None:
    """A step from the hand-written gradient is the step a torch copy of the network takes
    through autograd (``ModuleOptimizer.step``; clipping off, then on), to float32
    rounding."""
    torch.manual_seed(0)
    ours = ActorCritic(4, 2, discrete=True)
    theirs = TorchActorCritic(ours, share=False)
    flat_ours = FlatOptimizer(ours.flat, ours.shapes, RMSprop(1e-2))
    flat_theirs = ModuleOptimizer(theirs, RMSprop(1e-2))
    obs, actions = torch.randn(50, 4), torch.randint(0, 2, (50,))
    network = UpdateNetwork(ours)
    for scale in (1e-3, 100.0):
        grad = LossGradient(
            scale * np.linspace(-1, 1, 50, dtype=np.float32),
            None,
            np.full(50, scale, dtype=np.float32),
        )
        before = flat_theirs.flat.clone()
        network.backward(network.forward(obs.numpy(), actions.numpy()), grad, flat_ours.grads)
        norm = flat_ours.apply_gradient(0.5)
        expected_norm = flat_theirs.step(autograd_loss(theirs, obs, actions, grad), 0.5)
        assert norm == pytest.approx(expected_norm, rel=1e-5)
        assert bool(norm > 0.5) == (scale == 100.0)
        torch.testing.assert_close(flat_ours.grad, flat_theirs.grad, rtol=1e-5, atol=1e-7)
        # RMSprop's first step divides by ~|gradient|, so entries whose gradient is near 0
        # turn its rounding into larger differences: within 0.1 % of the largest step.
        largest = float((flat_theirs.flat - before).abs().max())
        torch.testing.assert_close(flat_ours.flat, flat_theirs.flat, rtol=0, atol=1e-3 * largest)


@pytest.mark.parametrize(
    "rule", [lambda: RMSprop(1e-2), lambda: Adam(1e-3)], ids=["rmsprop", "adam"]
)
def test_a_restored_optimiser_state_is_its_own_and_continues_bit_for_bit(
    rule: Callable[[], UpdateRule],
) -> None:
    """The optimiser's state, however it came to be (a first step, a checkpoint's tensors),
    is ordinary arrays the rule owns and updates in place: a rule restored from a saved
    state takes the very steps of the one that went on, and neither those steps nor the
    next save change a state already saved or the checkpoint it was loaded from.

    (Before the updates moved to numpy, the state was torch tensors, and a first step in
    inference mode left inference tensors that a later step could not update in place;
    the state's arrays must stay writable and unshared whatever their origin.)"""
    rng = np.random.default_rng(0)
    param = rng.standard_normal(64).astype(np.float32)
    grads = rng.standard_normal((6, 64)).astype(np.float32)
    going_on = rule()
    for grad in grads[:2]:
        going_on.update(param, grad)
    saved = going_on.state_dict()
    checkpoint = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in saved.items()}
    restored, restored_param = rule(), param.copy()
    restored.load_state_dict(saved)
    for grad in grads[2:]:
        going_on.update(param, grad)
        restored.update(restored_param, grad)
    np.testing.assert_array_equal(restored_param, param)
    for key, value in going_on.state_dict().items():
        again = restored.state_dict()[key]
        if isinstance(value, torch.Tensor):
            assert torch.equal(again, value)
            assert torch.equal(saved[key], checkpoint[key])  # the loaded state is untouched
            assert not torch.equal(saved[key], value)  # ... and the steps went on after it
        else:
            assert again == value
