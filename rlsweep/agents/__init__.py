"""The reinforcement-learning algorithms and the registry that finds them by name.

Module map (each file has one job):

- ``base``: the contract between the job and an algorithm (``Config``, ``build``, ``Agent``).
- ``configs``: the built-in algorithms' ``Config`` classes, free of torch (for validation).
- ``networks``: the actor-critic network (categorical or diagonal-Gaussian policy).
- ``normalize``: running statistics for observation normalisation and reward scaling.
- ``rollout``: the rollout buffer, the collection loop and GAE (gymnasium NEXT_STEP autoreset).
- ``optim``: gradient steps on one flat parameter vector (Adam, RMSprop, grad-norm clipping).
- ``onpolicy``: the config fields and agent loop PPO and A2C share.
- ``ppo``, ``a2c``: each algorithm's config and update function.
- ``replay``: the replay buffer and the n-step return accumulator in front of it.
- ``dqn``: deep Q-learning (target network, epsilon-greedy, double Q, dueling, n-step).
- ``es``: an OpenAI-style evolution strategy, the population evaluated in the vector env.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlsweep.agents.base import AgentConfig

BUILTIN_AGENTS: tuple[str, ...] = ("ppo", "a2c", "dqn", "es", "sb3")


def load_agent_module(name: str) -> ModuleType:
    """The algorithm module for ``name``: a built-in short name, or a dotted module path."""
    if "." in name:
        return importlib.import_module(name)
    if name not in BUILTIN_AGENTS:
        raise ValueError(
            f"unknown agent {name!r}: built-in agents are {', '.join(BUILTIN_AGENTS)}; "
            "give a dotted module path (e.g. mypkg.my_agent) for your own"
        )
    return importlib.import_module(f"{__name__}.{name}")


def agent_settings(name: str) -> tuple[type[AgentConfig], frozenset[str]]:
    """``(Config, ACTION_SPACES)`` of the agent ``name``: a built-in agent's from
    :mod:`rlsweep.agents.configs` without importing the algorithm (nor torch), any other
    from its module."""
    from rlsweep.agents.configs import BUILTIN_SETTINGS

    if name in BUILTIN_SETTINGS:
        return BUILTIN_SETTINGS[name]
    module = load_agent_module(name)
    return module.Config, frozenset(module.ACTION_SPACES)
