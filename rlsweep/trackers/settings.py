"""Which trackers a job turns on, with their settings checked (in the sweep's process,
before any job starts, and again in the job).

Trackers are rlsweep's settings, never an app's keys: any app chooses them under Hydra's
launcher node, ``hydra.launcher.trackers`` (``rlsweep/trackers=[tensorboard,wandb]`` on the
command line, ``hydra.launcher.trackers.wandb.mode=online`` for a setting). The built-in app
keeps its short alias, the ``logger`` group of its own config, which its YAML points the
launcher's node at."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from rlsweep.errors import ConfigError
from rlsweep.trackers.base import TRACKER_NAMES

# The built-in app's key for its trackers (``logger=[tensorboard,wandb]``).
KEY = "logger"
# Where any app's trackers are, in its full config: ``hydra.launcher.trackers.<name>``.
LAUNCHER_KEY = "hydra.launcher.trackers"
# The config group that turns them on for any app (``rlsweep/trackers=[tensorboard]``).
GROUP = "rlsweep/trackers"
# One tracker's settings alone (its Settings), for an app that aliases them under a key of
# its own: the built-in app's conf/logger/<name>.yaml puts them at logger.<name>.
SETTINGS_GROUP = "rlsweep/tracker"


def backend(name: str) -> ModuleType:
    """The backend module of tracker ``name`` (importing it imports no tracker library)."""
    return importlib.import_module(f"rlsweep.trackers.{name}")


def of_job() -> dict[str, Any]:
    """The running job's trackers (``hydra.launcher.trackers`` of the job's config, as
    Hydra installed it), name -> checked Settings; none outside a Hydra job."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return {}
    from omegaconf import OmegaConf

    hydra: Any = HydraConfig.get()
    return of_node(OmegaConf.select(hydra, "launcher.trackers", default=None))


def of_node(node: Any, where: str = LAUNCHER_KEY) -> dict[str, Any]:
    """:func:`settings_at` for a config node (a DictConfig, plain data or None)."""
    if node is None:
        return {}
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    return settings_at(plain, where)


def chosen(plain: Mapping[str, Any]) -> dict[str, Any]:
    """The trackers the built-in app's config values ``plain`` turn on (its ``logger``)."""
    return settings_at(plain.get(KEY), KEY)


def _choose(where: str) -> str:
    """How to choose trackers, for messages about the node at ``where``."""
    if where == KEY:
        return "choose them with logger=[<name>,...]"
    return f"choose them with {GROUP}=[<name>,...]"


def settings_at(node: Any, where: str) -> dict[str, Any]:
    """The trackers a node of tracker settings (``{name: {setting: value}}``) turns on,
    name -> checked Settings; :class:`ConfigError` naming the key (``where``) and what is
    allowed otherwise."""
    if node is None:
        return {}
    if not isinstance(node, Mapping):
        raise ConfigError(
            f"'{where}' must hold tracker settings ({_choose(where)} with names "
            f"{', '.join(TRACKER_NAMES)}), got {node!r}"
        )
    out: dict[str, Any] = {}
    for name, values in node.items():
        if name not in TRACKER_NAMES:
            raise ConfigError(
                f"Unknown tracker '{where}.{name}': rlsweep's trackers are "
                f"{', '.join(TRACKER_NAMES)} ({_choose(where)})."
            )
        cls = backend(str(name)).Settings
        allowed = [f.name for f in dataclasses.fields(cls)]
        values = dict(values or {})
        for key in values:
            if key not in allowed:
                raise ConfigError(
                    f"Unknown config key '{where}.{name}.{key}'. Allowed keys in "
                    f"{where}.{name}: {', '.join(allowed)}."
                )
        try:
            out[str(name)] = cls(**values)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"Invalid {where}.{name}: {exc}") from None
    return out
