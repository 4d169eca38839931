"""Torch references for the built-in agents' numpy code, for tests only.

:class:`TorchActorCritic` is :class:`rlsweep.agents.networks.ActorCritic` as a torch
module: the same parameters (shared memory, or a copy) and the same formulas, written with
torch operations, so that tests can compare the numpy forward and the hand-written
backward with torch's values and ``torch.autograd``. It also samples actions from a torch
generator, per state (with gSDE: as if each observation had its own noise matrix).
"""

from __future__ import annotations

from typing import NamedTuple, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rlsweep.agents.networks import HALF_LOG_2PI, SDE_EPSILON, ActorCritic
from rlsweep.agents.rollout import RolloutBatch


def tanh(x: Tensor) -> Tensor:
    """``tanh(x)`` by numpy's vectorised tanh (what the numpy passes compute), differentiated
    as autograd differentiates ``torch.tanh`` (``tanh_backward`` of the result)."""
    if x.requires_grad and torch.is_grad_enabled():
        return cast("Tensor", _Tanh.apply(x))
    return _numpy_tanh(x)


def _numpy_tanh(x: Tensor) -> Tensor:
    out = torch.empty_like(x)  # torch's allocation (aligned as autograd's outputs are)
    np.tanh(x.detach().numpy(), out=out.numpy())
    return out


class _Tanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: Tensor) -> Tensor:
        y = _numpy_tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return torch.ops.aten.tanh_backward(grad, y)


def _linear(tensors: dict[str, Tensor], name: str) -> nn.Linear:
    """An ``nn.Linear`` whose parameters are ``tensors[name + ".weight"]`` and ``.bias``."""
    weight = tensors[f"{name}.weight"]
    layer = nn.utils.skip_init(nn.Linear, weight.shape[1], weight.shape[0])
    layer.weight = nn.Parameter(weight)
    layer.bias = nn.Parameter(tensors[f"{name}.bias"])
    return layer


class TorchMLP(nn.Module):
    """A tanh MLP (``layers``, then ``head``) on the given parameter tensors."""

    def __init__(self, tensors: dict[str, Tensor], prefix: str, depth: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            _linear(tensors, f"{prefix}.layers.{i}") for i in range(depth - 1)
        )
        self.head = _linear(tensors, f"{prefix}.head")

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_with_latent(x)[0]

    def forward_with_latent(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(head output, last hidden layer's output)``."""
        for layer in cast("list[nn.Linear]", self.layers):
            x = tanh(F.linear(x, layer.weight, layer.bias))
        return F.linear(x, self.head.weight, self.head.bias), x


class TorchActorCritic(nn.Module):
    """``network`` as a torch module, on its own parameters (``share``: the same memory, so
    changes show on both sides) or on a copy.

    The policy's parameters for a batch of observations (:meth:`policy_params`, what
    :meth:`log_prob`, :meth:`entropy` and :meth:`sample` take) are the logits, the
    Gaussian mean, or with gSDE the mean and the state-dependent log std side by side.
    """

    def __init__(self, network: ActorCritic, share: bool = True) -> None:
        super().__init__()
        tensors = network.tensors if share else network.state_dict()
        self.discrete = network.discrete
        self.use_sde = network.use_sde
        self.action_dim = network.action_dim
        self.log_std = nn.Parameter(tensors["log_std"]) if "log_std" in tensors else None
        self.actor = TorchMLP(tensors, "actor", len(network.actor))
        self.critic = TorchMLP(tensors, "critic", len(network.critic))

    def get_value(self, obs: Tensor) -> Tensor:
        """V(obs), shape ``(batch,)``."""
        return cast("Tensor", self.critic(obs)).squeeze(-1)

    def policy_params(self, obs: Tensor) -> Tensor:
        """Logits, Gaussian mean, or (gSDE) ``[mean | log std]`` for ``obs``."""
        if not self.use_sde:
            return cast("Tensor", self.actor(obs))
        mean, latent = self.actor.forward_with_latent(obs)
        assert self.log_std is not None
        # learn_features=False: the variance does not train the features.
        variance = latent.detach().square() @ self.log_std.exp().square()
        return torch.cat([mean, 0.5 * (variance + SDE_EPSILON).log()], -1)

    def sample(self, out: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Actions drawn given the policy's parameters (see :meth:`policy_params`)."""
        with torch.no_grad():
            if self.discrete:
                u = torch.rand((out.shape[0], 1), generator=generator, dtype=out.dtype)
                return (torch.softmax(out, -1).cumsum(-1)[:, :-1] < u).sum(-1)
            if self.use_sde:
                mean, log_std = out.split(self.action_dim, -1)
                noise = torch.randn(mean.shape, generator=generator, dtype=out.dtype)
                return mean + log_std.exp() * noise
            assert self.log_std is not None
            noise = torch.randn(out.shape, generator=generator, dtype=out.dtype)
            return out + self.log_std.exp() * noise

    def log_prob(self, out: Tensor, action: Tensor) -> Tensor:
        """log pi(action | obs) given the policy's parameters, shape ``(batch,)``."""
        if self.discrete:
            return torch.log_softmax(out, -1).gather(-1, action.unsqueeze(-1)).squeeze(-1)
        if self.use_sde:
            mean, log_std = out.split(self.action_dim, -1)
            z = (action - mean) * (-log_std).exp()
            return (-0.5 * z * z - log_std - HALF_LOG_2PI).sum(-1)
        assert self.log_std is not None
        z = (action - out) / self.log_std.exp()
        return (-0.5 * z * z - self.log_std - HALF_LOG_2PI).sum(-1)

    def entropy(self, out: Tensor) -> Tensor:
        """Entropy of the policy given the policy's parameters, shape ``(batch,)``."""
        if self.discrete:
            log_p = torch.log_softmax(out, -1)
            return -(log_p.exp() * log_p).sum(-1)
        if self.use_sde:
            return (0.5 + HALF_LOG_2PI + out[:, self.action_dim :]).sum(-1)
        assert self.log_std is not None
        return (0.5 + HALF_LOG_2PI + self.log_std).sum().expand(out.shape[0])

    def evaluate_actions(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(log_prob, entropy, value)`` of ``actions`` in ``obs``, as the losses use them."""
        out = self.policy_params(obs)
        return self.log_prob(out, actions), self.entropy(out), self.get_value(obs)

    def deterministic_action(self, obs: Tensor) -> Tensor:
        """The mode of the policy: argmax of the logits, or the Gaussian mean."""
        out = cast("Tensor", self.actor(obs))
        return out.argmax(-1) if self.discrete else out


class TensorBatch(NamedTuple):
    """A :class:`~rlsweep.agents.rollout.RolloutBatch` as torch tensors (the same memory)."""

    obs: Tensor
    actions: Tensor
    log_probs: Tensor
    values: Tensor
    advantages: Tensor
    returns: Tensor


def as_tensors(batch: RolloutBatch) -> TensorBatch:
    return TensorBatch(*(torch.from_numpy(x) for x in batch))


def as_arrays(batch: TensorBatch) -> RolloutBatch:
    return RolloutBatch(*(x.numpy() for x in batch))
