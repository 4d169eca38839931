"""The actor-critic's pass for a gradient step, in numpy: forward, then backward.

PPO's and A2C's gradient steps run no autograd and no torch operation: a loss is a sum
over samples of terms in each sample's log-probability, entropy and value, so it gives
its derivative with respect to those (:class:`LossGradient`) and
:meth:`UpdateNetwork.backward` carries it through the policy head and both MLPs. On these
small batches (40 to a few hundred samples through 64-64 MLPs) a step is a few dozen small
array operations, where torch's per-operation overhead is several times numpy's.

:class:`UpdateNetwork` runs the network's forward (:func:`~rlsweep.agents.networks.mlp_forward`
and the head's formulas, the ones acting uses) on an
:class:`~rlsweep.agents.networks.ActorCritic`'s own parameters (views, no copy), keeping
what the backward needs, and writes gradients into the views
:attr:`~rlsweep.agents.optim.FlatOptimizer.grads` gives. Tests compare every gradient with
``torch.autograd.grad`` through a torch model of the same formulas
(``tests/reference_agents.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from rlsweep.agents.networks import (
    HALF_LOG_2PI,
    ActorCritic,
    Layer,
    gaussian_log_prob,
    log_softmax,
    mlp_forward,
    noise_variance,
    sde_variance,
)


class LossGradient(NamedTuple):
    """d loss / d each sample's log-probability, entropy and value: all a policy-gradient
    loss needs from the network; :meth:`UpdateNetwork.backward` takes it from there."""

    log_prob: np.ndarray  # (batch,) float32
    entropy: np.ndarray | None  # (batch,), or None for a loss without an entropy term
    value: np.ndarray  # (batch,)


class Evaluation(NamedTuple):
    """What the network says of a batch of (observation, action) pairs."""

    log_prob: np.ndarray  # (batch,) log pi(action | obs)
    entropy: np.ndarray  # (batch,) entropy of pi(. | obs)
    value: np.ndarray  # (batch,) V(obs)


def _mlp_backward(
    layers: Sequence[Layer],
    activations: list[np.ndarray],
    grad: np.ndarray,
    into: Sequence[np.ndarray],
    first: int,
    ones: np.ndarray,
) -> None:
    """Backpropagate ``grad`` (d loss / d head output) through a tanh MLP, writing d loss
    / d weight and d loss / d bias of each layer into ``into[first:]`` (in ``layers``'
    order). ``x @ W.T + b``: d/dW = grad.T @ x, d/db = grad summed over the batch
    (``ones @ grad``, one product), d/dx = grad @ W, then tanh's derivative ``1 - y**2``.
    No gradient reaches the input. (Written as one loop without helpers: on A2C's
    40-sample batches a Python call or a list slice here is a visible part of the backward;
    bench/step.py times the A2C update.)"""
    i = len(layers) - 1
    while True:
        np.dot(ones, grad, out=into[first + 2 * i + 1])
        x = activations[i]
        np.dot(grad.T, x, out=into[first + 2 * i])
        if i == 0:
            return
        weight = layers[i].weight
        if grad.shape[1] != 1:
            grad = np.dot(grad, weight)
        elif grad.shape[0] <= _BROADCAST_ROWS:
            grad = grad * weight  # an outer product: see _padded_product
        else:
            grad = _padded_product(grad, weight)
        grad *= 1.0 - x * x
        i -= 1


def _padded_product(grad: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``grad @ weight`` for an inner size of 1 (the value head's backward): OpenBLAS's
    product is several times slower than the same product padded with a zero column. Small batches
    take the outer product by broadcasting instead (one call; slower than this for a
    (256, 1) column). All three give the same products."""
    padded = np.concatenate([grad, np.zeros_like(grad)], 1)
    return np.dot(padded, np.concatenate([weight, np.zeros_like(weight)]))


# Up to this many rows an outer product is cheaper by broadcasting than padded for OpenBLAS
# (broadcasting's cost grows with the rows, the padded product's is mostly the four calls
# to pad: at 40 rows broadcasting is cheaper, at 256 the padded product).
_BROADCAST_ROWS = 64


class UpdatePass(NamedTuple):
    """One forward pass of a batch, with what its backward needs."""

    evaluation: Evaluation
    actions: np.ndarray
    actor: list[np.ndarray]  # the policy MLP's activations: input, hidden..., output
    critic: list[np.ndarray]  # the value MLP's
    # What the head's derivatives need. Categorical: (log-probabilities of every action,
    # probabilities, each sample's action as an index into them flattened); Gaussian:
    # (standardised action (action - mean) / std, log std); gSDE: those two (the log std
    # per state), then the latent's square, the variance and the noise entries' variance.
    head: tuple[np.ndarray, ...]


class UpdateNetwork:
    """An :class:`ActorCritic`'s forward and backward for a gradient step, on the
    network's own parameters (views: an update or ``load_state_dict`` shows at once)."""

    def __init__(self, model: ActorCritic) -> None:
        self.discrete = model.discrete
        self.use_sde = model.use_sde
        self.action_dim = model.action_dim
        self.actor, self.critic, self.log_std = model.actor, model.critic, model.log_std
        # Per batch size, made once: a row of ones (the bias gradients' batch sums) and
        # the flat index of each row's first logit (0, n_actions, 2 n_actions, ...).
        self._ones: dict[int, np.ndarray] = {}
        self._row_starts: dict[int, np.ndarray] = {}

    def forward(self, obs: np.ndarray, actions: np.ndarray) -> UpdatePass:
        """Log-probabilities of ``actions``, entropies and values for ``obs``."""
        actor, critic = mlp_forward(self.actor, obs), mlp_forward(self.critic, obs)
        out, value = actor[-1], critic[-1][:, 0]
        if self.discrete:
            chosen = self._row_starts_for(out.shape[0]) + actions
            log_p = log_softmax(out)
            p = np.exp(log_p)
            log_prob = log_p.take(chosen)
            entropy = -np.add.reduce(p * log_p, axis=-1)
            evaluation = Evaluation(log_prob, entropy, value)
            return UpdatePass(evaluation, actions, actor, critic, (log_p, p, chosen))
        assert self.log_std is not None
        if self.use_sde:
            # gSDE: a per-state log std from the policy latent (learn_features=False).
            latent_sq = actor[-2] * actor[-2]
            noise_var = noise_variance(self.log_std)
            variance = sde_variance(latent_sq, noise_var)
            log_std = np.float32(0.5) * np.log(variance)
            z = (actions - out) * np.exp(-log_std)
            entropy = (np.float32(0.5 + HALF_LOG_2PI) + log_std).sum(-1)
            head: tuple[np.ndarray, ...] = (z, log_std, latent_sq, variance, noise_var)
        else:
            log_std = self.log_std
            z = (actions - out) * np.exp(-log_std)
            entropy = np.full(out.shape[0], (np.float32(0.5 + HALF_LOG_2PI) + log_std).sum())
            head = (z, log_std)
        log_prob = gaussian_log_prob(z, log_std)
        evaluation = Evaluation(log_prob, entropy, value)
        return UpdatePass(evaluation, actions, actor, critic, head)

    def backward(self, fwd: UpdatePass, grad: LossGradient, into: Sequence[np.ndarray]) -> None:
        """Write d loss / d parameter into ``into`` (arrays shaped as the model's
        ``parameters()``, in that order: :attr:`FlatOptimizer.grads`) for a loss whose
        derivative with respect to ``fwd``'s log-probabilities, entropies and values is
        ``grad``: the policy head's derivatives, then each MLP's backward."""
        d_out, d_log_std = self._head_backward(fwd, grad.log_prob, grad.entropy)
        first = 0
        if self.log_std is not None:
            # parameters() lists the model's own parameter (log_std) before its submodules'.
            assert d_log_std is not None
            np.copyto(into[0], d_log_std)
            first = 1
        ones = self._ones_for(d_out.shape[0])
        _mlp_backward(self.actor, fwd.actor, d_out, into, first, ones)
        first += 2 * len(self.actor)  # a weight and a bias per layer
        _mlp_backward(self.critic, fwd.critic, grad.value[:, None], into, first, ones)

    def _ones_for(self, n: int) -> np.ndarray:
        ones = self._ones.get(n)
        if ones is None:
            ones = self._ones[n] = np.ones(n, dtype=np.float32)
        return ones

    def _row_starts_for(self, n: int) -> np.ndarray:
        starts = self._row_starts.get(n)
        if starts is None:
            k = self.action_dim  # logits per row
            starts = self._row_starts[n] = np.arange(0, n * k, k)
        return starts

    def _head_backward(
        self, fwd: UpdatePass, d_log_prob: np.ndarray, d_entropy: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """``(d loss / d policy MLP output, d loss / d log_std)``. The derivatives of the
        formulas :meth:`forward` computes:

        - categorical, ``log_p = log_softmax(logits)``, ``p = exp(log_p)``: d log_p[a] /
          d logits = onehot(a) - p; d entropy / d logits = -p * (log_p + entropy);
        - Gaussian, ``z = (action - mean) / std``: d log_prob / d mean = z / std,
          d log_prob / d log_std = z**2 - 1 (per action dimension); d entropy /
          d log_std = 1;
        - gSDE, ``s = 0.5 log(variance + eps)`` with ``variance = latent**2 @
          exp(log_std)**2``: as the Gaussian's for the mean and s, then d s / d
          log_std[j, k] = latent[:, j]**2 * exp(log_std[j, k])**2 / (variance[:, k] +
          eps), summed over the batch (the latent gets none: learn_features=False).
        """
        d_lp = d_log_prob[:, None]
        if self.discrete:
            log_p, p, chosen = fwd.head
            d_out = p * -d_lp
            picked = d_out.take(chosen)  # d_out[rows, actions] += d_log_prob, flat
            picked += d_log_prob
            d_out.put(chosen, picked)
            if d_entropy is not None:
                d_out -= (log_p + fwd.evaluation.entropy[:, None]) * p * d_entropy[:, None]
            return d_out, None
        assert self.log_std is not None
        z, log_std = fwd.head[:2]
        inv_std = np.exp(-log_std)
        d_s = (z * z - 1.0) * d_lp
        d_mean = z * inv_std * d_lp
        if not self.use_sde:
            d_log_std = d_s.sum(0)
            if d_entropy is not None:
                d_log_std += d_entropy.sum()
            return d_mean, d_log_std
        latent_sq, variance, noise_var = fwd.head[2:]
        if d_entropy is not None:
            d_s += d_entropy[:, None]
        return d_mean, (latent_sq.T @ (d_s / variance)) * noise_var
