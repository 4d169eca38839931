"""Options of the Ray executor (``launcher=ray``, ``rlsweep=ray``): ``hydra.launcher.ray``.

Beside the executor rather than the plugin, and with its annotations evaluated (no
postponed annotations), for the reasons ``rlsweep/slurm_options.py`` gives: it is part of
the launcher's structured config. Light to import (no ``ray``): Hydra's plugin scan loads it.
"""

from dataclasses import dataclass, field
from typing import Any

from rlsweep.errors import ConfigError

# ray.init's arguments that rlsweep sets itself, or that would break what it promises.
_NOT_IN_INIT = {
    "address": "set hydra.launcher.ray.address",
    "ignore_reinit_error": "rlsweep connects once per process and keeps the connection",
}


@dataclass
class RayOptions:
    # The cluster: auto (the one RAY_ADDRESS names or `ray start` started on this machine,
    # else a local one started for this sweep), local (always a new local one), or an
    # existing cluster's address (host:port of its head node, or ray://host:port).
    address: str = "auto"
    # Any other ray.init argument, e.g. {runtime_env: {env_vars: {WANDB_MODE: offline}}} for
    # every job, or {num_cpus: 4} for a local cluster.
    init: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Refuse what cannot work, before anything is written."""
        if not isinstance(self.address, str) or not self.address.strip():
            raise ConfigError(
                "hydra.launcher.ray.address must be auto, local or a cluster's address "
                f"(host:port, ray://host:port); got {self.address!r}."
            )
        for key, why in _NOT_IN_INIT.items():
            if key in self.init:
                raise ConfigError(f"hydra.launcher.ray.init.{key} is not allowed: {why}.")
