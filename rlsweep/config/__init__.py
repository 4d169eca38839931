"""Typed job configuration, validated up front with messages that name the key.

Hydra composes plain YAML; :func:`load_job_config` checks it against the dataclasses
of :mod:`rlsweep.config.sections` (and the agent's own ``Config``), so that a wrong type, an out-of-range value, a
misspelled key, an unknown gymnasium id (or ``module:id`` whose module does not import),
an env registered only in the launching script, an agent that cannot act in an env, or a
network a built-in agent does not have (another policy, image observations) is
reported before any job starts, as one paragraph naming the key and what is allowed.
The checks of ``env.id`` are in :mod:`rlsweep.config.env_ids`.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from rlsweep.config.env_ids import (
    available_groups,
    check_env_id,
    env_action_kind,
    env_spaces,
    env_spec,
    split_env_id,
)
from rlsweep.config.sections import (
    VECTORIZATION_MODES,
    EnvConfig,
    EvalConfig,
    JobConfig,
    SeedingConfig,
    TrainConfig,
)
from rlsweep.errors import ConfigError

__all__ = [
    "VECTORIZATION_MODES",
    "EnvConfig",
    "EvalConfig",
    "JobConfig",
    "SeedingConfig",
    "TrainConfig",
    "available_groups",
    "check_env_id",
    "env_spec",
    "load_job_config",
    "split_env_id",
]

_SECTIONS: dict[str, type[Any]] = {
    "env": EnvConfig,
    "train": TrainConfig,
    "eval": EvalConfig,
    "seeding": SeedingConfig,
}
_TOP_LEVEL = ("seed", "name", "n_jobs", "rerun", "report", "torch_threads")
# Checked elsewhere: the agent by its own Config, logger.* (the trackers) by the launcher and
# the job, search.* and compare.* (the sweeper's settings) by the sweeper, numerics (the
# launcher's, in every job's identity) by the launcher.
_SWEEP_NODES = ("agent", "logger", "search", "compare", "numerics")


def _fields(cls: type[Any]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _unknown_key(path: str, key: str, allowed: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    where = f"{path}.{key}" if path else key
    return ConfigError(
        f"Unknown config key '{where}'.{hint} Allowed keys"
        f"{' in ' + path if path else ''}: {', '.join(allowed)}."
    )


# Validated sections by (path, schema, the section's plain data): a grid's jobs mostly
# share their sections (a seed sweep shares all of them), and merging a section into its
# schema costs milliseconds, so a sweep of many jobs validates each distinct one once.
_TYPED_CACHE: dict[tuple[str, type[Any], str], Any] = {}
_TYPED_CACHE_MAX = 4096


def _typed(path: str, cls: type[Any], node: Any) -> Any:
    """``node`` (plain data) checked against the schema ``cls``, as a fresh dataclass."""
    if not isinstance(node, dict):
        raise ConfigError(f"'{path}' must be a mapping of settings, got {node!r}.")
    key = (path, cls, json.dumps(node, sort_keys=True, default=repr))
    typed = _TYPED_CACHE.get(key)
    if typed is None:
        typed = _build_typed(path, cls, node)
        if len(_TYPED_CACHE) >= _TYPED_CACHE_MAX:
            _TYPED_CACHE.clear()
        _TYPED_CACHE[key] = typed
    return copy.deepcopy(typed)


def _build_typed(path: str, cls: type[Any], node: dict[str, Any]) -> Any:
    """Merge ``node`` into the schema ``cls`` and build the dataclass, explaining failures."""
    allowed = _fields(cls)
    for key in node:
        if key not in allowed:
            raise _unknown_key(path, str(key), allowed)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(cls), node)
        return OmegaConf.to_object(merged)
    except ValidationError as exc:
        key = f"{path}.{exc.key}" if exc.key is not None else path
        ftype = next((f.type for f in dataclasses.fields(cls) if f.name == exc.key), "?")
        raise ConfigError(
            f"Invalid value for '{key}': {str(exc.msg).splitlines()[0]}. Expected type: {ftype}."
        ) from None
    except ConfigKeyError as exc:
        raise _unknown_key(path, str(exc.key), allowed) from None
    except ValueError as exc:
        raise ConfigError(f"Invalid value in '{path}': {path}.{exc}") from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"Invalid '{path}' settings: {exc}") from None


def _resolved_task_config(cfg: DictConfig) -> dict[str, Any]:
    """The job's own keys (not ``hydra``) as plain data, every interpolation resolved."""
    out: dict[str, Any] = {}
    for key in cfg:
        if key == "hydra":
            continue
        node = cfg._get_node(key)
        out[str(key)] = (
            OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else cfg[key]
        )
    return out


def load_job_config(cfg: DictConfig) -> JobConfig:
    """Validate a composed job config and return it typed; raise ConfigError otherwise."""
    from rlsweep.agents import agent_settings, foreign_settings
    from rlsweep.agents.configs import network_key_problem, observation_problem

    try:
        plain = _resolved_task_config(cfg)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"Could not resolve the config: {exc}") from None
    for key in plain:
        if key not in (*_SECTIONS, *_SWEEP_NODES, *_TOP_LEVEL):
            raise _unknown_key("", str(key), sorted((*_SECTIONS, *_SWEEP_NODES, *_TOP_LEVEL)))
    # logger.* (the trackers) is checked for every app by the launcher and the job.
    agent_node = plain.get("agent")
    if not isinstance(agent_node, dict) or "name" not in agent_node:
        raise ConfigError(
            f"'agent' must be an agent config with a 'name'; choose agent=<one of "
            f"{', '.join(available_groups('agent'))}>."
        )
    try:
        agent_config, action_spaces = agent_settings(str(agent_node["name"]))
    except ValueError as exc:
        raise ConfigError(f"Invalid agent.name: {exc}") from None
    foreign = foreign_settings(agent_node, _fields(agent_config))
    if foreign is not None:
        raise ConfigError(foreign)
    network = network_key_problem(str(agent_node["name"]), agent_node)
    if network is not None:
        raise ConfigError(network)
    agent = _typed("agent", agent_config, agent_node)
    sections = {name: _typed(name, cls, plain.get(name, {})) for name, cls in _SECTIONS.items()}
    top = {k: plain[k] for k in _TOP_LEVEL if k in plain}
    try:
        job = JobConfig(agent=agent, **sections, **top)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"Invalid top-level setting: {exc}") from None
    check_env_id(job.env.id)
    kind = env_action_kind(job.env.id)
    if kind not in action_spaces:
        raise ConfigError(
            f"agent '{agent.name}' supports {' and '.join(sorted(action_spaces))} "
            f"action spaces, but env.id={job.env.id!r} has a {kind} action space. "
            "Pick another agent or env."
        )
    observations = observation_problem(agent.name, env_spaces(job.env.id)[0])
    if observations is not None:
        raise ConfigError(f"Invalid env.id={job.env.id!r} for agent.name: {observations}")
    return job
