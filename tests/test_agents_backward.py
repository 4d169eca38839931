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

from rlsweep.agents.networks import ActorCritic
from rlsweep.agents.optim import FlatOptimizer, RMSprop

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
    grads = model.backward(loss_of(model, out, values, actions), tape)
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
        grads = ours.backward(scale * loss_of(ours, out, values, actions), tape)
        norm = flat_ours.apply_gradient(grads, 0.5)
        loss = loss_of(theirs, theirs.policy_params(obs), theirs.get_value(obs), actions)
        assert torch.equal(norm, flat_theirs.step(scale * loss, 0.5))
        assert torch.equal(flat_ours.flat, flat_theirs.flat)
