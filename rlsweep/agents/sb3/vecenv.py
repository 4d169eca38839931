"""SB3's ``VecEnv`` interface on the job's own gymnasium vector env."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rlsweep.agents.sb3.extra import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn


def _index(obs: Any, i: int) -> Any:
    if isinstance(obs, dict):
        return {key: np.array(value[i]) for key, value in obs.items()}
    return np.array(obs[i])


def _assign(obs: Any, mask: np.ndarray, source: Any) -> None:
    if isinstance(obs, dict):
        for key in obs:
            obs[key][mask] = source[key][mask]
    else:
        obs[mask] = source[mask]


def _split_infos(infos: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Gymnasium's batched info dict (values and ``_key`` masks) as SB3's list of dicts."""
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        parts = _split_infos(value, n) if isinstance(value, dict) else value
        for i in range(n):
            if mask is None or mask[i]:
                out[i][key] = parts[i]
    return out


class RlsweepVecEnv(VecEnv):
    """SB3's VecEnv interface on the job's gymnasium vector env (never reseeded).

    *Seeding.* The job has already reset the vector env with one explicit seed per sub-env;
    the first :meth:`reset` returns the observations of that reset without resetting again.
    A later ``reset`` (SB3 makes none while training) resets every sub-env from its own
    seeded stream (no new seed); :meth:`seed` (SB3's ``seed + i``) is refused.

    *Autoreset.* Gymnasium's vector env resets an ended sub-env on its *next* step
    (NEXT_STEP: that step ignores the action and returns the first observation, reward 0).
    SB3 expects the reset to happen *in* the step that ended the episode: done is True, the
    observation is already the next episode's first, and ``info["terminal_observation"]``
    holds the final one. So :meth:`step_wait` resets the ended sub-envs right away (and
    only them: ``reset(options={"reset_mask": ...})``), which draws exactly what the
    NEXT_STEP autoreset would have: each ended sub-env's ``reset()`` without a seed. The
    vector env is therefore never left with a pending autoreset between steps, so the job's
    Snapshot of the sub-envs is always that of a vector env with no pending reset.

    It also adds what SB3's DummyVecEnv and Monitor would: ``info["TimeLimit.truncated"]``
    (truncated and not terminated: SB3 then bootstraps from the terminal observation),
    ``info["episode"] = {"r": return, "l": length}``, float32 rewards. The raw returns of
    episodes that ended are collected for the job (:meth:`pop_finished`).

    ``close`` does nothing: the job owns the vector env and closes it.
    """

    def __init__(
        self, envs: gym.vector.VectorEnv, first_obs: Any, action_space: gym.Space[Any]
    ) -> None:
        mode = envs.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
        if mode != gym.vector.AutoresetMode.NEXT_STEP:
            raise ValueError(f"sb3 needs a vector env with autoreset_mode NEXT_STEP, got {mode}")
        self.envs = envs
        self._first_obs: Any = first_obs
        self._actions: np.ndarray | None = None
        n = envs.num_envs
        self.episode_returns = np.zeros(n, dtype=np.float64)
        self.episode_lengths = np.zeros(n, dtype=np.int64)
        self.finished: list[float] = []
        super().__init__(n, envs.single_observation_space, action_space)

    # -- stepping ---------------------------------------------------------------------------

    def reset(self) -> VecEnvObs:
        if self._first_obs is not None:
            obs, self._first_obs = self._first_obs, None
            obs = copy.deepcopy(obs)
        else:
            obs, infos = self.envs.reset()  # each sub-env's own stream: no new seeds
            self.reset_infos = _split_infos(infos, self.num_envs)
        self.episode_returns[:] = 0.0
        self.episode_lengths[:] = 0
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        assert self._actions is not None, "step_wait without step_async"
        actions, self._actions = self._actions, None
        obs, rewards, terminated, truncated, infos = self.envs.step(actions)
        terminated, truncated = np.asarray(terminated), np.asarray(truncated)
        dones = terminated | truncated
        raw = np.asarray(rewards, dtype=np.float64)
        self.episode_returns += raw
        self.episode_lengths += 1
        info_list = _split_infos(infos, self.num_envs)
        if dones.any():
            for i in np.flatnonzero(dones):
                episode_return = float(self.episode_returns[i])
                info_list[i]["terminal_observation"] = _index(obs, int(i))
                info_list[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                info_list[i]["episode"] = {"r": episode_return, "l": int(self.episode_lengths[i])}
                self.finished.append(episode_return)
            self.episode_returns[dones] = 0.0
            self.episode_lengths[dones] = 0
            # The autoreset, now rather than on the sub-env's next step (see the class doc).
            reset_obs, reset_infos = self.envs.reset(options={"reset_mask": dones.copy()})
            _assign(obs, dones, reset_obs)
            for j, info in enumerate(_split_infos(reset_infos, self.num_envs)):
                if dones[j]:
                    self.reset_infos[j] = info
        return obs, raw.astype(np.float32), dones, info_list

    def pop_finished(self) -> list[float]:
        """Raw returns of the episodes that ended since the last call."""
        finished, self.finished = self.finished, []
        return finished

    def state_dict(self) -> dict[str, Any]:
        return {
            "episode_returns": self.episode_returns.copy(),
            "episode_lengths": self.episode_lengths.copy(),
            "finished": list(self.finished),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.episode_returns = np.array(state["episode_returns"], dtype=np.float64)
        self.episode_lengths = np.array(state["episode_lengths"], dtype=np.int64)
        self.finished = list(state["finished"])
        self._first_obs = None

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        raise RuntimeError(
            "rlsweep has reset each sub-env with its own derived seed; SB3's VecEnv.seed "
            "(seed + i per sub-env) is not used: build the model with seed=None"
        )

    def close(self) -> None:
        """The job owns the vector env and closes it."""

    # -- attributes and methods of the sub-envs ---------------------------------------------

    def _sub_envs(self) -> list[gym.Env[Any, Any]] | None:
        """The sub-env objects of a sync vector env (None for an async one)."""
        envs = getattr(self.envs, "envs", None)
        return list(envs) if envs is not None else None

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        vector: Any = self.envs  # sync and async vector envs have get_attr, set_attr, call
        values = vector.get_attr(attr_name)
        return [values[i] for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        vector: Any = self.envs
        values = list(vector.get_attr(attr_name))
        for i in self._get_indices(indices):
            values[i] = value
        vector.set_attr(attr_name, values)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        if indices is None:
            vector: Any = self.envs
            return list(vector.call(method_name, *method_args, **method_kwargs))
        sub_envs = self._sub_envs()
        if sub_envs is None:
            raise NotImplementedError("env_method on some sub-envs of an async vector env")
        return [
            getattr(sub_envs[i], method_name)(*method_args, **method_kwargs)
            for i in self._get_indices(indices)
        ]

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper[Any, Any, Any, Any]], indices: VecEnvIndices = None
    ) -> list[bool]:
        sub_envs = self._sub_envs()
        out = []
        for i in self._get_indices(indices):
            env: Any = sub_envs[i] if sub_envs is not None else None
            wrapped = False
            while isinstance(env, gym.Wrapper):
                wrapped = wrapped or isinstance(env, wrapper_class)
                env = env.env
            out.append(wrapped)
        return out
