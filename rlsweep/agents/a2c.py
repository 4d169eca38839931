"""Advantage Actor-Critic (synchronous A2C), Stable-Baselines3 semantics and defaults.

One gradient step (RMSprop) on each rollout of ``n_steps * n_envs`` transitions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlsweep.agents.base import AgentContext
from rlsweep.agents.configs import A2CConfig as Config
from rlsweep.agents.networks import ActorCritic
from rlsweep.agents.onpolicy import ACTION_SPACES, OnPolicyAgent
from rlsweep.agents.optim import FlatOptimizer, RMSprop
from rlsweep.agents.rollout import RolloutBatch

__all__ = ["ACTION_SPACES", "Config", "a2c_update", "build"]


def a2c_update(
    model: ActorCritic,
    optimizer: FlatOptimizer,
    batch: RolloutBatch,
    config: Config,
    *_progress_and_rng: object,  # no clip range to schedule, no minibatches to draw
) -> dict[str, float]:
    """One gradient step on the whole rollout: policy gradient + value + entropy losses."""
    advantages = batch.advantages
    if config.normalize_advantage and advantages.shape[0] > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

    out, values, tape = model.forward_for_update(batch.obs)
    pg_loss = -(advantages * model.log_prob(out, batch.actions)).mean()
    value_loss = F.mse_loss(values, batch.returns)
    entropy = model.entropy(out).mean()
    loss = pg_loss + config.vf_coef * value_loss
    if config.ent_coef != 0.0:
        loss = loss - config.ent_coef * entropy

    optimizer.apply_gradient(model.backward(loss, tape), config.max_grad_norm)

    losses = torch.stack([pg_loss, value_loss, entropy]).detach().tolist()
    return {"policy_loss": losses[0], "value_loss": losses[1], "entropy": losses[2]}


def make_rmsprop(config: Config) -> RMSprop:
    """RMSprop as SB3's A2C (alpha 0.99, eps 1e-5); the learning rate is set per update."""
    return RMSprop(config.learning_rate, alpha=config.rms_prop_alpha, eps=config.rms_prop_eps)


def build(config: Config, context: AgentContext) -> OnPolicyAgent[Config]:
    """An A2C agent on the job's training vector env."""
    return OnPolicyAgent(config, context, a2c_update, make_rmsprop)
