"""Deep Q-Network (Mnih et al. 2015), Stable-Baselines3 semantics.

Defaults are rl-baselines3-zoo's CartPole-v1 hyperparameters. One ``train_iteration``
collects ``train_freq`` env steps with an epsilon-greedy policy into the replay buffer,
then (once ``learning_starts`` steps are stored) runs ``gradient_steps`` Huber-loss steps
on uniformly sampled minibatches against a target network.

Target updates follow SB3: every ``target_update_interval`` env steps of collection the
target moves towards the online network (``tau = 1``: a copy). The online network does
not change during collection, so applying the updates that fell due in a collection
phase right before the following gradient phase gives the same result.

With ``n_step > 1`` the TD targets use n-step returns (Sutton 1988; Rainbow's
multi-step targets): ``replay.NStepAccumulator`` stores each step with the discounted
sum of the next n rewards and the observation n steps later; as in Rainbow, the
exploratory actions inside those n steps are not corrected for. Gymnasium's NEXT_STEP
autoreset steps are not stored, and a time-limit truncation bootstraps (see ``replay``).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from typing import Any, TypeVar, cast

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rlsweep.agents.base import AgentContext, IterationInfo, load_progress, progress_state
from rlsweep.agents.configs import DQN_SPACES as ACTION_SPACES
from rlsweep.agents.configs import DQNConfig as Config
from rlsweep.agents.episodes import EpisodeReturns, check_vector_env
from rlsweep.agents.optim import Adam, ModuleOptimizer
from rlsweep.agents.replay import NStepAccumulator, ReplayBuffer

__all__ = ["ACTION_SPACES", "Config", "DQNAgent", "build", "dqn_update", "q_values"]


class QNetwork(nn.Module):
    """ReLU MLP from observations to one Q-value per action: its parameters, which
    training differentiates through autograd; the forward itself is :func:`q_values`.

    PyTorch's default ``nn.Linear`` init (Kaiming-uniform weights, uniform biases), as
    SB3's DQN uses, but drawn from ``generator`` instead of torch's global RNG. With
    ``dueling`` the last layer has one more output, the state value V, and the Q-values
    are ``V + A - mean(A)`` for the other outputs A (the advantages).
    """

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        hidden: Sequence[int],
        generator: torch.Generator,
        dueling: bool = False,
    ) -> None:
        super().__init__()
        self.dueling = dueling
        widths = [obs_dim, *hidden, n_actions + int(dueling)]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(widths))
        with torch.no_grad():
            for layer in cast("list[nn.Linear]", self.layers):
                nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
                bound = 1.0 / math.sqrt(layer.in_features)
                nn.init.uniform_(layer.bias, -bound, bound, generator=generator)

    def parameter_pairs(self) -> list[tuple[Tensor, Tensor]]:
        """``(weight, bias)`` of each layer, as torch tensors (autograd sees them)."""
        return [(layer.weight, layer.bias) for layer in cast("list[nn.Linear]", self.layers)]

    def array_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(weight, bias)`` of each layer as numpy views of the same memory (for acting)."""
        return [(w.detach().numpy(), b.detach().numpy()) for w, b in self.parameter_pairs()]

    def forward(self, x: Tensor) -> Tensor:
        return q_values(self.parameter_pairs(), x, self.dueling)


ArrayT = TypeVar("ArrayT", np.ndarray, Tensor)


def q_values(layers: Sequence[tuple[ArrayT, ArrayT]], obs: ArrayT, dueling: bool = False) -> ArrayT:
    """The Q-network's forward pass, the one definition: on torch tensors for training (the
    loss and the targets, through autograd), on numpy arrays for acting (a few
    observations at a time, where numpy's per-operation overhead is torch's fraction).

    ``layers`` are ``(weight (out, in), bias)`` pairs. Each backend computes a layer its
    own way: torch by ``F.linear`` (one fused multiply-add kernel), numpy by ``x @ weight.T
    + bias``; they agree to float32 rounding."""
    x = obs
    for weight, bias in layers[:-1]:
        x = _relu(_linear(x, weight, bias))
    out = _linear(x, *layers[-1])
    if not dueling:
        return out
    advantages, value = out[..., :-1], out[..., -1:]
    return value + advantages - _mean_last(advantages)


def _linear(x: ArrayT, weight: ArrayT, bias: ArrayT) -> ArrayT:
    if isinstance(x, Tensor):
        return F.linear(x, cast("Tensor", weight), cast("Tensor", bias))
    return cast("np.ndarray", x @ weight.T + bias)


def _relu(x: ArrayT) -> ArrayT:
    return torch.relu(x) if isinstance(x, Tensor) else np.maximum(x, 0.0)


def _mean_last(x: ArrayT) -> ArrayT:
    if isinstance(x, Tensor):
        return x.mean(-1, keepdim=True)
    return cast("np.ndarray", x.mean(-1, keepdims=True))


def dqn_update(
    q_net: QNetwork,
    target_net: QNetwork,
    optimizer: ModuleOptimizer,
    buffer: ReplayBuffer,
    config: Config,
    rng: np.random.Generator,
) -> dict[str, float]:
    """``gradient_steps`` Huber-loss steps on minibatches drawn uniformly from the buffer.

    The target network is fixed during the phase, so the TD targets of every minibatch
    are computed up front in one batched forward pass.
    """
    steps, batch_size = config.gradient_steps, config.batch_size
    idx = rng.integers(0, buffer.size, size=(steps, batch_size))
    data = buffer.sample(idx)
    with torch.no_grad():
        next_q = target_net(data.next_obs)
        if config.double_q:
            best = q_net(data.next_obs).argmax(-1, keepdim=True)
            next_value = next_q.gather(-1, best).squeeze(-1)
        else:
            next_value = next_q.max(-1).values
        targets = data.rewards + data.discounts * (1.0 - data.terminated) * next_value
    obs = data.obs.view(steps, batch_size, -1)
    actions = data.actions.view(steps, batch_size, 1)
    targets = targets.view(steps, batch_size)
    losses = torch.empty(steps)
    q_means = torch.empty(steps)
    for i in range(steps):
        q = q_net(obs[i]).gather(-1, actions[i]).squeeze(-1)
        loss = F.smooth_l1_loss(q, targets[i])
        optimizer.step(loss, config.max_grad_norm)
        losses[i] = loss.detach()
        q_means[i] = q.detach().mean()
    return {
        "loss": float(losses.mean()),
        "q_mean": float(q_means.mean()),
        "gradient_steps": float(steps),
    }


class DQNAgent:
    """Epsilon-greedy collection into a replay buffer, then the DQN update."""

    # Integer progress counters, saved in state_dict.
    COUNTERS = ("num_timesteps", "vector_steps", "iterations")

    def __init__(self, config: Config, context: AgentContext) -> None:
        envs = context.envs
        self.obs_dim = check_vector_env("dqn", envs, config.n_envs)
        action_space = envs.single_action_space
        if not isinstance(action_space, gym.spaces.Discrete) or int(action_space.start) != 0:
            raise ValueError(f"dqn supports Discrete actions starting at 0, got {action_space}")
        self.config = config
        self.envs = envs
        self.rng = context.rng
        self.total_steps = context.total_steps
        self.n_envs = config.n_envs
        self.n_actions = int(action_space.n)

        init = torch.Generator().manual_seed(int(self.rng.integers(2**63)))
        arch = (self.obs_dim, self.n_actions, config.net_arch, init, config.dueling)
        self.q_net = QNetwork(*arch)
        self.target_net = QNetwork(*arch)
        self.target_net.load_state_dict(self.q_net.state_dict())
        self.target_net.requires_grad_(False)
        self.optimizer = ModuleOptimizer(
            self.q_net, Adam(config.learning_rate, eps=config.adam_eps)
        )
        self.buffer = ReplayBuffer(config.buffer_size, self.obs_dim)
        self.accumulator = NStepAccumulator(config.n_step, config.gamma, self.n_envs, self.obs_dim)

        self.obs = np.asarray(context.first_obs, dtype=np.float32).reshape(self.n_envs, -1)
        self.episodes = EpisodeReturns(self.n_envs)
        self.num_timesteps = 0
        self.vector_steps = 0  # SB3's _n_calls: counts target-update opportunities
        self.iterations = 0

    def progress(self) -> float:
        """0 at the start of training, 1 once ``total_steps`` env steps are consumed."""
        return min(1.0, self.num_timesteps / self.total_steps) if self.total_steps > 0 else 0.0

    def exploration_rate(self) -> float:
        """SB3's linear schedule: initial eps to final eps over ``exploration_fraction``."""
        c = self.config
        progress = self.progress()
        if progress > c.exploration_fraction:
            return c.exploration_final_eps
        fraction = progress / c.exploration_fraction
        return c.exploration_initial_eps + fraction * (
            c.exploration_final_eps - c.exploration_initial_eps
        )

    def collect(self) -> list[float]:
        """``train_freq`` env steps of epsilon-greedy actions into the buffer."""
        layers = self.q_net.array_pairs()
        finished: list[float] = []
        for _ in range(self.config.train_freq // self.n_envs):
            # Always the same draws per step, whatever the branch: a fixed stream layout.
            explore = self.rng.random(self.n_envs)
            random_actions = self.rng.integers(0, self.n_actions, size=self.n_envs)
            epsilon = 1.0 if self.num_timesteps < self.config.learning_starts else None
            if epsilon is None:
                epsilon = self.exploration_rate()
            explore_mask = explore < epsilon
            if explore_mask.all():
                actions = random_actions
            else:
                greedy = q_values(layers, self.obs, self.config.dueling).argmax(-1)
                actions = np.where(explore_mask, random_actions, greedy)

            next_obs, rewards, terminated, truncated, _ = self.envs.step(actions)
            next_obs = np.asarray(next_obs, dtype=np.float32).reshape(self.n_envs, -1)
            valid = self.episodes.valid()
            self.buffer.add(
                self.accumulator.push(
                    self.obs, actions, rewards, next_obs, terminated, truncated, valid
                )
            )
            finished += self.episodes.step(rewards, terminated | truncated, valid)
            self.obs = next_obs
            self.num_timesteps += self.n_envs
            self.vector_steps += 1
        return finished

    def _update_target(self, n_updates: int) -> None:
        """``n_updates`` Polyak steps of the target towards the online network."""
        if n_updates <= 0:
            return
        with torch.no_grad():
            for target, online in zip(
                self.target_net.parameters(), self.q_net.parameters(), strict=True
            ):
                if self.config.tau == 1.0:
                    target.copy_(online)
                else:
                    keep = (1.0 - self.config.tau) ** n_updates
                    target.mul_(keep).add_(online, alpha=1.0 - keep)

    def train_iteration(self) -> IterationInfo:
        start = time.perf_counter()
        calls_before = self.vector_steps
        finished = self.collect()
        collected = time.perf_counter()

        interval = max(self.config.target_update_interval // self.n_envs, 1)
        self._update_target(self.vector_steps // interval - calls_before // interval)
        learning_rate = self.config.learning_rate
        if self.config.schedule == "linear":
            learning_rate *= 1.0 - self.progress()
        self.optimizer.learning_rate = learning_rate
        stats = {"exploration_rate": self.exploration_rate(), "learning_rate": learning_rate}
        if (
            self.num_timesteps > self.config.learning_starts
            and self.config.gradient_steps > 0
            and self.buffer.size > 0
        ):
            stats |= dqn_update(
                self.q_net, self.target_net, self.optimizer, self.buffer, self.config, self.rng
            )
        self.iterations += 1
        return IterationInfo(
            env_steps=self.config.train_freq,
            episode_returns=finished,
            collect_seconds=collected - start,
            train_seconds=time.perf_counter() - collected,
            stats=stats,
        )

    def act(self, obs: np.ndarray) -> np.ndarray:
        flat = np.asarray(obs, dtype=np.float32).reshape(obs.shape[0], self.obs_dim)
        return q_values(self.q_net.array_pairs(), flat, self.config.dueling).argmax(-1)

    def state_dict(self) -> dict[str, Any]:
        return {
            "q_net": {k: v.clone() for k, v in self.q_net.state_dict().items()},
            "target_net": {k: v.clone() for k, v in self.target_net.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            "buffer": self.buffer.state_dict(),
            "n_step": self.accumulator.state_dict(),
            "obs": self.obs.copy(),
            **self.episodes.state_dict(),
            **progress_state(self, self.rng, self.COUNTERS),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.q_net.load_state_dict(state["q_net"])
        self.target_net.load_state_dict(state["target_net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.buffer.load_state_dict(state["buffer"])
        self.accumulator.load_state_dict(state["n_step"])
        self.obs = np.array(state["obs"], dtype=np.float32)
        self.episodes.load_state_dict(state)
        load_progress(self, self.rng, self.COUNTERS, state)


def build(config: Config, context: AgentContext) -> DQNAgent:
    """A DQN agent on the job's training vector env."""
    return DQNAgent(config, context)
