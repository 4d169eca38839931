"""Experience replay: the ring buffer and the n-step return accumulator in front of it.

A stored transition is ``(obs, action, reward, next_obs, terminated, discount)``. The TD
target is ``reward + discount * (1 - terminated) * max_a Q'(next_obs, a)``: for one-step
returns ``reward`` is one step's reward and ``discount`` is gamma; for n-step returns
``reward`` sums up to n discounted rewards and ``discount`` is gamma to the number of
steps summed, fewer than n where the episode ended first.

Gymnasium's NEXT_STEP autoreset: the step after a done is a reset step whose transition
is not experience; the caller marks it invalid and it is never stored. A time-limit
truncation keeps ``terminated`` at 0, so the target bootstraps from the final observation.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

__all__ = ["NStepAccumulator", "ReplayBatch", "ReplayBuffer", "Transitions"]


class ReplayBatch(NamedTuple):
    """A minibatch of transitions as torch tensors."""

    obs: Tensor  # (batch, obs_dim) float32
    actions: Tensor  # (batch,) int64
    rewards: Tensor  # (batch,) float32: the (discounted sum of the) rewards
    next_obs: Tensor  # (batch, obs_dim) float32: the final observation after a done
    terminated: Tensor  # (batch,) float32, 1 where the episode ended (no bootstrap)
    discounts: Tensor  # (batch,) float32: gamma ** (steps summed into the reward)


class Transitions(NamedTuple):
    """Transitions to store, first axis the transition (numpy arrays)."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    discounts: np.ndarray


class ReplayBuffer:
    """A preallocated ring buffer of transitions (numpy arrays)."""

    FIELDS = Transitions._fields  # one array per field, the same names in ReplayBatch

    def __init__(self, capacity: int, obs_dim: int) -> None:
        self.capacity = capacity
        self.obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=np.float32)
        self.discounts = np.zeros(capacity, dtype=np.float32)
        self.pos = 0
        self.size = 0

    def add(self, batch: Transitions) -> None:
        """Append a batch of transitions, overwriting the oldest when full."""
        n = batch.obs.shape[0]
        if n == 0:
            return
        idx = (self.pos + np.arange(n)) % self.capacity
        for key, values in zip(self.FIELDS, batch, strict=True):
            getattr(self, key)[idx] = values
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, idx: np.ndarray) -> ReplayBatch:
        """The transitions at ``idx`` (any shape of indices below ``size``), flattened."""
        flat = idx.reshape(-1)
        return ReplayBatch(*(torch.from_numpy(getattr(self, key)[flat]) for key in self.FIELDS))

    def state_dict(self) -> dict[str, Any]:
        n = self.size
        state: dict[str, Any] = {key: getattr(self, key)[:n].copy() for key in self.FIELDS}
        return state | {"pos": self.pos, "size": self.size}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        n = int(state["size"])
        for key in self.FIELDS:
            getattr(self, key)[:n] = state[key]
        self.pos, self.size = int(state["pos"]), n


# The accumulator's state: its arrays of pending steps.
_PENDING_ARRAYS = ("obs", "actions", "rewards", "pending")


class NStepAccumulator:
    """Turns each vector step into the transitions ready to store, with n-step returns.

    ``n = 1`` stores every valid step as it comes (discount gamma). For ``n > 1`` each
    sub-env keeps its last steps until n of them are pending, then emits the oldest with
    the discounted sum of the n rewards and the newest next observation; at the end of an
    episode it emits every pending step, each summing the rewards up to that end.
    Transitions come out in step order, sub-env by sub-env within a step.
    """

    def __init__(self, n: int, gamma: float, n_envs: int, obs_dim: int) -> None:
        self.n = n
        self.gamma = gamma
        self.powers = gamma ** np.arange(n + 1)  # float64: gamma**0 .. gamma**n
        self.obs = np.zeros((n_envs, n, obs_dim), dtype=np.float32)
        self.actions = np.zeros((n_envs, n), dtype=np.int64)
        self.rewards = np.zeros((n_envs, n), dtype=np.float64)
        self.pending = np.zeros(n_envs, dtype=np.int64)

    def push(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        valid: np.ndarray,
    ) -> Transitions:
        """One vector step (first axis the sub-env); ``valid`` is False on reset steps."""
        if self.n == 1:
            n_valid = int(valid.sum())
            return Transitions(
                obs[valid],
                actions[valid],
                rewards[valid],
                next_obs[valid],
                terminated[valid],
                np.full(n_valid, self.gamma, dtype=np.float32),
            )
        parts: list[Transitions] = []
        for env in np.flatnonzero(valid).tolist():
            k = int(self.pending[env])
            self.obs[env, k] = obs[env]
            self.actions[env, k] = actions[env]
            self.rewards[env, k] = rewards[env]
            k += 1
            if terminated[env] or truncated[env]:
                parts.append(self._emit(env, k, k, next_obs[env], bool(terminated[env])))
                self.pending[env] = 0
            elif k == self.n:
                parts.append(self._emit(env, 1, k, next_obs[env], False))
                self._shift(env)
                self.pending[env] = k - 1
            else:
                self.pending[env] = k
        if not parts:
            return self._emit(0, 0, 0, next_obs[0], False)
        return Transitions(*(np.concatenate(column) for column in zip(*parts, strict=True)))

    def _emit(
        self, env: int, count: int, k: int, next_obs: np.ndarray, terminated: bool
    ) -> Transitions:
        """The first ``count`` of the ``k`` pending steps of ``env``, bootstrapping from
        ``next_obs``: step j sums rewards j .. k-1 and discounts by gamma ** (k - j)."""
        rewards = self.rewards[env, :k]
        returns = [float(rewards[j:] @ self.powers[: k - j]) for j in range(count)]
        steps = k - np.arange(count)
        return Transitions(
            self.obs[env, :count].copy(),
            self.actions[env, :count].copy(),
            np.asarray(returns, dtype=np.float32),
            np.repeat(next_obs[None].astype(np.float32), count, axis=0),
            np.full(count, float(terminated), dtype=np.float32),
            self.powers[steps].astype(np.float32),
        )

    def _shift(self, env: int) -> None:
        """Drop the oldest pending step of ``env``."""
        for array in (self.obs, self.actions, self.rewards):
            array[env, :-1] = array[env, 1:].copy()

    def state_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key).copy() for key in _PENDING_ARRAYS}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in _PENDING_ARRAYS:
            getattr(self, key)[...] = state[key]
