"""The actor-critic network of PPO and A2C, in numpy: its parameters and its forward pass.

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
``Normal(mean, sqrt((latent**2) @ exp(log_std)**2 + SDE_EPSILON))`` (:func:`sde_variance`).

The parameters live in one flat float32 vector (:attr:`ActorCritic.flat`), every layer's
weight and bias a numpy view of it, which the optimiser updates in place. torch serves
two things only: the orthogonal initialisation (drawn from a torch generator) and the
checkpoint's format (:meth:`ActorCritic.state_dict`: tensors named as an ``nn.Module``'s).

The forward pass is :func:`mlp_forward` and the policy head's formulas below, the one
definition both passes use: the update (:mod:`rlsweep.agents.gradients`) runs it on each
MLP's own layers and keeps the activations for its backward; acting
(:mod:`rlsweep.agents.numpy_policy`) runs it on the same parameters packed as one MLP of
twice the width. numpy, not torch: on batches this small (a vector step's few
observations, a few hundred samples for an update) torch's per-operation overhead is
several times numpy's. Tests compare all of it with a torch model and autograd
(``tests/reference_agents.py``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
# Added to the gSDE variance (SB3's epsilon), so that a zero latent keeps a finite log-prob.
SDE_EPSILON = 1e-6


class Layer(NamedTuple):
    """One linear layer's parameters (numpy views, no copy)."""

    weight: np.ndarray  # (out, in), as nn.Linear stores it
    weight_t: np.ndarray  # (in, out): ``x @ weight_t`` is the layer's product
    bias: np.ndarray


def mlp_forward(layers: Sequence[Layer], x: np.ndarray) -> list[np.ndarray]:
    """``[x, hidden 1, ..., last hidden, head output]`` of a tanh MLP (``tanh(x @ weight.T +
    bias)`` a hidden layer, no activation on the head).

    Products are ``np.dot``: for 2-D float32 arrays it calls the same BLAS routine as ``@``
    (the same bits: checked on 589 shapes and heads) without ``np.matmul``'s generalised-ufunc
    dispatch, whose cost per call is a visible part of A2C's update on 40 samples
    (bench/step.py times that update). numpy's tanh is vectorised (torch 2.13's CPU tanh is
    not, and is many times slower on a 256x64 batch), within 1.4 ulp of the exact value, the
    same at any alignment."""
    out = [x]
    for layer in layers[:-1]:
        h = np.dot(x, layer.weight_t)
        h += layer.bias
        x = np.tanh(h, out=h)
        out.append(x)
    head = np.dot(x, layers[-1].weight_t)
    head += layers[-1].bias
    out.append(head)
    return out


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log_softmax over the last axis (the categorical policy's log-probabilities). The
    reductions are the ufuncs' own (``ndarray.max`` / ``sum`` call them through a Python
    layer): the same values, without that layer's cost."""
    shifted = logits - np.maximum.reduce(logits, axis=-1, keepdims=True)
    return shifted - np.log(np.add.reduce(np.exp(shifted), axis=-1, keepdims=True))


def gaussian_log_prob(z: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    """Log-density of a diagonal Gaussian at standardised points ``z = (x - mean) / std``,
    summed over the last axis."""
    return (np.float32(-0.5) * z * z - log_std - np.float32(HALF_LOG_2PI)).sum(-1)


def noise_variance(log_std: np.ndarray) -> np.ndarray:
    """gSDE: the variance ``exp(log_std)**2`` of each noise-matrix entry."""
    return np.exp(log_std) ** 2


def sde_variance(latent_sq: np.ndarray, noise_var: np.ndarray) -> np.ndarray:
    """gSDE: each state's action variance, ``latent**2 @ noise_var + SDE_EPSILON``, for the
    squared policy latent ``latent_sq`` and the entries' variance (:func:`noise_variance`)."""
    variance = latent_sq @ noise_var
    variance += np.float32(SDE_EPSILON)
    return variance


def init_mlp(
    in_features: int,
    hidden: Sequence[int],
    out_features: int,
    out_gain: float,
    generator: torch.Generator | None,
) -> list[tuple[Tensor, Tensor]]:
    """``(weight (out, in), bias)`` of each layer of a tanh MLP, hidden layers then head:
    orthogonal weights (gain sqrt(2), ``out_gain`` for the head) drawn from ``generator``
    (torch's global one if None) layer by layer, zero biases."""
    widths = [in_features, *hidden, out_features]
    layers = []
    for depth, (a, b) in enumerate(itertools.pairwise(widths)):
        gain = out_gain if depth == len(widths) - 2 else math.sqrt(2.0)
        weight = torch.empty(b, a)
        nn.init.orthogonal_(weight, gain, generator=generator)
        layers.append((weight, torch.zeros(b)))
    return layers


def _named(prefix: str, layers: list[tuple[Tensor, Tensor]]) -> list[tuple[str, Tensor]]:
    """nn.Module's names for an MLP's parameters: ``actor.layers.0.weight`` ... ``actor.head.bias``."""
    out = []
    for depth, (weight, bias) in enumerate(layers):
        name = f"{prefix}.head" if depth == len(layers) - 1 else f"{prefix}.layers.{depth}"
        out += [(f"{name}.weight", weight), (f"{name}.bias", bias)]
    return out


class ActorCritic:
    """Policy and value function for flat observations of ``obs_dim`` features.

    :attr:`actor` and :attr:`critic` are the two MLPs' layers (hidden layers, then the
    head: ``action_dim`` logits or Gaussian means, one value); :attr:`log_std` the
    Gaussian's log std (gSDE: of each entry of the ``(latent_dim, action_dim)`` noise
    matrix), None for discrete actions. All are views of :attr:`flat`, laid out in
    :attr:`names` order (``log_std`` first, as ``nn.Module.parameters()`` lists a module's
    own parameter before its submodules').
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
        if use_sde and discrete:
            raise ValueError("gSDE (use_sde) needs continuous actions")
        self.discrete = discrete
        self.use_sde = use_sde
        self.action_dim = action_dim
        self.latent_dim = int(hidden[-1]) if hidden else obs_dim
        # Drawn in this order (policy, value) from ``generator`` (torch's global one if
        # None), a fixed sequence. A private generator keeps jobs that run side by side in
        # threads from drawing from each other's stream.
        actor = init_mlp(obs_dim, hidden, action_dim, 0.01, generator)
        critic = init_mlp(obs_dim, hidden, 1, 1.0, generator)
        named = _named("actor", actor) + _named("critic", critic)
        if not discrete:
            log_std_shape = (self.latent_dim, action_dim) if use_sde else (action_dim,)
            named.insert(0, ("log_std", torch.full(log_std_shape, float(log_std_init))))
        # torch allocates the vector (aligned as a torch tensor is: how the operands lie in
        # memory can change a product's rounding).
        self.flat = torch.cat([t.reshape(-1) for _, t in named])
        self.names = [name for name, _ in named]
        self.shapes: list[tuple[int, ...]] = [tuple(t.shape) for _, t in named]
        self.tensors: dict[str, Tensor] = {}  # torch views of ``flat``, by name
        offset = 0
        for name, shape in zip(self.names, self.shapes, strict=True):
            size = math.prod(shape)
            self.tensors[name] = self.flat[offset : offset + size].view(shape)
            offset += size
        arrays = {name: tensor.numpy() for name, tensor in self.tensors.items()}
        self.log_std: np.ndarray | None = arrays.get("log_std")
        self.actor = _layers(arrays, "actor", len(actor))
        self.critic = _layers(arrays, "critic", len(critic))

    def state_dict(self) -> dict[str, Tensor]:
        """A copy of the parameters, as the checkpoint holds them (an ``nn.Module``'s names)."""
        return {name: tensor.clone() for name, tensor in self.tensors.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Copy ``state`` (from :meth:`state_dict`) into the parameters, in place: views of
        :attr:`flat` (the optimiser's and the passes') stay valid."""
        if sorted(state) != sorted(self.names):
            raise ValueError(
                f"the state's parameters {sorted(state)} are not this network's "
                f"({sorted(self.names)})"
            )
        with torch.no_grad():
            for name, tensor in self.tensors.items():
                value = torch.as_tensor(state[name])
                if value.shape != tensor.shape:
                    raise ValueError(
                        f"{name} has shape {tuple(value.shape)} in the state, "
                        f"{tuple(tensor.shape)} in this network"
                    )
                tensor.copy_(value)


def _layers(arrays: dict[str, np.ndarray], prefix: str, depth: int) -> list[Layer]:
    out = []
    for i in range(depth):
        name = f"{prefix}.head" if i == depth - 1 else f"{prefix}.layers.{i}"
        weight = arrays[f"{name}.weight"]
        out.append(Layer(weight, weight.T, arrays[f"{name}.bias"]))
    return out
