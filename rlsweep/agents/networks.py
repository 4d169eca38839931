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

:class:`NumpyPolicy` runs the same network in numpy on the few observations of one
vector step (collection and evaluation): torch's per-operation overhead is several times
numpy's at that size, and the forward pass needs no autograd.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple, cast

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
    numpy's 2.8 us, and a PPO step runs four of them. numpy's is also what
    :class:`NumpyPolicy` (collection, evaluation) runs, so the update now sees the same
    activations the collecting policy saw. It is within 1.4 ulp of the exact value, the
    same at any alignment, and the same on CPUs with AVX2 or AVX-512 (numpy 2.4; not on a
    CPU without AVX2, as MKL's products are not either)."""
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

    def activations(self, x: Tensor) -> list[Tensor]:
        """``[x, hidden 1, ..., last hidden, head output]``: each layer's input, then the
        output (what :meth:`backward` needs). Call it under ``torch.no_grad()``."""
        out = [x]
        for layer in cast("list[nn.Linear]", self.layers):
            out.append(tanh(F.linear(out[-1], layer.weight, layer.bias)))
        out.append(F.linear(out[-1], self.head.weight, self.head.bias))
        return out

    def backward(self, activations: list[Tensor], grad: Tensor) -> list[Tensor]:
        """Backpropagate ``grad`` (d loss / d output) through the layers: d loss / d
        parameter, in :meth:`parameters` order. No gradient reaches the input. Call it
        under ``torch.no_grad()``.

        These are the operations autograd runs for :meth:`forward` (``F.linear`` is
        ``addmm(b, x, W.t())``: d/dW = grad.t() @ x, d/db = grad summed over the batch,
        d/dx = grad @ W, then tanh's backward), in the same layouts and into new tensors
        as autograd's (MKL's products can round differently into a misaligned output),
        so the gradients are autograd's bit for bit (a test checks); without autograd's
        per-node bookkeeping, which costs more than these small matrix products.
        """
        layers = [*cast("list[nn.Linear]", self.layers), self.head]
        grads: list[Tensor] = []
        for i in range(len(layers) - 1, -1, -1):
            grads += [grad.sum(0), grad.t().mm(activations[i])]  # bias, weight
            if i > 0:
                grad = torch.ops.aten.tanh_backward(grad.mm(layers[i].weight), activations[i])
        return grads[::-1]


class Tape(NamedTuple):
    """What :meth:`ActorCritic.backward` needs from :meth:`ActorCritic.forward_for_update`."""

    actor: list[Tensor]  # the policy MLP's activations (see MLP.activations)
    critic: list[Tensor]  # the value MLP's
    leaves: list[Tensor]  # what autograd differentiates the loss by: the MLPs' outputs, log_std


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

    def forward_for_update(self, obs: Tensor) -> tuple[Tensor, Tensor, Tape]:
        """``(policy params, values, tape)`` for a gradient step: the numbers of
        :meth:`policy_params` and :meth:`get_value`, but autograd records only what a loss
        computes from the two MLPs' outputs on; :meth:`backward` goes the rest of the way."""
        with torch.no_grad():
            actor, critic = self.actor.activations(obs), self.critic.activations(obs)
        head, value = actor[-1].requires_grad_(), critic[-1].requires_grad_()
        out = self._with_sde_log_std(head, actor[-2]) if self.use_sde else head
        leaves = [head, value] if self.log_std is None else [head, value, self.log_std]
        return out, value.squeeze(-1), Tape(actor, critic, leaves)

    def backward(self, loss: Tensor, tape: Tape) -> list[Tensor]:
        """d loss / d parameter, in :meth:`parameters` order, for a ``loss`` computed from
        :meth:`forward_for_update`'s outputs: autograd from the loss to the MLPs' outputs,
        then :meth:`MLP.backward` through each MLP. The same gradients as
        ``torch.autograd.grad(loss, parameters())`` through :meth:`policy_params` and
        :meth:`get_value`, bit for bit."""
        leaf_grads = torch.autograd.grad(
            loss, tape.leaves, allow_unused=True, materialize_grads=True
        )
        with torch.no_grad():
            grads = self.actor.backward(tape.actor, leaf_grads[0])
            grads += self.critic.backward(tape.critic, leaf_grads[1])
        # parameters() lists the module's own parameter (log_std) before its submodules'.
        return grads if self.log_std is None else [leaf_grads[2], *grads]

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


class NumpyPolicy:
    """A numpy copy of an :class:`ActorCritic`, for acting on small batches.

    It copies the parameters when built and at every :meth:`refresh`: refresh it after
    every update (a refresh reuses the arrays: under half the cost of building one). The
    policy and value MLPs run as one MLP of twice the width (first layers side by side,
    deeper layers block-diagonal), so each layer is a single matmul; the zero blocks
    change no result. Matches the torch forward pass up to float32 rounding.
    """

    def __init__(self, model: ActorCritic) -> None:
        self.model = model
        self.discrete = model.discrete
        actor = [*cast("list[nn.Linear]", model.actor.layers), model.actor.head]
        critic = [*cast("list[nn.Linear]", model.critic.layers), model.critic.head]
        self.n_out = actor[-1].out_features
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []
        # (destination block, source parameter): what a refresh copies, weights transposed.
        self._weights: list[tuple[np.ndarray, Tensor]] = []
        self._biases: list[tuple[np.ndarray, Tensor]] = []
        for depth, (a, c) in enumerate(zip(actor, critic, strict=True)):
            (a_out, a_in), (c_out, c_in) = a.weight.shape, c.weight.shape
            if depth == 0:  # both read the observation
                weight = np.zeros((a_in, a_out + c_out), dtype=np.float32)
                blocks = weight[:, :a_out], weight[:, a_out:]
            else:
                weight = np.zeros((a_in + c_in, a_out + c_out), dtype=np.float32)
                blocks = weight[:a_in, :a_out], weight[a_in:, a_out:]
            bias = np.zeros(a_out + c_out, dtype=np.float32)
            self._weights += [(blocks[0], a.weight), (blocks[1], c.weight)]
            self._biases += [(bias[:a_out], a.bias), (bias[a_out:], c.bias)]
            self.layers.append((weight, bias))
        self.use_sde = model.use_sde
        self.latent_dim = model.latent_dim
        self.log_std: np.ndarray | None = None
        # gSDE: the variance of each noise-matrix entry, exp(log_std)**2.
        self.sde_variance: np.ndarray | None = None
        self.refresh()

    def refresh(self) -> None:
        """Copy the model's current parameters in (after an update or a checkpoint load)."""
        for block, param in self._weights:
            np.copyto(block, param.detach().numpy().T)
        for block, param in self._biases:
            np.copyto(block, param.detach().numpy())
        log_std = self.model.log_std
        self.log_std = None if log_std is None else log_std.detach().numpy().copy()
        if self.use_sde and self.log_std is not None:
            self.sde_variance = np.exp(self.log_std) ** 2

    def forward(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(logits or Gaussian mean, value)`` for a batch of float32 observations."""
        out, value, _ = self.forward_with_latent(obs)
        return out, value

    def forward_with_latent(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(logits or Gaussian mean, value, policy latent)``: :meth:`forward` plus the
        output of the policy MLP's last hidden layer (the gSDE features)."""
        x = obs
        for weight, bias in self.layers[:-1]:
            x = np.tanh(x @ weight + bias)
        weight, bias = self.layers[-1]
        out = x @ weight + bias
        return out[:, : self.n_out], out[:, self.n_out], x[:, : self.latent_dim]

    def deterministic_action(self, obs: np.ndarray) -> np.ndarray:
        """Argmax of the logits, or the Gaussian mean."""
        out, _ = self.forward(obs)
        return out.argmax(-1) if self.discrete else out

    def sample(
        self, obs: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(action, log_prob, value)`` with the action drawn from ``rng``."""
        out, value = self.forward(obs)
        if self.discrete:
            shifted = out - out.max(-1, keepdims=True)
            log_p = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
            # Inverse-CDF sampling; comparing with all but the last CDF entry keeps the
            # index in range even when the probabilities sum to slightly less than 1.
            cdf = np.exp(log_p).cumsum(-1)
            u = rng.random((out.shape[0], 1), dtype=np.float32)
            action = (cdf[:, :-1] < u).sum(-1)
            log_prob = log_p[np.arange(out.shape[0]), action]
        else:
            assert self.log_std is not None
            noise = rng.standard_normal(out.shape, dtype=np.float32)
            action = out + np.exp(self.log_std) * noise
            log_prob = (-0.5 * noise * noise - self.log_std - np.float32(HALF_LOG_2PI)).sum(-1)
        return action, log_prob, value

    def sample_sde(
        self, obs: np.ndarray, exploration: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(action, log_prob, value)`` under gSDE: row i's noise is ``latent_i @
        exploration[i]``, for ``exploration`` of shape ``(batch, latent_dim, action_dim)``."""
        assert self.sde_variance is not None
        mean, value, latent = self.forward_with_latent(obs)
        noise = (latent[:, None, :] @ exploration)[:, 0, :]
        variance = (latent * latent) @ self.sde_variance + np.float32(SDE_EPSILON)
        log_prob = (
            -0.5 * noise * noise / variance - 0.5 * np.log(variance) - np.float32(HALF_LOG_2PI)
        ).sum(-1)
        return mean + noise, log_prob, value
