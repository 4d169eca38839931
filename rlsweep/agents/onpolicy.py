"""What PPO and A2C share: their common config fields and the agent loop around an update.

:class:`OnPolicyAgent` implements the :class:`~rlsweep.agents.base.Agent` protocol once;
an algorithm plugs in its optimiser and its update function (one gradient phase over one
rollout), so ``ppo.py`` and ``a2c.py`` hold only what differs.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import gymnasium as gym
import numpy as np
import torch

from rlsweep.agents.base import AgentContext, IterationInfo, load_progress, progress_state
from rlsweep.agents.configs import (
    ON_POLICY_SPACES as ACTION_SPACES,
)
from rlsweep.agents.configs import SCHEDULES, OnPolicyConfig  # noqa: F401
from rlsweep.agents.episodes import check_vector_env
from rlsweep.agents.gradients import UpdateNetwork
from rlsweep.agents.networks import ActorCritic
from rlsweep.agents.normalize import ObsNormalizer, RewardScaler
from rlsweep.agents.optim import FlatOptimizer, UpdateRule
from rlsweep.agents.rollout import RolloutBatch, RolloutCollector, SDENoise

ConfigT = TypeVar("ConfigT", bound=OnPolicyConfig)

# (network, optimizer, batch, config, progress_remaining, rng) -> stats of the update.
# progress_remaining goes from 1 (start of training) to 0 (budget used up).
UpdateFn = Callable[
    [UpdateNetwork, FlatOptimizer, RolloutBatch, ConfigT, float, np.random.Generator],
    dict[str, float],
]
# config -> the optimiser's update rule (its learning rate is set before each update).
OptimizerFactory = Callable[[ConfigT], UpdateRule]


class OnPolicyAgent(Generic[ConfigT]):
    """Collect one rollout, then run the algorithm's update on it."""

    # Integer progress counters, saved in state_dict.
    COUNTERS = ("num_timesteps", "iterations")

    def __init__(
        self,
        config: ConfigT,
        context: AgentContext,
        update: UpdateFn[ConfigT],
        make_optimizer: OptimizerFactory[ConfigT],
    ) -> None:
        envs = context.envs
        obs_dim = check_vector_env(config.name, envs, config.n_envs)
        action_dim, discrete = _action_space(config, envs.single_action_space)

        self.config = config
        self.update = update
        self.rng = context.rng
        self.total_steps = context.total_steps
        self.num_timesteps = 0
        self.iterations = 0

        # Network initialisation draws from a private generator seeded from the agent's
        # stream: nothing the agent does depends on torch's process-global RNG.
        init = torch.Generator().manual_seed(int(self.rng.integers(2**63)))
        self.model = ActorCritic(
            obs_dim,
            action_dim,
            discrete,
            log_std_init=config.log_std_init,
            generator=init,
            use_sde=config.use_sde,
        )
        self.optimizer = FlatOptimizer(self.model.flat, self.model.shapes, make_optimizer(config))
        # The update's forward and backward, on the network's own parameters.
        self.network = UpdateNetwork(self.model)
        sde = None
        if config.use_sde:
            # The noise matrices come from a torch generator of their own, seeded from
            # the agent's stream (drawn only with gSDE: without it nothing is taken from it).
            noise = torch.Generator().manual_seed(int(self.rng.integers(2**63)))
            sde = SDENoise(
                config.n_envs, self.model.latent_dim, action_dim, config.sde_sample_freq, noise
            )

        self.collector = RolloutCollector(
            envs,
            context.first_obs,
            obs_dim,
            self.model,
            config.n_steps,
            self.rng,
            ObsNormalizer((obs_dim,)) if config.normalize_obs else None,
            RewardScaler(config.n_envs, config.gamma) if config.normalize_reward else None,
            sde,
        )

    def progress_remaining(self) -> float:
        """1 at the start of training, 0 once ``total_steps`` env steps are consumed."""
        if self.total_steps <= 0:
            return 1.0
        return max(0.0, 1.0 - self.num_timesteps / self.total_steps)

    def train_iteration(self) -> IterationInfo:
        start = time.perf_counter()
        episode_returns = self.collector.collect()
        collected = time.perf_counter()

        env_steps = self.config.n_steps * self.config.n_envs
        self.num_timesteps += env_steps
        self.iterations += 1
        progress = self.progress_remaining()
        learning_rate = self.config.learning_rate * (
            progress if self.config.schedule == "linear" else 1.0
        )
        self.optimizer.learning_rate = learning_rate
        batch = self.collector.buffer.batch(self.config.gamma, self.config.gae_lambda)
        stats = self.update(self.network, self.optimizer, batch, self.config, progress, self.rng)
        stats["learning_rate"] = learning_rate
        stats["explained_variance"] = explained_variance(batch.values, batch.returns)
        return IterationInfo(
            env_steps=env_steps,
            episode_returns=episode_returns,
            collect_seconds=collected - start,
            train_seconds=time.perf_counter() - collected,
            stats=stats,
        )

    def act(self, obs: np.ndarray) -> np.ndarray:
        policy = self.collector.policy
        policy.refresh()
        actions = policy.deterministic_action(self.collector.policy_obs(np.asarray(obs)))
        low, high = self.collector.action_low, self.collector.action_high
        if low is not None and high is not None:
            actions = np.clip(actions, low, high)
        return actions

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": {k: v.clone() for k, v in self.model.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            "collector": self.collector.state_dict(),
            **progress_state(self, self.rng, self.COUNTERS),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.collector.load_state_dict(state["collector"])
        load_progress(self, self.rng, self.COUNTERS, state)


def _action_space(config: OnPolicyConfig, action_space: gym.Space[Any]) -> tuple[int, bool]:
    """``(action_dim, discrete)`` of the env's actions; ValueError for what is unsupported."""
    if isinstance(action_space, gym.spaces.Discrete) and int(action_space.start) == 0:
        if config.use_sde:
            raise ValueError(
                f"use_sde (gSDE) needs continuous (Box) actions; {config.name} got "
                f"{action_space}: set use_sde=false"
            )
        return int(action_space.n), True
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return int(action_space.shape[0]), False
    raise ValueError(
        f"{config.name} supports Discrete (starting at 0) and 1-D Box action spaces "
        f"({' and '.join(sorted(ACTION_SPACES))}), got {action_space}"
    )


def standardise(advantages: np.ndarray) -> np.ndarray:
    """``(a - a.mean()) / (a.std(ddof=1) + 1e-8)`` (SB3's advantage normalisation), bit for
    bit, in a third of the numpy calls: ``std`` goes through numpy's Python-level
    ``_var``, which computes the mean and the deviations again: several times this function's
    cost at A2C's 40 samples (bench/step.py times the A2C update)."""
    n = advantages.shape[0]
    centred = advantages - np.add.reduce(advantages) / n
    variance = np.add.reduce(centred * centred) / (n - 1)
    return centred / (np.sqrt(variance) + 1e-8)


@functools.lru_cache(maxsize=16)
def entropy_bonus_gradient(ent_coef: float, n: int) -> np.ndarray | None:
    """d loss / d each sample's entropy for the loss term ``-ent_coef * mean(entropy)``
    over ``n`` samples: the same for every sample (None when there is no such term).
    Made once per ``(ent_coef, n)``, read-only."""
    if ent_coef == 0.0:
        return None
    gradient = np.full(n, -ent_coef / n, dtype=np.float32)
    gradient.flags.writeable = False
    return gradient


def explained_variance(values: np.ndarray, returns: np.ndarray) -> float:
    """1 - Var[returns - values] / Var[returns] (nan when the returns are constant)."""
    var_returns = float(returns.var()) if returns.size else 0.0
    if var_returns == 0.0:
        return float("nan")
    return 1.0 - float((returns - values).var()) / var_returns
