"""The hand-written backward of the actor-critic MLPs gives autograd's gradients, bit for bit.

PPO and A2C take their gradient steps through ``ActorCritic.forward_for_update`` and
``ActorCritic.backward`` (autograd only from the MLPs' outputs to the loss); the numbers a
job produces stay those of ``torch.autograd.grad`` through ``policy_params`` and
``get_value`` only if every gradient is equal, not merely close.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rlsweep.agents import a2c, ppo
from rlsweep.agents.networks import ActorCritic
from rlsweep.agents.optim import FlatOptimizer, RMSprop
from rlsweep.agents.rollout import RolloutBatch

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# (obs_dim, action_dim, discrete, use_sde): CartPole, Acrobot, Pendulum, gSDE
MODELS = [(4, 2, True, False), (6, 3, True, False), (3, 1, False, False), (3, 2, False, True)]


def loss_of(
    model: ActorCritic, out: torch.Tensor, values: torch.Tensor, actions: torch.Tensor
) -> torch.Tensor:
    """A loss using every output the agents' losses use: log-prob, entropy and value."""
    log_prob = model.log_prob(out, actions)
    advantages = torch.linspace(-1.0, 1.0, log_prob.shape[0])
    ratio = log_prob.exp().clamp(0.8, 1.2)
    value_loss = F.mse_loss(values, torch.ones_like(values))
    return -(advantages * ratio).mean() + 0.5 * value_loss - 0.01 * model.entropy(out).mean()


@pytest.mark.parametrize(("obs_dim", "action_dim", "discrete", "use_sde"), MODELS)
@pytest.mark.parametrize("batch", [256, 40, 1])
def test_backward_equals_autograd_bitwise(
    obs_dim: int, action_dim: int, discrete: bool, use_sde: bool, batch: int
) -> None:
    generator = torch.Generator().manual_seed(batch + obs_dim)
    model = ActorCritic(
        obs_dim, action_dim, discrete, generator=generator, use_sde=use_sde, log_std_init=-0.5
    )
    for p in model.parameters():  # biases away from their zero init
        p.data.add_(0.1 * torch.randn(p.shape, generator=generator))
    obs = torch.randn(batch, obs_dim, generator=generator)
    with torch.no_grad():
        actions = model.sample(model.policy_params(obs), generator)
    params = list(model.parameters())

    expected = torch.autograd.grad(
        loss_of(model, model.policy_params(obs), model.get_value(obs), actions), params
    )
    out, values, tape = model.forward_for_update(obs)
    assert torch.equal(out, model.policy_params(obs))
    assert torch.equal(values, model.get_value(obs))
    grads = model.backward(tape.grads_of(loss_of(model, out, values, actions)), tape)
    for name, a, b in zip(dict(model.named_parameters()), expected, grads, strict=True):
        assert torch.equal(a, b), name


def test_apply_gradient_equals_step() -> None:
    """A step from the hand-written gradients is the step ``step`` takes, bit for bit."""
    torch.manual_seed(0)
    ours, theirs = ActorCritic(4, 2, discrete=True), ActorCritic(4, 2, discrete=True)
    theirs.load_state_dict(ours.state_dict())
    flat_ours, flat_theirs = (
        FlatOptimizer(ours, RMSprop(1e-2)),
        FlatOptimizer(theirs, RMSprop(1e-2)),
    )
    obs, actions = torch.randn(50, 4), torch.randint(0, 2, (50,))
    for scale in (0.01, 100.0):  # clipping off, then on
        out, values, tape = ours.forward_for_update(obs)
        grads = ours.backward(tape.grads_of(scale * loss_of(ours, out, values, actions)), tape)
        norm = flat_ours.apply_gradient(grads, 0.5)
        loss = loss_of(theirs, theirs.policy_params(obs), theirs.get_value(obs), actions)
        assert torch.equal(norm, flat_theirs.step(scale * loss, 0.5))
        assert torch.equal(flat_ours.flat, flat_theirs.flat)


def categorical_case(batch: int, action_dim: int) -> tuple[ActorCritic, RolloutBatch]:
    """A categorical actor-critic off its init and a batch whose old log-probs are off the
    current ones, so that some PPO ratios leave a clip range of 0.1."""
    generator = torch.Generator().manual_seed(batch * action_dim)
    model = ActorCritic(4, action_dim, discrete=True, generator=generator)
    for p in model.parameters():
        p.data.add_(0.3 * torch.randn(p.shape, generator=generator))
    obs = torch.randn(batch, 4, generator=generator)
    with torch.no_grad():
        out = model.policy_params(obs)
        actions = model.sample(out, generator)
        old = model.log_prob(out, actions) + 0.3 * torch.randn(batch, generator=generator)
        values = model.get_value(obs)
    advantages = torch.randn(batch, generator=generator)
    returns = values + torch.randn(batch, generator=generator)
    return model, RolloutBatch(obs, actions, old, values, advantages, returns)


def assert_bitwise_equal(expected: list[torch.Tensor], got: list[torch.Tensor]) -> None:
    """Equal bit for bit, signs of zero included."""
    for a, b in zip(expected, got, strict=True):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))


BATCHES = [256, 250, 241, 64, 40, 37, 1]  # sizes that do and do not divide evenly


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("action_dim", [2, 3])
def test_categorical_ppo_grads_equal_autograd_bitwise(batch: int, action_dim: int) -> None:
    """PPO's written-out loss gradient (the presets' case) is autograd's."""
    model, rollout = categorical_case(batch, action_dim)
    mb = ppo.Minibatch.of(rollout, True, clip_range=0.1)
    config = ppo.Config(vf_coef=0.7)
    loss, *expected, tape = ppo.ppo_loss(model, mb, config)
    ratio = expected[2].exp()
    assert batch < 37 or bool(((ratio < 0.9) | (ratio > 1.1)).any())  # some are clipped
    grads, *got, _ = ppo.categorical_ppo_grads(model, mb, config.vf_coef)
    expected += model.backward(tape.grads_of(loss), tape)
    assert_bitwise_equal(expected, [*got, *model.backward(grads, tape)])


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("action_dim", [2, 3])
def test_categorical_a2c_grads_equal_autograd_bitwise(batch: int, action_dim: int) -> None:
    """A2C's written-out loss gradient (the presets' case) is autograd's."""
    model, rollout = categorical_case(batch, action_dim)
    config = a2c.Config(vf_coef=0.7)
    loss, *expected, tape = a2c.a2c_loss(model, rollout, rollout.advantages, config)
    grads, *got, _ = a2c.categorical_a2c_grads(model, rollout, rollout.advantages, config)
    expected += model.backward(tape.grads_of(loss), tape)
    assert_bitwise_equal(expected, [*got, *model.backward(grads, tape)])
