"""Which trackers a job's config turns on, with their settings checked (in the sweep's
process, before any job starts, and again in the job)."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from rlsweep.errors import ConfigError
from rlsweep.trackers.base import TRACKER_NAMES

# The config key under which trackers are chosen: ``logger.<name>``.
KEY = "logger"


def backend(name: str) -> ModuleType:
    """The backend module of tracker ``name`` (importing it imports no tracker library)."""
    return importlib.import_module(f"rlsweep.trackers.{name}")


def of_config(cfg: Any) -> dict[str, Any]:
    """:func:`chosen` for a job's config (a DictConfig): the sweep's process calls it on
    every job before any starts, and the job to open its trackers."""
    # Asked of the keys first: a struct config's get() of an absent key raises and catches
    # an exception inside OmegaConf (0.15 ms a job, before the first job starts). keys(),
    # not ``in cfg``: a DictConfig's ``in`` resolves the value (``???`` would read as absent).
    node = cfg.get(KEY) if hasattr(cfg, "keys") and KEY in cfg.keys() else None  # noqa: SIM118
    if node is None:
        return {}
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    return chosen({KEY: plain})


def chosen(plain: Mapping[str, Any]) -> dict[str, Any]:
    """The trackers the job's config values ``plain`` turn on, name -> checked Settings;
    :class:`ConfigError` naming the key and what is allowed otherwise."""
    node = plain.get(KEY)
    if node is None:
        return {}
    if not isinstance(node, Mapping):
        raise ConfigError(
            f"'{KEY}' must hold tracker settings (choose logger=<name> or "
            f"logger=[<name>,...] with names {', '.join(TRACKER_NAMES)}), got {node!r}"
        )
    out: dict[str, Any] = {}
    for name, values in node.items():
        if name not in TRACKER_NAMES:
            raise ConfigError(
                f"Unknown tracker '{KEY}.{name}': rlsweep's trackers are "
                f"{', '.join(TRACKER_NAMES)} (choose them with logger=[<name>,...])."
            )
        cls = backend(str(name)).Settings
        allowed = [f.name for f in dataclasses.fields(cls)]
        values = dict(values or {})
        for key in values:
            if key not in allowed:
                raise ConfigError(
                    f"Unknown config key '{KEY}.{name}.{key}'. Allowed keys in {KEY}.{name}: "
                    f"{', '.join(allowed)}."
                )
        try:
            out[str(name)] = cls(**values)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"Invalid {KEY}.{name}: {exc}") from None
    return out
