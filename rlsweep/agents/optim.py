"""Gradient steps on one flat parameter vector, with Adam or RMSprop.

The networks here are tiny, so a gradient step costs mostly per-tensor and per-call
overhead: a ``torch.optim`` step over 12 weight and bias tensors, the gradient-norm
clipping and the zeroing of 12 gradients take longer than their arithmetic.
:class:`FlatOptimizer` moves all of a module's parameters into one contiguous tensor (the
module's parameters become views of it), so clipping and the update each take a handful
of tensor operations. :class:`Adam` and :class:`RMSprop` are the update rules of
``torch.optim.Adam`` / ``torch.optim.RMSprop`` (defaults: no weight decay, no momentum,
not centred) written out for that one tensor; they give the same numbers as torch's
single-tensor implementations (``foreach=False``), without ``torch.optim``'s per-step
bookkeeping, which costs as much as the update itself at this size.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import Tensor, nn


class UpdateRule(Protocol):
    """An optimiser's update of one parameter tensor from its gradient."""

    learning_rate: float

    def update(self, param: Tensor, grad: Tensor) -> None:
        """Apply one step to ``param`` in place."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def _state_like(param: Tensor) -> Tensor:
    """Zeroed optimiser state for ``param``, an ordinary tensor even when the first
    update runs in ``torch.inference_mode()`` (as PPO's and A2C's do): an inference
    tensor could not be updated in place outside inference mode afterwards."""
    with torch.inference_mode(False):
        return torch.zeros_like(param)


class Adam:
    """Adam (Kingma & Ba), exactly as ``torch.optim.Adam`` computes it."""

    def __init__(
        self, learning_rate: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ) -> None:
        self.learning_rate = learning_rate
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.step = 0
        self.exp_avg: Tensor | None = None
        self.exp_avg_sq: Tensor | None = None

    @torch.no_grad()
    def update(self, param: Tensor, grad: Tensor) -> None:
        if self.exp_avg is None or self.exp_avg_sq is None:
            self.exp_avg, self.exp_avg_sq = _state_like(param), _state_like(param)
        self.step += 1
        self.exp_avg.lerp_(grad, 1.0 - self.beta1)
        self.exp_avg_sq.mul_(self.beta2).addcmul_(grad, grad, value=1.0 - self.beta2)
        bias_correction1 = 1.0 - self.beta1**self.step
        bias_correction2_sqrt = (1.0 - self.beta2**self.step) ** 0.5
        denom = (self.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self.eps)
        param.addcdiv_(self.exp_avg, denom, value=-self.learning_rate / bias_correction1)

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "exp_avg": None if self.exp_avg is None else self.exp_avg.clone(),
            "exp_avg_sq": None if self.exp_avg_sq is None else self.exp_avg_sq.clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])
        self.exp_avg = None if state["exp_avg"] is None else state["exp_avg"].clone()
        self.exp_avg_sq = None if state["exp_avg_sq"] is None else state["exp_avg_sq"].clone()


class RMSprop:
    """RMSprop (Hinton), exactly as ``torch.optim.RMSprop`` computes it (no momentum)."""

    def __init__(self, learning_rate: float, alpha: float = 0.99, eps: float = 1e-8) -> None:
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.eps = eps
        self.square_avg: Tensor | None = None

    @torch.no_grad()
    def update(self, param: Tensor, grad: Tensor) -> None:
        if self.square_avg is None:
            self.square_avg = _state_like(param)
        self.square_avg.mul_(self.alpha).addcmul_(grad, grad, value=1.0 - self.alpha)
        avg = self.square_avg.sqrt().add_(self.eps)
        param.addcdiv_(grad, avg, value=-self.learning_rate)

    def state_dict(self) -> dict[str, Any]:
        return {"square_avg": None if self.square_avg is None else self.square_avg.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.square_avg = None if state["square_avg"] is None else state["square_avg"].clone()


class FlatOptimizer:
    """Optimise all of ``module``'s parameters, stored as views of one flat tensor.

    Do not reassign the module's parameters (``p.data = ...``) afterwards: that would
    detach them from the flat vector. ``module.load_state_dict`` copies in place and is
    fine.
    """

    def __init__(self, module: nn.Module, rule: UpdateRule) -> None:
        self.params = list(module.parameters())
        self.flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        # The gradient, laid out as ``flat``; ``grads`` are its views shaped as the
        # parameters, for a hand-written backward to write into (see apply_gradient).
        self.grad = torch.zeros_like(self.flat)
        self.grads: list[Tensor] = []
        offset = 0
        for p in self.params:
            p.data = self.flat[offset : offset + p.numel()].view_as(p)
            self.grads.append(self.grad[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
        self.rule = rule

    @property
    def learning_rate(self) -> float:
        return self.rule.learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self.rule.learning_rate = value

    def step(self, loss: Tensor, max_grad_norm: float) -> Tensor:
        """Minimise ``loss`` by one step, after clipping the global gradient norm.

        Same as ``zero_grad(); loss.backward(); clip_grad_norm_(params, max_grad_norm);
        step()``. Returns the gradient norm before clipping (a 0-d tensor).
        """
        grads = torch.autograd.grad(loss, self.params, allow_unused=True, materialize_grads=True)
        with torch.no_grad():
            torch.cat([g.reshape(-1) for g in grads], out=self.grad)
        return self.apply_gradient(max_grad_norm)

    @torch.no_grad()
    def apply_gradient(self, max_grad_norm: float) -> Tensor:
        """:meth:`step` from the gradient already in :attr:`grads` (written there by a
        hand-written backward): clip the global norm, update. Returns the norm."""
        norm = torch.linalg.vector_norm(self.grad)
        self.grad.mul_((max_grad_norm / (norm + 1e-6)).clamp_(max=1.0))
        self.rule.update(self.flat, self.grad)
        return norm

    def state_dict(self) -> dict[str, Any]:
        return self.rule.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rule.load_state_dict(state)
