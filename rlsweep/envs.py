"""Seeded training and evaluation environments."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

import rlsweep.faults  # noqa: F401  (registers rlsweep/Fault-v0)
from rlsweep.config import EnvConfig


def _make_kwargs(env: EnvConfig) -> dict[str, Any]:
    kwargs = dict(env.kwargs)
    if env.max_episode_steps is not None:
        kwargs["max_episode_steps"] = env.max_episode_steps
    return kwargs


def make_vector_env(
    env: EnvConfig, num_envs: int, *, vectorization: str | None = None
) -> gym.vector.VectorEnv:
    """A vector env of ``num_envs`` copies of the task (not yet reset).

    ``async`` runs one process per sub-env and passes observations through shared memory.
    Gymnasium's default NEXT_STEP autoreset is kept: agents mask the reset step.
    """
    mode = vectorization or env.vectorization
    vector_kwargs: dict[str, Any] = {}
    if mode == "async":
        vector_kwargs = {"shared_memory": True, "context": "spawn"}
    return gym.make_vec(
        env.id,
        num_envs=num_envs,
        vectorization_mode=mode,
        vector_kwargs=vector_kwargs,
        **_make_kwargs(env),
    )


def seed_vector_env(
    envs: gym.vector.VectorEnv, env_seeds: Sequence[int], action_space_seed: int | None
) -> np.ndarray:
    """Reset with one explicit seed per sub-env (never ``seed + i``); return observations."""
    if len(env_seeds) != envs.num_envs:
        raise ValueError(f"need {envs.num_envs} sub-env seeds, got {len(env_seeds)}")
    # One explicit seed per sub-env: reset(seed=int) would give sub-env i ``seed + i``.
    obs, _ = envs.reset(seed=[int(s) for s in env_seeds])  # type: ignore[arg-type]
    if action_space_seed is not None:
        envs.action_space.seed(int(action_space_seed))
    return obs


def evaluate(
    act: Callable[[np.ndarray], np.ndarray],
    envs: gym.vector.VectorEnv,
    episode_seeds: Sequence[int],
) -> np.ndarray:
    """Run one episode per sub-env, each from its own seed; return the undiscounted returns.

    ``envs`` has exactly ``len(episode_seeds)`` sub-envs; the policy acts on all of them in
    one batched call per step until every sub-env has finished its first episode.
    """
    obs = seed_vector_env(envs, episode_seeds, None)
    n = envs.num_envs
    returns = np.zeros(n, dtype=np.float64)
    done = np.zeros(n, dtype=bool)
    space = envs.single_action_space
    low = high = None
    if isinstance(space, gym.spaces.Box):
        low, high = space.low, space.high
    while not done.all():
        actions = act(obs)
        if low is not None:
            actions = np.clip(actions, low, high)
        obs, reward, terminated, truncated, _ = envs.step(actions)
        returns += np.where(done, 0.0, reward)
        done |= np.asarray(terminated) | np.asarray(truncated)
    return returns
