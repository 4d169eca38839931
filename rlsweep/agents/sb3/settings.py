"""The adapter's settings: its ``Config``, and the SB3 classes and constructor arguments
they name (checked when the config is validated, before any job starts)."""

from __future__ import annotations

import copy
import difflib
import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlsweep.agents.base import AgentConfig
from rlsweep.agents.sb3.extra import BaseAlgorithm, NormalActionNoise, stable_baselines3

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


def constructor_kwargs(
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
