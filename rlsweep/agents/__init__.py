"""The reinforcement-learning algorithms and the registry that finds them by name.

The built-in agents' scope: MLP policies on vector observations. PPO and A2C train a
tanh MLP of (64, 64) for the policy and one for the value (a categorical,
diagonal-Gaussian or gSDE head), DQN a ReLU MLP of Q-values and ES a tanh MLP (both sized
by ``agent.net_arch``), on a Box observation space, flattened (not images: a Box of three
or more dimensions, or of two in uint8 pixels). Their forward and backward passes are
hand-written numpy, which on networks this small is several times faster than torch.
For anything else (a CNN on images, dict observations, a recurrent policy, another
activation, SAC or TD3) use the Stable-Baselines3 adapter (``agent=sb3_ppo``,
``sb3_a2c``, ``sb3_dqn``, with ``agent.algo`` and ``agent.policy=CnnPolicy`` or
``MultiInputPolicy``) or your own agent (``agent.name=<dotted module>``, see ``base``) or
app. Settings that ask a built-in agent for another network (``agent.policy``,
``policy_kwargs``, ``activation_fn``, ..., ``net_arch`` for PPO and A2C) and
observations it cannot read are refused by name before any job starts
(:func:`rlsweep.agents.configs.network_key_problem`, ``observation_problem``).

Module map (each file has one job):

- ``base``: the contract between the job and an algorithm (``Config``, ``build``, ``Agent``).
- ``configs``: the built-in algorithms' ``Config`` classes and the networks and observations
  they take, free of torch (for validation).
- ``networks``: the actor-critic network in numpy (categorical, diagonal-Gaussian or gSDE
  policy): its parameters and its one forward pass.
- ``gradients``: that forward for a gradient step, and its backward (no autograd).
- ``numpy_policy``: acting with the network (collection and evaluation).
- ``normalize``: running statistics for observation normalisation and reward scaling.
- ``episodes``: what the agents check of the job's vector env, and the raw episode returns
  they count under gymnasium's NEXT_STEP autoreset.
- ``rollout``: the rollout buffer, the collection loop and GAE (gymnasium NEXT_STEP autoreset).
- ``optim``: gradient steps on one flat parameter vector (Adam, RMSprop, grad-norm clipping).
- ``onpolicy``: the config fields and agent loop PPO and A2C share.
- ``ppo``, ``a2c``: each algorithm's config and update function.
- ``replay``: the replay buffer and the n-step return accumulator in front of it.
- ``dqn``: deep Q-learning (target network, epsilon-greedy, double Q, dueling, n-step).
- ``es``: an OpenAI-style evolution strategy, the population evaluated in the vector env.
- ``sb3``: any Stable-Baselines3 algorithm as an agent (a package; the ``sb3`` extra).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

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


def foreign_settings(node: dict[str, Any], allowed: Sequence[str]) -> str | None:
    """Why the agent settings ``node`` are another agent's, or None.

    ``agent.name=<agent>`` alone replaces the name in the agent config group the defaults
    chose (agent=ppo) and keeps that group's other settings, which the named agent's
    ``Config`` (fields ``allowed``) may not have. That is the case when ``node`` has keys
    outside ``allowed`` and every key of a shipped group of another agent.
    """
    name = str(node["name"])
    unknown = [str(key) for key in node if key not in allowed]
    groups = [
        group
        for group, (group_agent, keys) in _shipped_groups().items()
        if group_agent != name and keys <= node.keys()
    ]
    if not unknown or not groups:
        return None
    chosen = groups[0] if len(groups) == 1 else f"{', '.join(groups[:-1])} or {groups[-1]}"
    return (
        f"Unknown config key 'agent.{unknown[0]}' for agent.name={name!r}: agent.name alone "
        f"keeps the other settings of the agent config group chosen (agent={chosen}), and "
        f"{unknown[0]} is one of them. Another agent's settings need their own config group "
        "file: select a shipped agent with agent=<group>, and give an agent of your own a "
        "file conf/agent/<name>.yaml in a directory passed with --config-dir (as "
        "examples/mypkg/conf/agent/qlearning.yaml does), selected with agent=<name>. "
        f"Allowed keys in agent: {', '.join(allowed)}."
    )


@cache
def _shipped_groups() -> dict[str, tuple[str, frozenset[str]]]:
    """``(agent name, setting keys)`` of each shipped agent config group, by group."""
    from omegaconf import OmegaConf

    from rlsweep.paths import conf_dir

    out: dict[str, tuple[str, frozenset[str]]] = {}
    for path in sorted((conf_dir() / "agent").glob("*.yaml")):
        node = OmegaConf.to_container(OmegaConf.load(path))
        assert isinstance(node, dict), f"{path} is not a mapping"
        out[path.stem] = (str(node.get("name")), frozenset(str(key) for key in node))
    return out
