"""Advantage Actor-Critic (synchronous A2C), Stable-Baselines3 semantics and defaults.

One gradient step (RMSprop) on each rollout of ``n_steps * n_envs`` transitions.
"""

from __future__ import annotations

import numpy as np

from rlsweep.agents.base import AgentContext
from rlsweep.agents.configs import A2CConfig as Config
from rlsweep.agents.gradients import LossGradient, UpdateNetwork
from rlsweep.agents.onpolicy import (
    ACTION_SPACES,
    OnPolicyAgent,
    entropy_bonus_gradient,
    standardise,
)
from rlsweep.agents.optim import FlatOptimizer, RMSprop
from rlsweep.agents.rollout import RolloutBatch

__all__ = ["ACTION_SPACES", "Config", "a2c_update", "build"]


def a2c_update(
    network: UpdateNetwork,
    optimizer: FlatOptimizer,
    batch: RolloutBatch,
    config: Config,
    *_progress_and_rng: object,  # no clip range to schedule, no minibatches to draw
) -> dict[str, float]:
    """One gradient step on the whole rollout: policy gradient + value + entropy losses.

    The loss is ``-mean(A * log_prob) + vf_coef * mean((value - return)**2) - ent_coef *
    mean(entropy)``; its derivative with respect to each sample's log-probability, value
    and entropy is written beside it (what ``network.backward`` takes)."""
    advantages = batch.advantages
    if config.normalize_advantage and advantages.shape[0] > 1:
        advantages = standardise(advantages)
    n = advantages.shape[0]

    fwd = network.forward(batch.obs, batch.actions)
    log_prob, entropy, values = fwd.evaluation
    # Means as np.add.reduce(x) / n: ndarray.mean's value, without its Python layer.
    pg_loss = -(np.add.reduce(advantages * log_prob) / n)
    d_log_prob = advantages * np.float32(-1.0 / n)
    error = values - batch.returns
    value_loss = np.add.reduce(error * error) / n
    d_value = error * np.float32(2.0 * config.vf_coef / n)
    d_entropy = entropy_bonus_gradient(config.ent_coef, n)

    network.backward(fwd, LossGradient(d_log_prob, d_entropy, d_value), into=optimizer.grads)
    optimizer.apply_gradient(config.max_grad_norm)
    return {
        "policy_loss": float(pg_loss),
        "value_loss": float(value_loss),
        "entropy": float(np.add.reduce(entropy) / n),
    }


def make_rmsprop(config: Config) -> RMSprop:
    """RMSprop as SB3's A2C (alpha 0.99, eps 1e-5); the learning rate is set per update."""
    return RMSprop(config.learning_rate, alpha=config.rms_prop_alpha, eps=config.rms_prop_eps)


def build(config: Config, context: AgentContext) -> OnPolicyAgent[Config]:
    """An A2C agent on the job's training vector env."""
    return OnPolicyAgent(config, context, a2c_update, make_rmsprop)
