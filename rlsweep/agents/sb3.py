"""Any Stable-Baselines3 algorithm as an rlsweep agent (the ``sb3`` extra).

Select it with ``agent=sb3_ppo`` (or ``sb3_a2c``, ``sb3_dqn``): ``conf/agent/sb3_*.yaml``
name this module and pick the algorithm with ``algo``, which may be any SB3 algorithm class
(``PPO``, ``A2C``, ``DQN``, ``SAC``, ``TD3``, ``DDPG``) or a dotted path to one of another
package (``sb3_contrib.TQC``).

What rlsweep guarantees for its own agents holds here too:

- *Seeds.* SB3 is given ``seed=None``, so it never calls ``set_random_seed``, and never
  reseeds sub-env ``i`` with ``seed + i`` (which would make replicate 0's sub-env 1 the same
  stream as replicate 1's sub-env 0). The model steps the job's own training vector env,
  already reset with one derived seed per sub-env, through :class:`RlsweepVecEnv`.
- *The agent's own randomness.* SB3 draws from numpy's and torch's global generators
  (action sampling, minibatch order, replay sampling, epsilon-greedy, network
  initialisation) and from its action space's generator (warm-up actions). The agent keeps
  private states of the two global generators, seeded from ``context.rng``, and swaps them
  in around every SB3 call (:meth:`SB3Agent._own_rngs`); its action space is a copy seeded
  from ``context.rng``. Nothing it does depends on, or disturbs, the process-global states.
- *Resume.* ``state_dict`` holds everything ``learn`` carries from one call to the next
  (see :meth:`SB3Agent.state_dict`); a restored agent continues bit for bit, and so does a
  job resumed from its checkpoint (the job saves the envs through its Snapshot wrapper).

Schedules (``"lin_<x>"`` values, DQN's exploration) run over the job's whole budget
(``train.total_steps``), as in rl-baselines3-zoo, not over one ``learn`` call. Bitwise
results are for the CPU (the default ``device``); the CUDA generator is not managed.
"""

from __future__ import annotations

import copy
import difflib
import importlib
import inspect
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlsweep.agents.base import AgentConfig, AgentContext, IterationInfo


class MissingExtraError(ImportError, ValueError):
    """Stable-Baselines3 is not installed (a ValueError too: the config check reports it)."""


try:
    import stable_baselines3
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.noise import NormalActionNoise
    from stable_baselines3.common.vec_env import VecEnv
    from stable_baselines3.common.vec_env.base_vec_env import (
        VecEnvIndices,
        VecEnvObs,
        VecEnvStepReturn,
    )
except ImportError as _exc:
    raise MissingExtraError(
        "agent sb3 (agent=sb3_*) needs Stable-Baselines3, which is not "
        "installed: pip install 'rlsweep[sb3]'"
    ) from _exc

__all__ = ["ACTION_SPACES", "Config", "RlsweepVecEnv", "SB3Agent", "algorithm_class", "build"]

# The kinds rlsweep's config check knows; whether the chosen algorithm supports the env's
# action space (DQN: discrete only; SAC, TD3, DDPG: continuous only) is checked in build.
ACTION_SPACES = frozenset({"discrete", "continuous"})

# Constructor arguments rlsweep sets itself.
_RESERVED = {
    "seed": "rlsweep derives every seed from the job (SB3's seed would reseed sub-env i "
    "with seed + i and reseed the global generators)",
    "env": "the model always steps the job's training vector env",
    "policy": "set the policy field instead",
    "_init_setup_model": "the model is always set up",
}
# Model attributes that are not part of the training state (wall-clock time).
_VOLATILE = frozenset({"start_time"})


@dataclass
class Config(AgentConfig):
    """A Stable-Baselines3 algorithm on rlsweep's seeded envs (needs the sb3 extra)."""

    # Registry name: sb3 (the algorithm is chosen by algo).
    name: str = "sb3"
    # SB3 algorithm class: a name stable_baselines3 exports (PPO, A2C, DQN, SAC, TD3, DDPG)
    # or a dotted path to one in another package (e.g. sb3_contrib.TQC).
    algo: str = "PPO"
    # Policy: an alias the algorithm knows (MlpPolicy, CnnPolicy, MultiInputPolicy) or a
    # dotted path to a policy class.
    policy: str = "MlpPolicy"
    # Keyword arguments of the algorithm's constructor (SB3's defaults for the rest).
    # "lin_<x>" (e.g. learning_rate: lin_0.001) is a linear schedule from x to 0 over the
    # job's budget, as in rl-baselines3-zoo; policy_kwargs.activation_fn may name a
    # torch.nn class (ReLU, nn.Tanh); action_noise: <std> adds Gaussian noise of that std
    # to the actions (scaled to [-1, 1]) of off-policy algorithms. Add a key on the command
    # line with +agent.hyperparameters.<key>=<value>.
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    # Env steps (summed over sub-envs) per iteration, >= 1: each iteration calls learn for
    # this many steps (whole rollouts for on-policy algorithms, so it may run a few more).
    steps_per_iteration: int = 256

    def __post_init__(self) -> None:
        super().__post_init__()
        cls = algorithm_class(self.algo)
        if self.steps_per_iteration < 1:
            raise ValueError(f"steps_per_iteration must be >= 1, got {self.steps_per_iteration}")
        policy_class(cls, self.policy)
        check_hyperparameters(cls, self.hyperparameters)


def _algorithms() -> dict[str, type[BaseAlgorithm]]:
    """The algorithm classes stable_baselines3 exports, by name."""
    return {
        name: obj
        for name, obj in vars(stable_baselines3).items()
        if isinstance(obj, type) and issubclass(obj, BaseAlgorithm)
    }


def algorithm_class(name: str) -> type[BaseAlgorithm]:
    """The SB3 algorithm class ``name`` names; ValueError (starting "algo") otherwise."""
    known = _algorithms()
    if name in known:
        return known[name]
    cls: Any = None
    if "." in name:
        module, _, attr = name.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), attr, None)
        except ImportError as exc:
            raise ValueError(f"algo {name!r}: cannot import {module!r} ({exc})") from None
    if isinstance(cls, type) and issubclass(cls, BaseAlgorithm):
        return cls
    close = difflib.get_close_matches(name.upper(), list(known), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"algo must be a Stable-Baselines3 algorithm ({', '.join(sorted(known))}) or a "
        f"dotted path to one (e.g. sb3_contrib.TQC), got {name!r}.{hint}"
    )


def _import_dotted(path: str) -> Any:
    module, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def policy_class(cls: type[BaseAlgorithm], policy: str) -> Any:
    """The policy ``policy`` names for ``cls``: an alias of it or a dotted class path."""
    aliases: dict[str, Any] = dict(getattr(cls, "policy_aliases", {}))
    if policy in aliases:
        return policy
    if "." in policy:
        try:
            return _import_dotted(policy)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"policy {policy!r}: cannot import it ({exc})") from None
    raise ValueError(
        f"policy must be one of {cls.__name__}'s policies ({', '.join(sorted(aliases))}) or a "
        f"dotted path to a policy class, got {policy!r}"
    )


def check_hyperparameters(cls: type[BaseAlgorithm], hyperparameters: dict[str, Any]) -> None:
    """Refuse keys the constructor does not take (or that rlsweep sets) and bad values."""
    parameters = inspect.signature(cls.__init__).parameters
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    accepted = sorted(p for p in parameters if p != "self" and p not in _RESERVED)
    for key, value in hyperparameters.items():
        if key in _RESERVED:
            raise ValueError(f"hyperparameters.{key} cannot be set: {_RESERVED[key]}")
        if key not in parameters and not open_ended:
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"hyperparameters.{key} is not an argument of {cls.__name__}.{hint} "
                f"{cls.__name__} takes: {', '.join(accepted)}"
            )
        if isinstance(value, str) and value.startswith("lin_"):
            _linear(key, value)
        bad_noise = isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        if key == "action_noise" and value is not None and bad_noise:
            raise ValueError(
                "hyperparameters.action_noise must be the std (> 0) of Gaussian action "
                f"noise, or null, got {value!r}"
            )


class LinearSchedule:
    """rl-baselines3-zoo's ``lin_<x>``: ``x * progress_remaining`` (x at the start, 0 at
    the end of the job's budget)."""

    def __init__(self, initial: float) -> None:
        self.initial = initial

    def __call__(self, progress_remaining: float) -> float:
        return progress_remaining * self.initial

    def __repr__(self) -> str:
        return f"lin_{self.initial}"


def _linear(key: str, value: str) -> LinearSchedule:
    try:
        return LinearSchedule(float(value.removeprefix("lin_")))
    except ValueError:
        raise ValueError(
            f"hyperparameters.{key}: {value!r} is not a linear schedule lin_<number>"
        ) from None


def _constructor_kwargs(
    hyperparameters: dict[str, Any], action_space: gym.Space[Any]
) -> dict[str, Any]:
    """The hyperparameters as SB3's constructor takes them (schedules, classes, noise)."""
    out: dict[str, Any] = {"device": "cpu"}
    for key, value in copy.deepcopy(hyperparameters).items():
        if isinstance(value, str) and value.startswith("lin_"):
            value = _linear(key, value)
        elif key == "train_freq" and isinstance(value, list):
            value = tuple(value)  # SB3 takes (frequency, unit) as a tuple only
        elif key == "policy_kwargs" and isinstance(value, dict):
            activation = value.get("activation_fn")
            if isinstance(activation, str):
                value["activation_fn"] = getattr(torch.nn, activation.rsplit(".", 1)[-1])
        elif key == "action_noise" and value is not None:
            shape = action_space.shape or (1,)
            value = NormalActionNoise(np.zeros(shape), float(value) * np.ones(shape))
        out[key] = value
    return out


def _copy(value: Any) -> Any:
    """A deep copy of arrays, tensors and containers of them (state is a snapshot)."""
    return copy.deepcopy(value)


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
            obs = _copy(obs)
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


class _PhaseTimer(BaseCallback):
    """Wall time spent collecting (between SB3's rollout start and end) in ``learn``."""

    def __init__(self) -> None:
        super().__init__()
        self.collect_seconds = 0.0
        self._started = 0.0

    def _on_rollout_start(self) -> None:
        self._started = time.perf_counter()

    def _on_rollout_end(self) -> None:
        self.collect_seconds += time.perf_counter() - self._started

    def _on_step(self) -> bool:
        return True


def _budgeted(cls: type[BaseAlgorithm], total_steps: int) -> type[BaseAlgorithm]:
    """``cls`` whose schedules run over the job's budget rather than one ``learn`` call.

    SB3 computes the progress remaining (the input of learning-rate, clip-range and
    exploration schedules) against the end of the current ``learn`` call; rlsweep calls
    ``learn`` once per iteration, so the progress is computed against ``total_steps``.
    """

    def update(self: BaseAlgorithm, num_timesteps: int, total_timesteps: int) -> None:
        remaining = 1.0 - num_timesteps / total_steps if total_steps > 0 else 1.0
        self._current_progress_remaining = max(0.0, remaining)

    namespace = {"_update_current_progress_remaining": update, "__module__": cls.__module__}
    return type(cls.__name__, (cls,), namespace)


def _attribute(obj: Any, dotted: str) -> Any:
    return reduce(getattr, dotted.split("."), obj)


def _is_number(value: Any) -> bool:
    return isinstance(value, bool | int | float | np.integer | np.floating)


def _buffer_state(buffer: Any) -> dict[str, Any]:
    """The filled part of a replay buffer's arrays, and its counters (pos, full)."""
    size = int(buffer.buffer_size)
    filled = size if buffer.full else int(buffer.pos)

    def snap(array: np.ndarray) -> np.ndarray:
        return array[:filled].copy() if array.ndim and array.shape[0] == size else array.copy()

    state: dict[str, Any] = {}
    for key, value in vars(buffer).items():
        if isinstance(value, np.ndarray):
            state[key] = snap(value)
        elif (
            isinstance(value, dict)
            and value
            and all(isinstance(v, np.ndarray) for v in value.values())
        ):
            state[key] = {k: snap(v) for k, v in value.items()}
        elif _is_number(value):
            state[key] = value
    return state


def _load_buffer_state(buffer: Any, state: dict[str, Any]) -> None:
    size = int(buffer.buffer_size)

    def put(target: np.ndarray, saved: np.ndarray) -> np.ndarray:
        if target.ndim and target.shape[0] == size and saved.shape[1:] == target.shape[1:]:
            target[: len(saved)] = saved
            target[len(saved) :] = 0
            return target
        return saved.copy()

    for key, saved in state.items():
        current = getattr(buffer, key, None)
        if isinstance(saved, np.ndarray) and isinstance(current, np.ndarray):
            setattr(buffer, key, put(current, saved))
        elif isinstance(saved, dict) and isinstance(current, dict):
            for k, v in saved.items():
                current[k] = put(current[k], v)
        else:
            setattr(buffer, key, _copy(saved))


class SB3Agent:
    """An SB3 model trained ``steps_per_iteration`` env steps per iteration."""

    def __init__(self, config: Config, context: AgentContext) -> None:
        envs = context.envs
        if envs.num_envs != config.n_envs:
            raise ValueError(
                f"n_envs is {config.n_envs} but the vector env has {envs.num_envs} sub-envs"
            )
        cls = algorithm_class(config.algo)
        self.config = config
        self.rng = context.rng
        self.iterations = 0

        # The agent's private states of numpy's and torch's global generators (swapped in
        # around every SB3 call) and its action space's generator, from its own stream.
        numpy_seed, torch_seed, space_seed = (int(s) for s in self.rng.integers(2**63, size=3))
        self._numpy_state: Any = np.random.RandomState(np.random.MT19937(numpy_seed)).get_state()
        self._torch_state = torch.Generator().manual_seed(torch_seed).get_state()
        action_space = copy.deepcopy(envs.single_action_space)
        action_space.seed(space_seed)

        self.vec_env = RlsweepVecEnv(envs, context.first_obs, action_space)
        kwargs = _constructor_kwargs(config.hyperparameters, action_space)
        with self._own_rngs():
            try:
                self.model = _budgeted(cls, context.total_steps)(
                    policy_class(cls, config.policy), self.vec_env, seed=None, **kwargs
                )
            except AssertionError as exc:  # SB3 checks the spaces with asserts
                raise ValueError(
                    f"{config.algo} cannot train on this env (action space "
                    f"{envs.single_action_space}): {exc}"
                ) from None
        # A logger without outputs: SB3's default one makes a temporary directory per learn.
        self.model.set_logger(Logger(folder=None, output_formats=[]))
        assert self.model.env is not None
        # What SB3's first learn would do, now, so that the state is complete from the start.
        self.model._last_obs = self.model.env.reset()  # type: ignore[assignment]
        self.model._last_episode_starts = np.ones((config.n_envs,), dtype=bool)
        self._timer = _PhaseTimer()

    @contextmanager
    def _own_rngs(self) -> Iterator[None]:
        """Run SB3 on the agent's own numpy-global and torch states; put the caller's back."""
        outer_numpy, outer_torch = np.random.get_state(), torch.get_rng_state()
        np.random.set_state(self._numpy_state)
        torch.set_rng_state(self._torch_state)
        try:
            yield
        finally:
            self._numpy_state = np.random.get_state()
            self._torch_state = torch.get_rng_state()
            np.random.set_state(outer_numpy)
            torch.set_rng_state(outer_torch)

    def train_iteration(self) -> IterationInfo:
        start = time.perf_counter()
        before = self.model.num_timesteps
        self._timer.collect_seconds = 0.0
        with self._own_rngs():
            self.model.learn(
                self.config.steps_per_iteration,
                callback=self._timer,
                log_interval=None,  # type: ignore[arg-type]  # SB3 takes None: no log dumps
                reset_num_timesteps=False,
            )
        elapsed = time.perf_counter() - start
        self.iterations += 1
        logger = self.model.logger
        stats = {
            key.removeprefix("train/"): float(value)
            for key, value in logger.name_to_value.items()
            if key.startswith("train/") and _is_number(value)
        }
        logger.dump()  # clears the recorded values (there are no outputs)
        # SB3 reports no phase times: collection is the time between its rollout-start and
        # rollout-end callbacks; the rest of learn (gradient steps, setup) counts as train.
        collect = min(self._timer.collect_seconds, elapsed)
        return IterationInfo(
            env_steps=self.model.num_timesteps - before,
            episode_returns=self.vec_env.pop_finished(),
            collect_seconds=collect,
            train_seconds=elapsed - collect,
            stats=stats,
        )

    def act(self, obs: np.ndarray) -> np.ndarray:
        with self._own_rngs():
            actions, _ = self.model.predict(np.asarray(obs), deterministic=True)
        return np.asarray(actions)

    def state_dict(self) -> dict[str, Any]:
        """Everything ``learn`` carries over from one call to the next.

        - ``modules``: the state dicts SB3 itself saves (``_get_torch_save_params``: the
          policy with its target networks, every optimiser) and ``variables`` (SAC's
          entropy coefficient);
        - ``counters``: every number the model holds (``num_timesteps``, ``_n_updates``,
          ``_episode_num``, DQN's ``_n_calls`` and ``exploration_rate``, the schedules'
          ``_current_progress_remaining``, ...), except its wall-clock start time;
        - ``arrays``: the last observations and episode starts it continues from;
        - ``episode_info``: SB3's episode statistics buffers;
        - ``replay_buffer``: the filled part of an off-policy algorithm's replay buffer;
        - ``vec_env``: the running returns of unfinished episodes;
        - ``rngs``: the agent's private numpy-global and torch states, its action space's
          generator and its own stream.

        A rollout buffer is not saved: on-policy algorithms refill it every iteration.
        """
        model = self.model
        modules, variables = model._get_torch_save_params()
        counters, arrays = {}, {}
        for key, value in vars(model).items():
            if key in _VOLATILE:
                continue
            if _is_number(value):
                counters[key] = value
            elif isinstance(value, np.ndarray) or (
                isinstance(value, dict)
                and value
                and all(isinstance(v, np.ndarray) for v in value.values())
            ):
                arrays[key] = _copy(value)
        replay_buffer = getattr(model, "replay_buffer", None)
        return {
            "algo": self.config.algo,
            "modules": {name: _copy(_attribute(model, name).state_dict()) for name in modules},
            "variables": {name: _attribute(model, name).detach().clone() for name in variables},
            "counters": counters,
            "arrays": arrays,
            "episode_info": {
                "ep_info_buffer": _copy(list(model.ep_info_buffer or [])),
                "ep_success_buffer": _copy(list(model.ep_success_buffer or [])),
            },
            "replay_buffer": None if replay_buffer is None else _buffer_state(replay_buffer),
            "vec_env": self.vec_env.state_dict(),
            "rngs": {
                "numpy_global": _copy(self._numpy_state),
                "torch_global": self._torch_state.clone(),
                "action_space": _copy(self.vec_env.action_space.np_random.bit_generator.state),
                "agent": _copy(self.rng.bit_generator.state),
            },
            "iterations": self.iterations,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["algo"] != self.config.algo:
            raise ValueError(f"a state of {state['algo']} cannot be loaded into {self.config.algo}")
        state = _copy(state)  # nothing of the caller's is trained on in place afterwards
        model = self.model
        for name, module_state in state["modules"].items():
            _attribute(model, name).load_state_dict(module_state)
        with torch.no_grad():
            for name, value in state["variables"].items():
                _attribute(model, name).copy_(value)
        for key, value in state["counters"].items():
            setattr(model, key, value)
        for key, value in state["arrays"].items():
            setattr(model, key, value)
        window = model._stats_window_size
        model.ep_info_buffer = deque(state["episode_info"]["ep_info_buffer"], maxlen=window)
        model.ep_success_buffer = deque(state["episode_info"]["ep_success_buffer"], maxlen=window)
        replay_buffer = getattr(model, "replay_buffer", None)
        if replay_buffer is not None and state["replay_buffer"] is not None:
            _load_buffer_state(replay_buffer, state["replay_buffer"])
        self.vec_env.load_state_dict(state["vec_env"])
        rngs = state["rngs"]
        self._numpy_state = rngs["numpy_global"]
        self._torch_state = rngs["torch_global"]
        self.vec_env.action_space.np_random.bit_generator.state = rngs["action_space"]
        self.rng.bit_generator.state = rngs["agent"]
        self.iterations = int(state["iterations"])


def build(config: Config, context: AgentContext) -> SB3Agent:
    """An SB3 agent stepping the job's training vector env."""
    return SB3Agent(config, context)
