"""An OpenAI-style evolution strategy (Salimans et al. 2017): neuroevolution of a policy.

Each generation (one ``train_iteration``):

1. *generate*: draw ``n_envs / 2`` Gaussian directions ``eps_j`` and form the antithetic
   population ``theta + sigma * eps_j`` and ``theta - sigma * eps_j`` (``n_envs`` members);
2. *test*: every member plays one episode in its own sub-env of the training vector env,
   all members stepping together; each step is one batched forward pass of all members'
   parameters (a batched matmul per layer). Both members of a pair start from the same
   reset seed, so their difference in return is down to their parameters;
3. *select*: returns are replaced by centred ranks in [-0.5, 0.5] (fitness shaping), and
   the mean moves along ``g = sum_j (u(+eps_j) - u(-eps_j)) eps_j / (n_envs * sigma)``
   with Adam (plus L2 weight decay).

The generation lasts until every member's episode has ended; env steps are counted for
every sub-env at every vector step, so members that finished early still cost their
idle steps. Observations are standardised with running statistics that stay fixed
within a generation (so members are compared under the same normalisation) and are
updated with the generation's observations afterwards; they are saved with the agent.

The training returns an iteration reports are the members' returns (one per member).

Policies are deterministic: the argmax of the logits for discrete actions, and
``tanh`` of the output scaled to the action bounds for continuous ones. Exploration
comes from the parameter noise, drawn from ``context.rng``.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlsweep.agents.base import AgentContext, IterationInfo, load_progress, progress_state
from rlsweep.agents.configs import ES_SPACES as ACTION_SPACES
from rlsweep.agents.configs import ESConfig as Config
from rlsweep.agents.episodes import check_vector_env
from rlsweep.agents.networks import init_mlp
from rlsweep.agents.normalize import ObsNormalizer, load_state, policy_input, state_of
from rlsweep.agents.optim import Adam

__all__ = ["ACTION_SPACES", "Config", "ESAgent", "build", "centered_ranks", "es_update"]


def centered_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks of ``values`` mapped linearly onto [-0.5, 0.5] (ties broken by position)."""
    n = values.shape[0]
    ranks = np.empty(n, dtype=np.float64)
    ranks[np.argsort(values, kind="stable")] = np.arange(n, dtype=np.float64)
    return ranks / max(n - 1, 1) - 0.5


def es_update(
    theta: torch.Tensor,
    optimizer: Adam,
    noise: np.ndarray,
    returns: np.ndarray,
    config: Config,
) -> dict[str, float]:
    """One step of the mean from the antithetic population's returns.

    ``noise`` is ``(n_pairs, n_params)``; ``returns`` is ``(2 * n_pairs,)`` ordered
    ``[+eps_0, -eps_0, +eps_1, -eps_1, ...]``. Returns the update's diagnostics.
    """
    shaped = centered_ranks(returns).reshape(-1, 2)
    weights = (shaped[:, 0] - shaped[:, 1]).astype(np.float32)
    ascent = torch.from_numpy(weights @ noise) / (returns.shape[0] * config.sigma)
    grad = -ascent + config.weight_decay * theta
    optimizer.update(theta.numpy(), grad.numpy())  # in place: theta shares the memory
    return {
        "fitness_mean": float(returns.mean()),
        "fitness_max": float(returns.max()),
        "fitness_min": float(returns.min()),
        "grad_norm": float(torch.linalg.vector_norm(ascent)),
        "theta_norm": float(torch.linalg.vector_norm(theta)),
    }


class ESAgent:
    """A population of perturbed policies evaluated side by side in the vector env."""

    # Integer progress counters, saved in state_dict.
    COUNTERS = ("num_timesteps", "generations")

    def __init__(self, config: Config, context: AgentContext) -> None:
        envs = context.envs
        # Each generation resets the envs and ignores steps after an episode's end: the
        # autoreset mode does not matter.
        self.obs_dim = check_vector_env("es", envs, config.n_envs, next_step_autoreset=False)
        action_space = envs.single_action_space
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if isinstance(action_space, gym.spaces.Discrete) and int(action_space.start) == 0:
            out_dim = int(action_space.n)
            self.action_low = self.action_high = np.zeros(0, dtype=np.float32)
        elif isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
            if not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
                raise ValueError(f"es needs finite continuous action bounds, got {action_space}")
            out_dim = int(action_space.shape[0])
            self.action_low = np.asarray(action_space.low, dtype=np.float32)
            self.action_high = np.asarray(action_space.high, dtype=np.float32)
        else:
            raise ValueError(
                "es supports Discrete (starting at 0) and 1-D Box action spaces, "
                f"got {action_space}"
            )
        self.config = config
        self.envs = envs
        self.rng = context.rng

        init = torch.Generator().manual_seed(int(self.rng.integers(2**63)))
        layers = init_mlp(self.obs_dim, config.net_arch, out_dim, config.output_gain, init)
        # (out_features, in_features) of each layer, in the order of the flat vector.
        self.shapes = [(int(weight.shape[0]), int(weight.shape[1])) for weight, _ in layers]
        self.theta = torch.cat([t.reshape(-1) for layer in layers for t in layer])
        self.optimizer = Adam(config.learning_rate)
        self.obs_normalizer = ObsNormalizer((self.obs_dim,)) if config.normalize_obs else None
        self.num_timesteps = 0
        self.generations = 0

    @property
    def n_params(self) -> int:
        return int(self.theta.numel())

    def _layers(self, flat: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(weight (P, in, out), bias (P, 1, out))`` per layer for ``flat`` of shape (P, D)."""
        out: list[tuple[np.ndarray, np.ndarray]] = []
        offset = 0
        for n_out, n_in in self.shapes:
            weight = flat[:, offset : offset + n_out * n_in].reshape(-1, n_out, n_in)
            offset += n_out * n_in
            bias = flat[:, offset : offset + n_out].reshape(-1, 1, n_out)
            offset += n_out
            out.append((weight.transpose(0, 2, 1), bias))
        return out

    def _policy(self, layers: list[tuple[np.ndarray, np.ndarray]], obs: np.ndarray) -> np.ndarray:
        """Actions of members (batched matmul: row i of ``obs`` goes to member i).

        With one member (leading dimension 1) every row goes to that member.
        """
        x = obs[:, None, :]  # (N, 1, in)
        for weight, bias in layers[:-1]:
            x = np.tanh(np.matmul(x, weight) + bias)
        weight, bias = layers[-1]
        out = (np.matmul(x, weight) + bias)[:, 0, :]
        if self.discrete:
            return out.argmax(-1)
        return self.action_low + (np.tanh(out) + 1.0) * 0.5 * (self.action_high - self.action_low)

    def _normalize(self, raw_obs: np.ndarray) -> np.ndarray:
        return policy_input(raw_obs, self.obs_dim, self.obs_normalizer)

    def evaluate_population(self, params: np.ndarray, seeds: np.ndarray) -> tuple[np.ndarray, int]:
        """One episode per member (row of ``params``); ``(returns, vector steps taken)``."""
        n = params.shape[0]
        layers = self._layers(params)
        obs, _ = self.envs.reset(seed=[int(s) for s in seeds])  # type: ignore[arg-type]
        returns = np.zeros(n, dtype=np.float64)
        running = np.ones(n, dtype=bool)
        seen: list[np.ndarray] = []
        vector_steps = 0
        while running.any():
            flat = np.asarray(obs).reshape(n, self.obs_dim)
            seen.append(flat[running])
            actions = self._policy(layers, self._normalize(flat))
            obs, rewards, terminated, truncated, _ = self.envs.step(actions)
            vector_steps += 1
            returns += np.where(running, rewards, 0.0)
            running &= ~(np.asarray(terminated) | np.asarray(truncated))
        if self.obs_normalizer is not None:
            self.obs_normalizer.update(np.concatenate(seen))
        return returns, vector_steps

    def train_iteration(self) -> IterationInfo:
        start = time.perf_counter()
        n_pairs = self.config.n_envs // 2
        noise = self.rng.standard_normal((n_pairs, self.n_params), dtype=np.float32)
        seeds = np.repeat(self.rng.integers(0, 2**31 - 1, size=n_pairs), 2)
        theta = self.theta.numpy()
        scaled = self.config.sigma * noise
        params = np.stack([theta + scaled, theta - scaled], axis=1).reshape(-1, self.n_params)
        returns, vector_steps = self.evaluate_population(params, seeds)
        evaluated = time.perf_counter()

        stats = es_update(self.theta, self.optimizer, noise, returns, self.config)
        env_steps = vector_steps * self.config.n_envs
        self.num_timesteps += env_steps
        self.generations += 1
        return IterationInfo(
            env_steps=env_steps,
            episode_returns=returns.tolist(),
            collect_seconds=evaluated - start,
            train_seconds=time.perf_counter() - evaluated,
            stats=stats,
        )

    def act(self, obs: np.ndarray) -> np.ndarray:
        layers = self._layers(self.theta.numpy()[None, :])
        return self._policy(layers, self._normalize(np.asarray(obs)))

    def state_dict(self) -> dict[str, Any]:
        return {
            "theta": self.theta.clone(),
            "optimizer": self.optimizer.state_dict(),
            "obs_normalizer": state_of(self.obs_normalizer),
            **progress_state(self, self.rng, self.COUNTERS),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.theta.copy_(state["theta"])
        self.optimizer.load_state_dict(state["optimizer"])
        load_state(self.obs_normalizer, state["obs_normalizer"])
        load_progress(self, self.rng, self.COUNTERS, state)


def build(config: Config, context: AgentContext) -> ESAgent:
    """An evolution strategy whose population is the job's training vector env."""
    return ESAgent(config, context)
