"""On-policy experience: the rollout buffer, the collection loop and GAE.

Gymnasium 1.x vector envs autoreset in ``NEXT_STEP`` mode: when a sub-env reports
``terminated`` or ``truncated`` at step t, the observation it returns is the *final*
observation, and its step t+1 is a reset step that ignores the action and returns reward
0 with the first observation of the next episode. So

- the transition at such a reset step is not experience: it is marked invalid and left
  out of the loss, the advantage statistics and GAE;
- the value computed at the reset step is V(final observation), exactly what bootstrapping
  a time-limit truncation at step t needs: ``delta_t = r_t + gamma * V(s_{t+1}) *
  (1 - terminated_t) - V(s_t)``, and the GAE recursion stops at every done.

With gSDE (:class:`SDENoise`), each sub-env explores with its own noise matrix, sampled
at the start of every rollout and, if ``sample_freq > 0``, every ``sample_freq`` vector
steps of it (Stable-Baselines3's ``reset_noise`` schedule).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from rlsweep.agents.episodes import EpisodeReturns
from rlsweep.agents.networks import ActorCritic
from rlsweep.agents.normalize import (
    ObsNormalizer,
    RewardScaler,
    load_state,
    policy_input,
    state_of,
)
from rlsweep.agents.numpy_policy import NumpyPolicy


class RolloutBatch(NamedTuple):
    """The valid transitions of one rollout, flattened over (step, sub-env)."""

    obs: np.ndarray  # (batch, obs_dim) float32, normalised as the policy saw them
    actions: np.ndarray  # (batch,) int64 or (batch, action_dim) float32, unclipped
    log_probs: np.ndarray  # (batch,) log-probability under the collecting policy
    values: np.ndarray  # (batch,) V(obs) under the collecting policy
    advantages: np.ndarray  # (batch,) GAE(gamma, lambda)
    returns: np.ndarray  # (batch,) advantages + values: the value-function target


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    terminated: np.ndarray,
    dones: np.ndarray,
    valid: np.ndarray,
    last_value: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns for arrays of shape ``(n_steps, n_envs)``.

    ``values[t]`` is V(obs at step t); ``last_value`` is V(obs after the last step).
    ``dones = terminated | truncated``. Invalid (autoreset) slots get advantage 0 and
    return = value.
    """
    # The per-step factors for all steps at once (the same float32 operations, in the same
    # order, as inside the loop): only the recursion itself runs step by step.
    next_values = np.concatenate([values[1:], last_value[None]])
    deltas = rewards + gamma * next_values * ~terminated - values
    carry = gamma * gae_lambda * ~dones
    advantages = np.zeros_like(values)
    next_advantage = np.zeros_like(last_value)
    for t in range(rewards.shape[0] - 1, -1, -1):
        next_advantage = advantages[t] = (deltas[t] + carry[t] * next_advantage) * valid[t]
    return advantages, advantages + values


class RolloutBuffer:
    """Preallocated arrays for ``n_steps`` vector steps of ``n_envs`` sub-envs."""

    def __init__(
        self,
        n_steps: int,
        n_envs: int,
        obs_dim: int,
        action_shape: tuple[int, ...],
        action_dtype: type[np.generic],
    ) -> None:
        shape = (n_steps, n_envs)
        self.obs = np.zeros((*shape, obs_dim), dtype=np.float32)
        self.actions = np.zeros((*shape, *action_shape), dtype=action_dtype)
        self.log_probs = np.zeros(shape, dtype=np.float32)
        self.values = np.zeros(shape, dtype=np.float32)
        self.rewards = np.zeros(shape, dtype=np.float32)
        self.terminated = np.zeros(shape, dtype=bool)
        self.dones = np.zeros(shape, dtype=bool)
        self.valid = np.zeros(shape, dtype=bool)
        self.last_value = np.zeros(n_envs, dtype=np.float32)

    def batch(self, gamma: float, gae_lambda: float) -> RolloutBatch:
        """GAE over the stored rollout, then its valid transitions (copies)."""
        advantages, returns = compute_gae(
            self.rewards,
            self.values,
            self.terminated,
            self.dones,
            self.valid,
            self.last_value,
            gamma,
            gae_lambda,
        )
        keep = self.valid.reshape(-1)
        n_flat = keep.shape[0]

        def flat(array: np.ndarray) -> np.ndarray:
            return array.reshape(n_flat, *array.shape[2:])[keep]

        return RolloutBatch(
            obs=flat(self.obs),
            actions=flat(self.actions),
            log_probs=flat(self.log_probs),
            values=flat(self.values),
            advantages=flat(advantages),
            returns=flat(returns),
        )


class SDENoise:
    """The gSDE exploration matrices of the sub-envs, and the generator they come from.

    ``matrices[i]`` (shape ``(latent_dim, action_dim)``) turns sub-env i's policy latent
    into its exploration noise. Draws come from ``generator`` alone (the agent's own
    torch stream, never torch's global one), so they depend on nothing but its seed.
    """

    def __init__(
        self,
        n_envs: int,
        latent_dim: int,
        action_dim: int,
        sample_freq: int,
        generator: torch.Generator,
    ) -> None:
        self.sample_freq = sample_freq
        self.generator = generator
        self.matrices = torch.zeros((n_envs, latent_dim, action_dim))

    def resample(self, log_std: np.ndarray) -> None:
        """New matrices, every entry drawn from N(0, exp(log_std) of that entry)."""
        noise = torch.randn(self.matrices.shape, generator=self.generator)
        self.matrices = noise * torch.from_numpy(log_std).exp()

    def due(self, step: int) -> bool:
        """Whether to resample before vector step ``step`` (0-based) of a rollout."""
        return step == 0 or (self.sample_freq > 0 and step % self.sample_freq == 0)

    def state_dict(self) -> dict[str, Any]:
        return {"matrices": self.matrices.clone(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.matrices = state["matrices"].clone()
        self.generator.set_state(state["generator"])


class RolloutCollector:
    """Steps the training vector env with the current policy and fills the buffer.

    Owns the live state of the env stream between rollouts: the current raw observations,
    which sub-envs autoreset on their next step, the running raw episode returns, and the
    normalisation statistics. Actions are drawn from ``rng`` (the agent's numpy stream),
    or with gSDE (``sde``) are the mean plus the state-dependent noise.
    """

    def __init__(
        self,
        envs: gym.vector.VectorEnv,
        first_obs: np.ndarray,
        obs_dim: int,
        model: ActorCritic,
        n_steps: int,
        rng: np.random.Generator,
        obs_normalizer: ObsNormalizer | None,
        reward_scaler: RewardScaler | None,
        sde: SDENoise | None = None,
    ) -> None:
        self.envs = envs
        self.sde = sde
        self.model = model
        self.rng = rng
        self.obs_normalizer = obs_normalizer
        self.reward_scaler = reward_scaler
        self.n_envs = int(envs.num_envs)
        space = envs.single_action_space
        if isinstance(space, gym.spaces.Box):
            self.action_low: np.ndarray | None = np.asarray(space.low, dtype=np.float32)
            self.action_high: np.ndarray | None = np.asarray(space.high, dtype=np.float32)
            action_shape: tuple[int, ...] = tuple(space.shape)
            action_dtype: type[np.generic] = np.float32
        else:
            self.action_low = self.action_high = None
            action_shape, action_dtype = (), np.int64
        self.obs_dim = obs_dim
        self.policy = NumpyPolicy(model)
        self.buffer = RolloutBuffer(n_steps, self.n_envs, self.obs_dim, action_shape, action_dtype)
        self.obs = np.array(first_obs).reshape(self.n_envs, self.obs_dim)
        self.episodes = EpisodeReturns(self.n_envs)
        if obs_normalizer is not None:
            obs_normalizer.update(self.obs)

    def policy_obs(self, raw_obs: np.ndarray) -> np.ndarray:
        """Raw observations as the network sees them (float32, normalised if enabled)."""
        return policy_input(raw_obs, self.obs_dim, self.obs_normalizer)

    def collect(self) -> list[float]:
        """Fill the buffer with one rollout; return the raw returns of episodes that ended."""
        buf, rng, sde = self.buffer, self.rng, self.sde
        policy = self.policy
        policy.refresh()
        obs_normalizer, reward_scaler = self.obs_normalizer, self.reward_scaler
        low, high = self.action_low, self.action_high
        step = self.envs.step
        finished: list[float] = []
        exploration = np.empty(0, dtype=np.float32)  # gSDE: resampled at step 0
        for t in range(buf.obs.shape[0]):
            obs = buf.obs[t]
            obs[:] = self.policy_obs(self.obs)
            valid = self.episodes.valid()
            buf.valid[t] = valid
            if sde is None:
                actions, buf.log_probs[t], buf.values[t] = policy.sample(obs, rng)
            else:
                if sde.due(t):
                    assert self.model.log_std is not None
                    sde.resample(self.model.log_std)
                    exploration = sde.matrices.numpy()
                actions, buf.log_probs[t], buf.values[t] = policy.sample_sde(obs, exploration)
            buf.actions[t] = actions
            if low is not None and high is not None:
                actions = np.clip(actions, low, high)

            next_obs, rewards, terminated, truncated, _ = step(actions)

            dones = terminated | truncated
            finished += self.episodes.step(rewards, dones, valid)
            if reward_scaler is not None:
                rewards = reward_scaler(rewards, dones, valid)
            buf.rewards[t] = rewards
            buf.terminated[t] = terminated
            buf.dones[t] = dones
            self.obs = next_obs.reshape(self.n_envs, self.obs_dim)
            if obs_normalizer is not None:
                obs_normalizer.update(self.obs)
        buf.last_value[:] = policy.forward(self.policy_obs(self.obs))[1]
        return finished

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "obs": self.obs.copy(),
            **self.episodes.state_dict(),
            "obs_normalizer": state_of(self.obs_normalizer),
            "reward_scaler": state_of(self.reward_scaler),
        }
        if self.sde is not None:  # the key only exists with gSDE
            state["sde"] = self.sde.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.obs = np.array(state["obs"])
        self.episodes.load_state_dict(state)
        load_state(self.obs_normalizer, state["obs_normalizer"])
        load_state(self.reward_scaler, state["reward_scaler"])
        if self.sde is not None:
            self.sde.load_state_dict(state["sde"])
