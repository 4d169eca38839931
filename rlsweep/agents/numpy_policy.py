"""The actor-critic network in numpy, for acting on the few observations of a vector step.

Collection and evaluation run the policy on a handful of observations at a time, where
torch's per-operation overhead is several times numpy's, and need no gradient.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from torch import Tensor, nn

from rlsweep.agents.networks import HALF_LOG_2PI, SDE_EPSILON, ActorCritic


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log_softmax over the last axis (the categorical policy's log-probabilities). The
    reductions are the ufuncs' own (``ndarray.max`` / ``sum`` call them through a Python
    layer): the same values, ~1 us less each."""
    shifted = logits - np.maximum.reduce(logits, axis=-1, keepdims=True)
    return shifted - np.log(np.add.reduce(np.exp(shifted), axis=-1, keepdims=True))


def gaussian_log_prob(z: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    """Log-density of a diagonal Gaussian at standardised points ``z = (x - mean) / std``,
    summed over the last axis."""
    return (np.float32(-0.5) * z * z - log_std - np.float32(HALF_LOG_2PI)).sum(-1)


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
        x = obs  # products by np.dot, as UpdateNetwork's (see gradients._mlp_forward)
        for weight, bias in self.layers[:-1]:
            x = np.tanh(np.dot(x, weight) + bias)
        weight, bias = self.layers[-1]
        out = np.dot(x, weight) + bias
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
            log_p = log_softmax(out)
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
            log_prob = gaussian_log_prob(noise, self.log_std)
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
