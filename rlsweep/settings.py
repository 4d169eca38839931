"""What the sweeper's settings classes (``search.*``, ``compare.*``) share: a settings class
from its config node with unknown keys refused by name, its defaults as plain YAML values
(the sweeper plugin's config node), and the common range check; and the :class:`Objective`
of a trial, which the search (``search.objective``) and the launcher's replicates
(``hydra.launcher.objective``) both take. Light: the sweeper's plugin scan imports it
(OmegaConf is imported only when a node is converted)."""

from __future__ import annotations

from dataclasses import fields
from enum import Enum
from typing import Any, TypeVar

from rlsweep.errors import ConfigError

S = TypeVar("S")


class Objective(str, Enum):
    """How a trial's replicates reduce to its one number."""

    # Interquartile mean (the mean of the middle half; the mean below 4 replicates).
    iqm = "iqm"
    mean = "mean"
    # Mean minus one standard error: prefers trials that are good on every seed.
    lcb = "lcb"


def at_least(key: str, value: Any, low: int) -> None:
    """``value`` is None or an integer >= ``low``; else a ConfigError naming ``key``."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{key} must be an integer >= {low} (or null), got {value!r}")


def plain_defaults(cls: type) -> dict[str, Any]:
    """A settings class's defaults as plain YAML values (the sweeper's config node)."""
    return {
        f.name: (v.value if isinstance(v, Enum) else v)
        for f in fields(cls)
        for v in [getattr(cls(), f.name)]
    }


def settings_from(cls: type[S], node: Any, prefix: str) -> S:
    """``node`` (a DictConfig, a dict, None or already a ``cls``) as a ``cls``; a key
    ``cls`` has no field for is refused, naming ``prefix.key`` and the keys allowed."""
    if isinstance(node, cls):
        return node
    if node is None:
        return cls()
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if not isinstance(plain, dict):
        raise ConfigError(f"{prefix} must hold settings, got {plain!r}")
    allowed = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    for key in plain:
        if key not in allowed:
            raise ConfigError(
                f"Unknown config key '{prefix}.{key!s}'. Allowed keys in {prefix}: "
                f"{', '.join(allowed)}"
            )
    return cls(**{str(k): (v.value if isinstance(v, Enum) else v) for k, v in plain.items()})
