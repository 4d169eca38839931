"""Seeded training and evaluation environments."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

import rlsweep.faults  # noqa: F401  (registers rlsweep/Fault-v0)
from rlsweep.config import EnvConfig, env_spec


def _make_kwargs(env: EnvConfig) -> dict[str, Any]:
    kwargs = dict(env.kwargs)
    if env.max_episode_steps is not None:
        kwargs["max_episode_steps"] = env.max_episode_steps
    return kwargs


class Snapshot(gym.Wrapper[Any, Any, Any, Any]):
    """Outermost wrapper of each training sub-env: save and restore the env underneath.

    Works the same in a sync vector env and in an async one's worker processes (through
    ``call`` and ``set_attr``). It remembers whether the last step ended an episode: a
    restored env in that case resets on its next step, exactly as the vector env's
    NEXT_STEP autoreset would have (a fresh vector env has no pending autoresets).
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self._episode_ended = False
        self._reset_on_step = False

    def rlsweep_snapshot(self) -> tuple[bytes | None, bool, str]:
        """``(pickled env, episode ended, "")``, or ``(None, ..., why)`` if it cannot be
        pickled (reported, not raised: an async worker that raises is lost)."""
        try:
            payload = pickle.dumps(self.env, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            return None, self._episode_ended, f"{type(exc).__name__}: {exc}"
        return payload, self._episode_ended, ""

    @property
    def rlsweep_restore(self) -> None:
        return None

    @rlsweep_restore.setter
    def rlsweep_restore(self, value: tuple[bytes, bool]) -> None:
        payload, episode_ended = value
        self.env = pickle.loads(payload)
        self._episode_ended = self._reset_on_step = bool(episode_ended)

    def step(self, action: Any) -> Any:
        if self._reset_on_step:
            self._reset_on_step = self._episode_ended = False
            obs, info = self.env.reset()
            return obs, 0.0, False, False, info
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._episode_ended = bool(terminated or truncated)
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> Any:
        self._episode_ended = self._reset_on_step = False
        return self.env.reset(**kwargs)


def make_vector_env(
    env: EnvConfig, num_envs: int, *, vectorization: str | None = None, snapshots: bool = False
) -> gym.vector.VectorEnv:
    """A vector env of ``num_envs`` copies of the task (not yet reset).

    ``snapshots`` wraps each sub-env so that a checkpoint can save and restore it.

    ``async`` runs one process per sub-env and passes observations through shared memory.
    Gymnasium's default NEXT_STEP autoreset is kept: agents mask the reset step.

    ``env.id`` may be gymnasium's ``module:id`` form: the module is imported here (in
    whatever process runs the job), which registers the env; the resolved spec, which
    names its entry point, is what async sub-env processes receive, so they import the
    entry point's module themselves and need no registration.
    """
    mode = vectorization or env.vectorization
    vector_kwargs: dict[str, Any] = {}
    if mode == "async":
        # In a joblib worker the job runs with the platform's default start method
        # (rlsweep.launch.worker.platform_start_method), which spawned sub-envs set too.
        vector_kwargs = {"shared_memory": True, "context": "spawn"}
    return gym.make_vec(
        env_spec(env.id),
        num_envs=num_envs,
        vectorization_mode=mode,
        vector_kwargs=vector_kwargs,
        wrappers=[Snapshot] if snapshots else None,
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
