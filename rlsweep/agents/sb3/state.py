"""The training state of an SB3 model: what ``learn`` carries from one call to the next.

- ``modules``: the state dicts SB3 itself saves (``_get_torch_save_params``: the policy
  with its target networks, every optimiser) and ``variables`` (SAC's entropy
  coefficient);
- ``counters``: every number the model holds (``num_timesteps``, ``_n_updates``,
  ``_episode_num``, DQN's ``_n_calls`` and ``exploration_rate``, the schedules'
  ``_current_progress_remaining``, ...), except its wall-clock start time;
- ``arrays``: the last observations and episode starts it continues from;
- ``episode_info``: SB3's episode statistics buffers;
- ``replay_buffer``: the filled part of an off-policy algorithm's replay buffer.

A rollout buffer is not saved: on-policy algorithms refill it every iteration.
"""

from __future__ import annotations

import copy
from collections import deque
from functools import reduce
from typing import Any

import numpy as np
import torch

from rlsweep.agents.sb3.extra import BaseAlgorithm

# Model attributes that are not part of the training state (wall-clock time).
_VOLATILE = frozenset({"start_time"})


def snapshot(value: Any) -> Any:
    """A deep copy of arrays, tensors and containers of them (state is a snapshot)."""
    return copy.deepcopy(value)


def is_number(value: Any) -> bool:
    return isinstance(value, bool | int | float | np.integer | np.floating)


def _attribute(obj: Any, dotted: str) -> Any:
    return reduce(getattr, dotted.split("."), obj)


def _is_array_dict(value: Any) -> bool:
    """A non-empty dict of arrays (the observations of a Dict observation space)."""
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(v, np.ndarray) for v in value.values())
    )


def model_state(model: BaseAlgorithm) -> dict[str, Any]:
    """The model's training state (see the module docstring), a snapshot."""
    modules, variables = model._get_torch_save_params()
    counters, arrays = {}, {}
    for key, value in vars(model).items():
        if key in _VOLATILE:
            continue
        if is_number(value):
            counters[key] = value
        elif isinstance(value, np.ndarray) or _is_array_dict(value):
            arrays[key] = snapshot(value)
    replay_buffer = getattr(model, "replay_buffer", None)
    return {
        "modules": {name: snapshot(_attribute(model, name).state_dict()) for name in modules},
        "variables": {name: _attribute(model, name).detach().clone() for name in variables},
        "counters": counters,
        "arrays": arrays,
        "episode_info": {
            "ep_info_buffer": snapshot(list(model.ep_info_buffer or [])),
            "ep_success_buffer": snapshot(list(model.ep_success_buffer or [])),
        },
        "replay_buffer": None if replay_buffer is None else _buffer_state(replay_buffer),
    }


def load_model_state(model: BaseAlgorithm, state: dict[str, Any]) -> None:
    """Restore what :func:`model_state` returned (``state`` is used, not copied)."""
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
        elif _is_array_dict(value):
            state[key] = {k: snap(v) for k, v in value.items()}
        elif is_number(value):
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
            setattr(buffer, key, snapshot(saved))
