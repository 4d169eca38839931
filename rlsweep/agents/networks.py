"""The actor-critic network shared by the on-policy agents (CleanRL style).

Stable-Baselines3's default ``MlpPolicy``: separate policy and value MLPs, hidden
(64, 64), tanh, orthogonal init (gain sqrt(2) for hidden layers, 0.01 for the policy
head, 1 for the value head), zero biases. Discrete actions use a categorical policy over
logits; continuous actions a diagonal Gaussian with a state-independent ``log_std``, or,
with ``use_sde``, generalised State-Dependent Exploration (gSDE, Raffin et al. 2021, as
Stable-Baselines3's ``StateDependentNoiseDistribution`` with ``full_std=True``,
``use_expln=False``, ``learn_features=False``, ``squash_output=False``): the exploration
noise is ``latent @ E`` for the policy MLP's last hidden layer ``latent`` and a matrix
``E ~ N(0, exp(log_std))`` of shape ``(latent_dim, action_dim)`` held fixed between
resamples, so the action's distribution given the state is
``Normal(mean, sqrt((latent**2) @ exp(log_std)**2 + SDE_EPSILON))``.

Log-probabilities and entropies are written out by hand: ``torch.distributions`` objects
cost more per call than the whole forward pass of these small networks.

:class:`rlsweep.agents.numpy_policy.NumpyPolicy` runs the same network in numpy for
collection and evaluation, and :class:`rlsweep.agents.gradients.UpdateNetwork` runs its
forward and backward pass in numpy for PPO's and A2C's gradient steps; the torch forward
here is the definition both follow (tests compare them with it and with autograd).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
# Added to the gSDE variance (SB3's epsilon), so that a zero latent keeps a finite log-prob.
SDE_EPSILON = 1e-6


def _linear(
    in_features: int, out_features: int, gain: float, generator: torch.Generator | None
) -> nn.Linear:
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain, generator=generator)
    nn.init.zeros_(layer.bias)
    return layer


def tanh(x: Tensor) -> Tensor:
    """``tanh(x)`` by numpy's vectorised tanh, differentiated as autograd differentiates
    ``torch.tanh`` (``tanh_backward`` of the result).

    torch 2.13's CPU tanh is not vectorised here: 33 us for a 256x64 float32 batch against
    numpy's 2.8 us. numpy's is also what the numpy passes (:class:`NumpyPolicy` for
    collection and evaluation, :class:`~rlsweep.agents.gradients.UpdateNetwork` for the
    updates) run, so this torch forward, their reference in tests, computes the same
    activations. It is within 1.4 ulp of the exact value, the same at any alignment, and
    the same on CPUs with AVX2 or AVX-512 (numpy 2.4; not on a CPU without AVX2)."""
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64):
        return torch.tanh(x)
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


class MLP(nn.Module):
    """Tanh MLP with orthogonal init: gain sqrt(2) on hidden layers, ``out_gain`` on the head.

    ``forward`` calls ``F.linear`` on the layers' parameters instead of calling the layer
    modules: on batches this small, module-call overhead is a large share of the time.
    """

    def __init__(
        self,
        in_features: int,
        hidden: Sequence[int],
        out_features: int,
        out_gain: float,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        widths = [in_features, *hidden]
        self.layers = nn.ModuleList(
            _linear(a, b, math.sqrt(2.0), generator) for a, b in itertools.pairwise(widths)
        )
        self.head = _linear(widths[-1], out_features, out_gain, generator)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_with_latent(x)[0]

    def forward_with_latent(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(head output, last hidden layer's output)``."""
        for layer in cast("list[nn.Linear]", self.layers):
            x = tanh(F.linear(x, layer.weight, layer.bias))
        return F.linear(x, self.head.weight, self.head.bias), x


class ActorCritic(nn.Module):
    """Policy and value function for flat observations of ``obs_dim`` features.

    The policy's parameters for a batch of observations (:meth:`policy_params`, what
    :meth:`log_prob`, :meth:`entropy` and :meth:`sample` take) are the logits, the
    Gaussian mean, or with gSDE the mean and the state-dependent log std side by side
    (``action_dim`` columns each).
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        discrete: bool,
        hidden: Sequence[int] = (64, 64),
        log_std_init: float = 0.0,
        generator: torch.Generator | None = None,
        use_sde: bool = False,
    ) -> None:
        super().__init__()
        if use_sde and discrete:
            raise ValueError("gSDE (use_sde) needs continuous actions")
        self.discrete = discrete
        self.use_sde = use_sde
        self.action_dim = action_dim
        # Built in this order (policy, value) so the init draws from ``generator`` (torch's
        # global one if None) in a fixed sequence. A private generator keeps jobs that run
        # side by side in threads from drawing from each other's stream.
        self.actor = MLP(obs_dim, hidden, action_dim, out_gain=0.01, generator=generator)
        self.critic = MLP(obs_dim, hidden, 1, out_gain=1.0, generator=generator)
        self.log_std: nn.Parameter | None = None
        if not discrete:
            # gSDE: the log std of each entry of the (latent_dim, action_dim) noise matrix.
            shape = (self.latent_dim, action_dim) if use_sde else (action_dim,)
            self.log_std = nn.Parameter(torch.full(shape, float(log_std_init)))

    @property
    def latent_dim(self) -> int:
        """Width of the policy MLP's last hidden layer (the gSDE features)."""
        return self.actor.head.in_features

    def get_value(self, obs: Tensor) -> Tensor:
        """V(obs), shape ``(batch,)``."""
        return self.critic(obs).squeeze(-1)

    def policy_params(self, obs: Tensor) -> Tensor:
        """Logits, Gaussian mean, or (gSDE) ``[mean | log std]`` for ``obs``."""
        if not self.use_sde:
            return self.actor(obs)
        return self._with_sde_log_std(*self.actor.forward_with_latent(obs))

    def _with_sde_log_std(self, mean: Tensor, latent: Tensor) -> Tensor:
        """gSDE's ``[mean | log std]`` from the policy MLP's output and last hidden layer."""
        assert self.log_std is not None
        # learn_features=False: the variance does not train the features.
        variance = latent.detach().square() @ self.log_std.exp().square()
        return torch.cat([mean, 0.5 * (variance + SDE_EPSILON).log()], -1)

    def sample(self, out: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Draw actions given the policy's parameters (see :meth:`policy_params`).

        With gSDE this draws from the per-state Gaussian, i.e. as if each observation had
        a freshly sampled noise matrix; rollouts hold the matrices fixed instead (see
        :class:`rlsweep.agents.rollout.SDENoise`).
        """
        with torch.no_grad():
            if self.discrete:
                # Inverse-CDF sampling (cheaper than torch.multinomial); comparing with all
                # but the last CDF entry keeps the index in range despite rounding.
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

    def deterministic_action(self, obs: Tensor) -> Tensor:
        """The mode of the policy: argmax of the logits, or the Gaussian mean."""
        out = self.actor(obs)
        return out.argmax(-1) if self.discrete else out
