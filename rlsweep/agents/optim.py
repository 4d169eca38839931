"""Gradient steps on one flat parameter vector, with Adam or RMSprop.

The networks here are tiny, so a gradient step costs mostly per-tensor and per-call
overhead: a ``torch.optim`` step over 12 weight and bias tensors, the gradient-norm
clipping and the zeroing of 12 gradients take longer than their arithmetic. The
parameters therefore live in one contiguous vector (the actor-critic's own
:attr:`~rlsweep.agents.networks.ActorCritic.flat`; a torch module's, moved there by
:class:`ModuleOptimizer`), so clipping and the update each take a handful of array
operations. :class:`Adam` and :class:`RMSprop` are the update rules of
``torch.optim.Adam`` / ``torch.optim.RMSprop`` (defaults: no weight decay, no momentum,
not centred) written out in numpy for that one vector (a numpy view of the same memory):
the same formulas as torch's single-tensor implementations (``foreach=False``), equal to
float32 rounding (torch's kernels fuse some multiply-adds), without ``torch.optim``'s
per-step bookkeeping or torch's per-operation overhead, which at this size cost more
than the arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor, nn


class UpdateRule(Protocol):
    """An optimiser's update of one flat float32 parameter vector from its gradient."""

    learning_rate: float

    def update(self, param: np.ndarray, grad: np.ndarray) -> None:
        """Apply one step to ``param`` in place."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def _state_out(array: np.ndarray | None) -> Tensor | None:
    """Optimiser state as a checkpoint holds it (a torch tensor, as ``torch.optim``'s is)."""
    return None if array is None else torch.from_numpy(array.copy())


def _state_in(value: Any) -> np.ndarray | None:
    """Optimiser state from a checkpoint (a tensor or an array)."""
    if value is None:
        return None
    if isinstance(value, Tensor):
        return value.detach().numpy().astype(np.float32, copy=True)
    return np.array(value, dtype=np.float32)


class Adam:
    """Adam (Kingma & Ba), as ``torch.optim.Adam`` computes it, in numpy."""

    def __init__(
        self, learning_rate: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ) -> None:
        self.learning_rate = learning_rate
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.step = 0
        self.exp_avg: np.ndarray | None = None
        self.exp_avg_sq: np.ndarray | None = None

    def update(self, param: np.ndarray, grad: np.ndarray) -> None:
        if self.exp_avg is None or self.exp_avg_sq is None:
            self.exp_avg, self.exp_avg_sq = np.zeros_like(param), np.zeros_like(param)
        exp_avg, exp_avg_sq = self.exp_avg, self.exp_avg_sq
        self.step += 1
        # exp_avg.lerp_(grad, 1 - beta1); exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) g^2
        exp_avg += (grad - exp_avg) * np.float32(1.0 - self.beta1)
        exp_avg_sq *= np.float32(self.beta2)
        exp_avg_sq += grad * grad * np.float32(1.0 - self.beta2)
        bias_correction1 = 1.0 - self.beta1**self.step
        bias_correction2_sqrt = (1.0 - self.beta2**self.step) ** 0.5
        denom = np.sqrt(exp_avg_sq)
        denom *= np.float32(1.0 / bias_correction2_sqrt)
        denom += np.float32(self.eps)
        np.divide(exp_avg, denom, out=denom)
        denom *= np.float32(self.learning_rate / bias_correction1)
        param -= denom

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "exp_avg": _state_out(self.exp_avg),
            "exp_avg_sq": _state_out(self.exp_avg_sq),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])
        self.exp_avg = _state_in(state["exp_avg"])
        self.exp_avg_sq = _state_in(state["exp_avg_sq"])


class RMSprop:
    """RMSprop (Hinton), as ``torch.optim.RMSprop`` computes it (no momentum), in numpy."""

    def __init__(self, learning_rate: float, alpha: float = 0.99, eps: float = 1e-8) -> None:
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.eps = eps
        self.square_avg: np.ndarray | None = None

    def update(self, param: np.ndarray, grad: np.ndarray) -> None:
        if self.square_avg is None:
            self.square_avg = np.zeros_like(param)
        square_avg = self.square_avg
        square_avg *= np.float32(self.alpha)
        square_avg += grad * grad * np.float32(1.0 - self.alpha)
        avg = np.sqrt(square_avg)
        avg += np.float32(self.eps)
        np.divide(grad, avg, out=avg)
        avg *= np.float32(self.learning_rate)
        param -= avg

    def state_dict(self) -> dict[str, Any]:
        return {"square_avg": _state_out(self.square_avg)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.square_avg = _state_in(state["square_avg"])


class FlatOptimizer:
    """Gradient steps on parameters stored as views of one flat float32 tensor, ``flat``.

    The gradient has the same layout: :attr:`grads` are numpy views of it shaped as the
    parameters (``shapes``, in the order of ``flat``), for a hand-written backward to
    write into before :meth:`apply_gradient`. Clipping and the update rule then take a
    handful of array operations on the whole vector.
    """

    def __init__(self, flat: Tensor, shapes: Sequence[tuple[int, ...]], rule: UpdateRule) -> None:
        self.flat = flat
        self.grad = torch.zeros_like(flat)
        self.grads: list[np.ndarray] = []
        # numpy views of the flat parameters and gradient (the same memory), made once.
        self._flat_array, self._grad_array = flat.numpy(), self.grad.numpy()
        offset = 0
        for shape in shapes:
            size = math.prod(shape)
            self.grads.append(self._grad_array[offset : offset + size].reshape(shape))
            offset += size
        if offset != flat.numel():
            raise ValueError(f"shapes of {offset} parameters for a vector of {flat.numel()}")
        self.rule = rule

    @property
    def learning_rate(self) -> float:
        return self.rule.learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self.rule.learning_rate = value

    def apply_gradient(self, max_grad_norm: float) -> float:
        """Clip the global norm of the gradient in :attr:`grads`, then update the
        parameters by the rule. Returns the norm before clipping."""
        grad = self._grad_array
        norm = float(np.sqrt(np.dot(grad, grad)))
        scale = max_grad_norm / (norm + 1e-6)
        if scale < 1.0:
            grad *= np.float32(scale)
        self.rule.update(self._flat_array, grad)
        return norm

    def state_dict(self) -> dict[str, Any]:
        return self.rule.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rule.load_state_dict(state)


class ModuleOptimizer(FlatOptimizer):
    """A :class:`FlatOptimizer` on a torch module's parameters, stepped through autograd
    (DQN's): the parameters move into one flat tensor (each becomes a view of it).

    Do not reassign the module's parameters (``p.data = ...``) afterwards: that would
    detach them from the flat vector. ``module.load_state_dict`` copies in place and is
    fine.
    """

    def __init__(self, module: nn.Module, rule: UpdateRule) -> None:
        self.params = list(module.parameters())
        flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        super().__init__(flat, [tuple(p.shape) for p in self.params], rule)
        offset = 0
        for p in self.params:
            p.data = flat[offset : offset + p.numel()].view_as(p)
            offset += p.numel()

    def step(self, loss: Tensor, max_grad_norm: float) -> float:
        """Minimise ``loss`` by one step, after clipping the global gradient norm.

        Same as ``zero_grad(); loss.backward(); clip_grad_norm_(params, max_grad_norm);
        step()``. Returns the gradient norm before clipping.
        """
        grads = torch.autograd.grad(loss, self.params, allow_unused=True, materialize_grads=True)
        with torch.no_grad():
            torch.cat([g.reshape(-1) for g in grads], out=self.grad)
        return self.apply_gradient(max_grad_norm)
