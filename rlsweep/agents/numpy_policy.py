"""Acting with the actor-critic: its forward on the few observations of a vector step.

Collection and evaluation need no gradient, and run the network on a handful of
observations at a time, where every numpy call's overhead counts: :class:`NumpyPolicy`
runs the network's one forward (:func:`~rlsweep.agents.networks.mlp_forward`) with the
policy and value MLPs packed as one MLP of twice the width, one product a layer.
"""

from __future__ import annotations

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


class NumpyPolicy:
    """An :class:`ActorCritic` packed for acting on small batches.

    The policy and value MLPs run as one MLP of twice the width (first layers side by
    side, deeper layers block-diagonal), so each layer is a single product; the zero
    blocks change no result. The packed weights are copies: :meth:`refresh` after every
    update (it reuses the arrays: under half the cost of building one).
    """

    def __init__(self, model: ActorCritic) -> None:
        self.model = model
        self.discrete = model.discrete
        self.n_out = model.action_dim
        self.layers: list[Layer] = []
        # (destination block, source parameter): what a refresh copies, weights transposed.
        self._weights: list[tuple[np.ndarray, np.ndarray]] = []
        self._biases: list[tuple[np.ndarray, np.ndarray]] = []
        for depth, (a, c) in enumerate(zip(model.actor, model.critic, strict=True)):
            (a_out, a_in), (c_out, c_in) = a.weight.shape, c.weight.shape
            if depth == 0:  # both read the observation
                weight = np.zeros((a_in, a_out + c_out), dtype=np.float32)
                blocks = weight[:, :a_out], weight[:, a_out:]
            else:
                weight = np.zeros((a_in + c_in, a_out + c_out), dtype=np.float32)
                blocks = weight[:a_in, :a_out], weight[a_in:, a_out:]
            bias = np.zeros(a_out + c_out, dtype=np.float32)
            self._weights += [(blocks[0], a.weight_t), (blocks[1], c.weight_t)]
            self._biases += [(bias[:a_out], a.bias), (bias[a_out:], c.bias)]
            self.layers.append(Layer(weight.T, weight, bias))
        self.use_sde = model.use_sde
        self.latent_dim = model.latent_dim
        self.log_std: np.ndarray | None = None
        # gSDE: the variance of each noise-matrix entry.
        self.noise_var: np.ndarray | None = None
        self.refresh()

    def refresh(self) -> None:
        """Copy the model's current parameters in (after an update or a checkpoint load)."""
        for block, param in self._weights:
            np.copyto(block, param)
        for block, param in self._biases:
            np.copyto(block, param)
        log_std = self.model.log_std
        self.log_std = None if log_std is None else log_std.copy()
        if self.use_sde and self.log_std is not None:
            self.noise_var = noise_variance(self.log_std)

    def forward(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(logits or Gaussian mean, value)`` for a batch of float32 observations."""
        out, value, _ = self.forward_with_latent(obs)
        return out, value

    def forward_with_latent(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(logits or Gaussian mean, value, policy latent)``: :meth:`forward` plus the
        output of the policy MLP's last hidden layer (the gSDE features)."""
        *_, x, out = mlp_forward(self.layers, obs)
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
        assert self.noise_var is not None
        mean, value, latent = self.forward_with_latent(obs)
        noise = (latent[:, None, :] @ exploration)[:, 0, :]
        variance = sde_variance(latent * latent, self.noise_var)
        log_prob = (
            -0.5 * noise * noise / variance - 0.5 * np.log(variance) - np.float32(HALF_LOG_2PI)
        ).sum(-1)
        return mean + noise, log_prob, value
