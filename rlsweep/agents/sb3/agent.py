"""The adapter's agent: an SB3 model trained on the job's envs, on its own RNG states."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from rlsweep.agents.base import AgentContext, IterationInfo
from rlsweep.agents.sb3.extra import BaseAlgorithm, BaseCallback, Logger
from rlsweep.agents.sb3.settings import Config, algorithm_class, constructor_kwargs, policy_class
from rlsweep.agents.sb3.state import is_number, load_model_state, model_state, snapshot
from rlsweep.agents.sb3.vecenv import RlsweepVecEnv


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
        kwargs = constructor_kwargs(config.hyperparameters, action_space)
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
            if key.startswith("train/") and is_number(value)
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
        """Everything ``learn`` carries over from one call to the next: the model's training
        state (:func:`~rlsweep.agents.sb3.state.model_state`), the running returns of
        unfinished episodes (``vec_env``) and, in ``rngs``, the agent's private
        numpy-global and torch states, its action space's generator and its own stream."""
        return {
            "algo": self.config.algo,
            **model_state(self.model),
            "vec_env": self.vec_env.state_dict(),
            "rngs": {
                "numpy_global": snapshot(self._numpy_state),
                "torch_global": self._torch_state.clone(),
                "action_space": snapshot(self.vec_env.action_space.np_random.bit_generator.state),
                "agent": snapshot(self.rng.bit_generator.state),
            },
            "iterations": self.iterations,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["algo"] != self.config.algo:
            raise ValueError(f"a state of {state['algo']} cannot be loaded into {self.config.algo}")
        state = snapshot(state)  # nothing of the caller's is trained on in place afterwards
        load_model_state(self.model, state)
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
