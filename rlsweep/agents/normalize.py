"""Running statistics for observation normalisation and reward scaling.

Same semantics as Stable-Baselines3's ``VecNormalize``: observations are standardised by
their running mean and variance and clipped to ``[-10, 10]``; rewards are divided by the
running standard deviation of the discounted return (not shifted) and clipped. All
statistics are float64 and merged with the parallel (Chan et al.) update.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class RunningMeanStd:
    """Running mean and variance of a stream of batches, element-wise over ``shape``."""

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4) -> None:
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = float(epsilon)

    def update(self, batch: np.ndarray) -> None:
        """Merge a batch of samples (first axis = samples)."""
        if batch.shape[0] == 0:
            return
        batch = np.asarray(batch, dtype=np.float64)
        self.update_from_moments(batch.mean(axis=0), batch.var(axis=0), batch.shape[0])

    def update_from_moments(
        self, batch_mean: np.ndarray, batch_var: np.ndarray, batch_count: int
    ) -> None:
        """Parallel merge of (mean, var, count) into the running statistics."""
        total = self.count + batch_count
        delta = batch_mean - self.mean
        m2 = (
            self.var * self.count
            + batch_var * batch_count
            + delta * delta * (self.count * batch_count / total)
        )
        self.mean = self.mean + delta * (batch_count / total)
        self.var = m2 / total
        self.count = total

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # ``[()]``: statistics of shape () are numpy scalars, as updates leave them, so the
        # restored state is the saved one to the type (and to its fingerprint).
        self.mean = np.array(state["mean"], dtype=np.float64)[()]
        self.var = np.array(state["var"], dtype=np.float64)[()]
        self.count = float(state["count"])


class ObsNormalizer:
    """Standardise observations with running statistics, then clip."""

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, epsilon: float = 1e-8) -> None:
        self.rms = RunningMeanStd(shape)
        self.clip = clip
        self.epsilon = epsilon

    def update(self, obs: np.ndarray) -> None:
        """Add a batch of raw observations to the statistics."""
        self.rms.update(obs)

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """Normalised float32 copy of a batch of raw observations (statistics untouched)."""
        scaled = (obs - self.rms.mean) / np.sqrt(self.rms.var + self.epsilon)
        return np.clip(scaled, -self.clip, self.clip).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        return self.rms.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rms.load_state_dict(state)


class RewardScaler:
    """Divide rewards by the running std of each sub-env's discounted return, then clip."""

    def __init__(
        self, n_envs: int, gamma: float, clip: float = 10.0, epsilon: float = 1e-8
    ) -> None:
        self.rms = RunningMeanStd(())
        self.returns = np.zeros(n_envs, dtype=np.float64)
        self.gamma = gamma
        self.clip = clip
        self.epsilon = epsilon

    def __call__(self, rewards: np.ndarray, dones: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """Scale one vector step of rewards.

        ``dones`` (terminated or truncated) restart the discounted returns; ``valid`` is
        False for autoreset slots, which are left out of the statistics.
        """
        self.returns = self.returns * self.gamma + rewards
        self.rms.update(self.returns[valid])
        scaled = np.clip(rewards / np.sqrt(self.rms.var + self.epsilon), -self.clip, self.clip)
        self.returns[dones] = 0.0
        return scaled

    def state_dict(self) -> dict[str, Any]:
        return {"rms": self.rms.state_dict(), "returns": self.returns.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rms.load_state_dict(state["rms"])
        self.returns = np.array(state["returns"], dtype=np.float64)


def policy_input(raw_obs: np.ndarray, obs_dim: int, normalizer: ObsNormalizer | None) -> np.ndarray:
    """A batch of raw observations as a policy takes them: flat float32 rows of
    ``obs_dim`` features, normalised (statistics untouched) if ``normalizer`` is given."""
    flat = np.asarray(raw_obs).reshape(raw_obs.shape[0], obs_dim)
    if normalizer is None:
        return flat.astype(np.float32, copy=False)
    return normalizer.normalize(flat)


def state_of(statistics: ObsNormalizer | RewardScaler | None) -> dict[str, Any] | None:
    """The state of optional running statistics (None when they are off)."""
    return None if statistics is None else statistics.state_dict()


def load_state(statistics: ObsNormalizer | RewardScaler | None, state: Any) -> None:
    """Restore what :func:`state_of` returned (nothing when the statistics are off)."""
    if statistics is not None:
        statistics.load_state_dict(state)
