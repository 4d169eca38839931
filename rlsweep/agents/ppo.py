"""Proximal Policy Optimization (clipped surrogate), Stable-Baselines3 semantics.

Defaults are rl-baselines3-zoo's CartPole-v1 hyperparameters.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from rlsweep.agents.base import AgentContext
from rlsweep.agents.configs import PPOConfig as Config
from rlsweep.agents.gradients import LossGradient, UpdateNetwork
from rlsweep.agents.onpolicy import (
    ACTION_SPACES,
    OnPolicyAgent,
    entropy_bonus_gradient,
    standardise,
)
from rlsweep.agents.optim import Adam, FlatOptimizer
from rlsweep.agents.rollout import RolloutBatch

__all__ = ["ACTION_SPACES", "Config", "build", "ppo_update"]


def ppo_update(
    network: UpdateNetwork,
    optimizer: FlatOptimizer,
    batch: RolloutBatch,
    config: Config,
    progress_remaining: float,
    rng: np.random.Generator,
) -> dict[str, float]:
    """``n_epochs`` passes of minibatch gradient steps on the clipped PPO objective."""
    clip_range = config.clip_range * (progress_remaining if config.schedule == "linear" else 1.0)
    n_minibatches = max(1, round(batch.obs.shape[0] / config.batch_size))
    whole_batch = [Minibatch.of(batch, config.normalize_advantage, clip_range)]
    losses: list[tuple[float, float]] = []  # (policy loss, value loss) per gradient step
    log_ratios: list[np.ndarray] = []  # per minibatch, including one that stopped early
    for _epoch in range(config.n_epochs):
        if n_minibatches == 1:
            minibatches = whole_batch  # same data every epoch: prepared once
        else:
            minibatches = shuffled_minibatches(batch, n_minibatches, config, clip_range, rng)
        for mb in minibatches:
            fwd = network.forward(mb.obs, mb.actions)
            log_ratio = fwd.evaluation.log_prob - mb.log_probs
            log_ratios.append(log_ratio)
            if kl_too_large(log_ratio, config.target_kl):
                return update_stats(network, batch, losses, log_ratios, clip_range)
            pg_loss, value_loss, grad = ppo_loss(mb, log_ratio, fwd.evaluation.value, config)
            network.backward(fwd, grad, into=optimizer.grads)
            optimizer.apply_gradient(config.max_grad_norm)
            losses.append((pg_loss, value_loss))
    return update_stats(network, batch, losses, log_ratios, clip_range)


def shuffled_minibatches(
    batch: RolloutBatch,
    n_minibatches: int,
    config: Config,
    clip_range: float,
    rng: np.random.Generator,
) -> list[Minibatch]:
    """One epoch's minibatches: the batch in a random order (from ``rng``), split in
    ``n_minibatches`` parts of (nearly) equal size."""
    parts = np.array_split(rng.permutation(batch.obs.shape[0]), n_minibatches)
    return [
        Minibatch.of(RolloutBatch(*(x[idx] for x in batch)), config.normalize_advantage, clip_range)
        for idx in parts
    ]


def ppo_loss(
    mb: Minibatch, log_ratio: np.ndarray, values: np.ndarray, config: Config
) -> tuple[float, float, LossGradient]:
    """``(policy loss, value loss, gradient)`` of one minibatch, given the log ratio of
    the new to the collecting policy's probabilities of its actions and the new values.
    The loss is ``policy loss + vf_coef * value loss - ent_coef * mean entropy``; the
    gradient is its derivative with respect to each sample's log-probability, entropy and
    value, written beside each term (what ``network.backward`` takes)."""
    n = log_ratio.shape[0]
    ratio = np.exp(log_ratio)
    # Clipped surrogate: min(r * A, clip(r, 1 - eps, 1 + eps) * A) = A * clamp(r, low, high).
    clipped = np.clip(ratio, mb.ratio_low, mb.ratio_high)
    pg_loss = -float(mb.advantages @ clipped) / n
    # d/d log_prob: -A * r / n where the clamp passed r through (d r / d log_prob = r), 0
    # where it clipped.
    d_log_prob = mb.advantages * ratio
    d_log_prob *= (clipped == ratio) * np.float32(-1.0 / n)

    # Value loss: the mean squared error, d/d value = 2 * error / n; with value clipping,
    # through the clamp (only where it passed the change through).
    if config.clip_range_vf is None:
        error = values - mb.returns
        d_value = error * np.float32(2.0 * config.vf_coef / n)
    else:
        change = values - mb.values
        clipped_change = np.clip(change, -config.clip_range_vf, config.clip_range_vf)
        error = mb.values + clipped_change - mb.returns
        d_value = error * np.float32(2.0 * config.vf_coef / n)
        d_value *= clipped_change == change
    value_loss = float(error @ error) / n

    d_entropy = entropy_bonus_gradient(config.ent_coef, n)
    return pg_loss, value_loss, LossGradient(d_log_prob, d_entropy, d_value)


def kl_too_large(log_ratio: np.ndarray, target_kl: float | None) -> bool:
    """Whether to stop the update before this minibatch's step: its approximate KL
    divergence exceeds ``1.5 * target_kl`` (never without a target)."""
    if target_kl is None:
        return False
    kl = float(((np.exp(log_ratio) - 1.0) - log_ratio).mean())
    return kl > 1.5 * target_kl


def update_stats(
    network: UpdateNetwork,
    batch: RolloutBatch,
    losses: list[tuple[float, float]],
    log_ratios: list[np.ndarray],
    clip_range: float,
) -> dict[str, float]:
    """Diagnostics over every minibatch of the update (SB3's definitions)."""
    log_ratio = np.concatenate(log_ratios)
    ratio = np.exp(log_ratio)
    loss_means = np.mean(losses, axis=0) if losses else np.full(2, math.nan)
    return {
        "policy_loss": float(loss_means[0]),
        "value_loss": float(loss_means[1]),
        "entropy": float(network.forward(batch.obs, batch.actions).evaluation.entropy.mean()),
        "approx_kl": float(((ratio - 1.0) - log_ratio).mean()),
        "clip_fraction": float((np.abs(ratio - 1.0) > clip_range).mean()),
        "clip_range": clip_range,
        "gradient_steps": float(len(losses)),
    }


class Minibatch(NamedTuple):
    """A minibatch ready for the PPO loss."""

    obs: np.ndarray
    actions: np.ndarray
    log_probs: np.ndarray  # under the collecting policy
    values: np.ndarray  # under the collecting policy
    advantages: np.ndarray  # standardised if configured
    returns: np.ndarray
    # Bounds of the probability ratio in the clipped surrogate. For A >= 0,
    # min(r * A, clip(r) * A) = A * min(r, 1 + eps); for A < 0 it is A * max(r, 1 - eps).
    # So clamp(r, low, high) with the other bound infinite gives the same value and
    # gradient as the two products and the min, for a third of the work.
    ratio_low: np.ndarray
    ratio_high: np.ndarray

    @classmethod
    def of(cls, batch: RolloutBatch, normalize_advantage: bool, clip_range: float) -> Minibatch:
        advantages = batch.advantages
        if normalize_advantage and advantages.shape[0] > 1:
            advantages = standardise(advantages)
        positive = advantages >= 0
        return cls(
            *batch[:4],
            advantages,
            batch.returns,
            ratio_low=np.where(positive, -np.inf, 1.0 - clip_range).astype(np.float32),
            ratio_high=np.where(positive, 1.0 + clip_range, np.inf).astype(np.float32),
        )


def make_adam(config: Config) -> Adam:
    """Adam with SB3's eps=1e-5; the learning rate is set before every update."""
    return Adam(config.learning_rate, eps=1e-5)


def build(config: Config, context: AgentContext) -> OnPolicyAgent[Config]:
    """A PPO agent on the job's training vector env."""
    return OnPolicyAgent(config, context, ppo_update, make_adam)
