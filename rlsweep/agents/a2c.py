"""Advantage Actor-Critic (synchronous A2C), Stable-Baselines3 semantics and defaults.

One gradient step (RMSprop) on each rollout of ``n_steps * n_envs`` transitions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlsweep.agents.base import AgentContext
from rlsweep.agents.configs import A2CConfig as Config
from rlsweep.agents.networks import (
    ActorCritic,
    Tape,
    categorical_log_prob_grad,
    mse_loss_grad,
    neg_mean_product_grad,
)
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
    if model.discrete and config.ent_coef == 0.0:
        output_grads, *losses, tape = categorical_a2c_grads(model, batch, advantages, config)
    else:
        loss, *losses, tape = a2c_loss(model, batch, advantages, config)
        output_grads = list(tape.grads_of(loss))
    optimizer.apply_gradient(model.backward(output_grads, tape), config.max_grad_norm)

    stats = torch.stack(losses).detach().tolist()
    return {"policy_loss": stats[0], "value_loss": stats[1], "entropy": stats[2]}


def a2c_loss(
    model: ActorCritic, batch: RolloutBatch, advantages: torch.Tensor, config: Config
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, Tape]:
    """``(loss, policy loss, value loss, entropy, tape for model.backward)``."""
    out, values, tape = model.forward_for_update(batch.obs)
    pg_loss = -(advantages * model.log_prob(out, batch.actions)).mean()
    value_loss = F.mse_loss(values, batch.returns)
    entropy = model.entropy(out).mean()
    loss = pg_loss + config.vf_coef * value_loss
    if config.ent_coef != 0.0:
        loss = loss - config.ent_coef * entropy
    return loss, pg_loss, value_loss, entropy, tape


@torch.no_grad()
def categorical_a2c_grads(
    model: ActorCritic, batch: RolloutBatch, advantages: torch.Tensor, config: Config
) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor, Tape]:
    """``(d loss / d tape.leaves, policy loss, value loss, entropy, tape)`` of
    :func:`a2c_loss` for a categorical policy without entropy bonus, written out: the
    operations autograd runs backward from ``loss = 1``, so its gradients bit for bit (a
    test checks) for a fraction of its bookkeeping."""
    logits, values, tape = model.forward_for_update(batch.obs)
    log_p = torch.log_softmax(logits, -1)
    log_prob = log_p.gather(-1, batch.actions.unsqueeze(-1)).squeeze(-1)
    pg_loss = -(advantages * log_prob).mean()
    value_loss = F.mse_loss(values, batch.returns)
    entropy = model.entropy(logits).mean()

    d_log_prob = neg_mean_product_grad(advantages)
    d_logits = categorical_log_prob_grad(d_log_prob, log_p, batch.actions)
    d_values = mse_loss_grad(config.vf_coef, values, batch.returns)
    return [d_logits, d_values.unsqueeze(-1)], pg_loss, value_loss, entropy, tape


def make_rmsprop(config: Config) -> RMSprop:
    """RMSprop as SB3's A2C (alpha 0.99, eps 1e-5); the learning rate is set per update."""
    return RMSprop(config.learning_rate, alpha=config.rms_prop_alpha, eps=config.rms_prop_eps)


def build(config: Config, context: AgentContext) -> OnPolicyAgent[Config]:
    """An A2C agent on the job's training vector env."""
    return OnPolicyAgent(config, context, a2c_update, make_rmsprop)
