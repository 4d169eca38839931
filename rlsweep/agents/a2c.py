"""Advantage Actor-Critic (synchronous A2C), Stable-Baselines3 semantics and defaults.

One gradient step (RMSprop) on each rollout of ``n_steps * n_envs`` transitions.
"""

from __future__ import annotations

import torch

from rlsweep.agents.base import AgentContext
from rlsweep.agents.configs import A2CConfig as Config
from rlsweep.agents.networks import ActorCritic, LossGradient
from rlsweep.agents.onpolicy import ACTION_SPACES, OnPolicyAgent, entropy_bonus_gradient
from rlsweep.agents.optim import FlatOptimizer, RMSprop
from rlsweep.agents.rollout import RolloutBatch

__all__ = ["ACTION_SPACES", "Config", "a2c_update", "build"]


# No autograd in the update (the gradient is written out: see ActorCritic.backward), and
# inference mode skips autograd's dispatch too: about 8 % of a gradient step.
@torch.inference_mode()
def a2c_update(
    model: ActorCritic,
    optimizer: FlatOptimizer,
    batch: RolloutBatch,
    config: Config,
    *_progress_and_rng: object,  # no clip range to schedule, no minibatches to draw
) -> dict[str, float]:
    """One gradient step on the whole rollout: policy gradient + value + entropy losses.

    The loss is ``-mean(A * log_prob) + vf_coef * mean((value - return)**2) - ent_coef *
    mean(entropy)``; its derivative with respect to each sample's log-probability, value
    and entropy is written beside it (what ``model.backward`` takes)."""
    advantages = batch.advantages
    if config.normalize_advantage and advantages.shape[0] > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    n = advantages.shape[0]

    out, values, tape = model.forward_for_update(batch.obs)
    pg_loss = -(advantages * model.log_prob(out, batch.actions)).mean()
    d_log_prob = advantages * (-1.0 / n)
    error = values - batch.returns
    value_loss = error.square().mean()
    d_value = error * (2.0 * config.vf_coef / n)
    entropy = model.entropy(out).mean()
    d_entropy = entropy_bonus_gradient(config.ent_coef, n)

    grad = LossGradient(d_log_prob, d_entropy, d_value)
    model.backward(tape, batch.actions, grad, into=optimizer.grads)
    optimizer.apply_gradient(config.max_grad_norm)

    losses = torch.stack([pg_loss, value_loss, entropy]).tolist()
    return {"policy_loss": losses[0], "value_loss": losses[1], "entropy": losses[2]}


def make_rmsprop(config: Config) -> RMSprop:
    """RMSprop as SB3's A2C (alpha 0.99, eps 1e-5); the learning rate is set per update."""
    return RMSprop(config.learning_rate, alpha=config.rms_prop_alpha, eps=config.rms_prop_eps)


def build(config: Config, context: AgentContext) -> OnPolicyAgent[Config]:
    """An A2C agent on the job's training vector env."""
    return OnPolicyAgent(config, context, a2c_update, make_rmsprop)
