"""Helpers of the discrete SAC app, in the shape of TorchRL's
sota-implementations/discrete_sac/utils.py (cut to what CartPole on CPU needs)."""

from __future__ import annotations

import functools
from typing import Any

import torch
from omegaconf import DictConfig
from tensordict.nn import InteractionType, TensorDictModule
from torch import nn, optim
from torchrl.collectors import Collector
from torchrl.data import Composite, LazyTensorStorage, TensorDictReplayBuffer
from torchrl.envs import (
    Compose,
    DoubleToFloat,
    EnvCreator,
    InitTracker,
    ParallelEnv,
    RewardSum,
    StepCounter,
    TransformedEnv,
)
from torchrl.envs.libs.gym import GymEnv, set_gym_backend
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import MLP, SafeModule
from torchrl.modules.distributions import OneHotCategorical
from torchrl.modules.tensordict_module.actors import ProbabilisticActor
from torchrl.objectives import SoftUpdate
from torchrl.objectives.sac import DiscreteSACLoss

# ====================================================================
# Environment utils
# -----------------


def env_maker(cfg: DictConfig, device: str = "cpu") -> GymEnv:
    lib = cfg.env.library
    if lib in ("gym", "gymnasium"):
        with set_gym_backend(lib):
            return GymEnv(cfg.env.name, device=device)
    raise NotImplementedError(f"Unknown lib {lib}.")


def apply_env_transforms(env: Any, max_episode_steps: int) -> TransformedEnv:
    return TransformedEnv(
        env,
        Compose(
            StepCounter(max_steps=max_episode_steps),
            InitTracker(),
            DoubleToFloat(),
            RewardSum(),
        ),
    )


def make_environment(cfg: DictConfig) -> tuple[TransformedEnv, TransformedEnv]:
    """Make environments for training and evaluation (the training one seeded from
    ``env.seed``, the evaluation one not: as the published app does)."""
    maker = functools.partial(env_maker, cfg)
    parallel_env = ParallelEnv(
        cfg.collector.env_per_collector, EnvCreator(maker), serial_for_single=True
    )
    parallel_env.set_seed(cfg.env.seed)
    train_env = apply_env_transforms(parallel_env, max_episode_steps=cfg.env.max_episode_steps)
    eval_env = TransformedEnv(
        ParallelEnv(cfg.collector.env_per_collector, EnvCreator(maker), serial_for_single=True),
        train_env.transform.clone(),
    )
    return train_env, eval_env


# ====================================================================
# Collector and replay buffer
# ---------------------------


def make_collector(cfg: DictConfig, train_env: Any, actor_model_explore: Any) -> Collector:
    collector = Collector(
        train_env,
        actor_model_explore,
        init_random_frames=cfg.collector.init_random_frames,
        frames_per_batch=cfg.collector.frames_per_batch,
        total_frames=cfg.collector.total_frames,
        reset_at_each_iter=cfg.collector.reset_at_each_iter,
        device=cfg.collector.device,
        storing_device="cpu",
    )
    collector.set_seed(cfg.env.seed)
    return collector


def make_replay_buffer(batch_size: int, buffer_size: int) -> TensorDictReplayBuffer:
    return TensorDictReplayBuffer(
        pin_memory=False,
        storage=LazyTensorStorage(buffer_size, device="cpu"),
        batch_size=batch_size,
    )


# ====================================================================
# Model
# -----


def make_sac_agent(cfg: DictConfig, train_env: Any, eval_env: Any) -> nn.ModuleList:
    """Make discrete SAC agent."""
    in_keys = ["observation"]
    action_spec = train_env.action_spec
    if train_env.batch_size:
        action_spec = action_spec[(0,) * len(train_env.batch_size)]
    net_kwargs = {
        "num_cells": list(cfg.network.hidden_sizes),
        "out_features": action_spec.shape[-1],
        "activation_class": get_activation(cfg),
    }
    actor_module = SafeModule(module=MLP(**net_kwargs), in_keys=in_keys, out_keys=["logits"])
    actor = ProbabilisticActor(
        spec=Composite(action=eval_env.action_spec),
        module=actor_module,
        in_keys=["logits"],
        out_keys=["action"],
        distribution_class=OneHotCategorical,
        distribution_kwargs={},
        default_interaction_type=InteractionType.RANDOM,
        return_log_prob=False,
    )
    qvalue = TensorDictModule(in_keys=in_keys, out_keys=["action_value"], module=MLP(**net_kwargs))
    model = torch.nn.ModuleList([actor, qvalue])
    # init nets
    with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
        td = eval_env.reset()
        for net in model:
            net(td)
    del td
    eval_env.close()
    return model


# ====================================================================
# Discrete SAC Loss
# -----------------


def make_loss_module(cfg: DictConfig, model: nn.ModuleList) -> tuple[DiscreteSACLoss, SoftUpdate]:
    """Make loss module and target network updater."""
    actor: Any = model[0]
    loss_module = DiscreteSACLoss(
        actor_network=actor,
        qvalue_network=model[1],
        num_actions=actor.spec["action"].space.n,
        num_qvalue_nets=2,
        loss_function=cfg.optim.loss_function,
        target_entropy_weight=cfg.optim.target_entropy_weight,
        delay_qvalue=True,
    )
    loss_module.make_value_estimator(gamma=cfg.optim.gamma)
    target_net_updater = SoftUpdate(loss_module, eps=cfg.optim.target_update_polyak)
    return loss_module, target_net_updater


def make_optimizer(
    cfg: DictConfig, loss_module: DiscreteSACLoss
) -> tuple[optim.Optimizer, optim.Optimizer, optim.Optimizer]:
    critic_params = list(loss_module.qvalue_network_params.flatten_keys().values())
    actor_params = list(loss_module.actor_network_params.flatten_keys().values())
    optimizer_actor = optim.Adam(actor_params, lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)
    optimizer_critic = optim.Adam(
        critic_params, lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay
    )
    optimizer_alpha = optim.Adam([loss_module.log_alpha], lr=3.0e-4)
    return optimizer_actor, optimizer_critic, optimizer_alpha


# ====================================================================
# General utils
# -------------


def log_metrics(logger: Any, metrics: dict[str, Any], step: int) -> None:
    logger.log_metrics(metrics, step)


def get_activation(cfg: DictConfig) -> type[nn.Module]:
    if cfg.network.activation == "relu":
        return nn.ReLU
    if cfg.network.activation == "tanh":
        return nn.Tanh
    if cfg.network.activation == "leaky_relu":
        return nn.LeakyReLU
    raise NotImplementedError
