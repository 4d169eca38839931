"""rlsweep: declarative reinforcement-learning sweeps for Hydra.

The public API for user code (any Hydra app; see docs/apps.md, "The API"):

- :func:`task`: decorate a Hydra task function (under ``@hydra.main``) to make each run an
  rlsweep job: seeds from the job's identity, its own thread count, its result recorded.
  Bare or with declarations, the decorated function keeps its type for type checkers.
- :func:`current`: the running :class:`Job`: its ``seeds`` (:class:`Seeds`), ``directory``,
  ``log(step, **metrics)``.
- :class:`Keys`: which config keys are the replicate, the root, agent-side or ignored.
- :class:`Identity`: what a job is (its config values), for apps that compute it themselves.
- :class:`ConfigError`: raise it from a validator for a message without a traceback.

Importing ``rlsweep`` is cheap (Hydra imports its plugin in every app): the API's modules
load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlsweep.errors import ConfigError
    from rlsweep.identity import Identity, Keys
    from rlsweep.seeding import Seeds
    from rlsweep.task_api import Job, current, task

__version__ = "0.1.0"

_API = {
    "task": "rlsweep.task_api",
    "current": "rlsweep.task_api",
    "Job": "rlsweep.task_api",
    "Keys": "rlsweep.identity",
    "Identity": "rlsweep.identity",
    "Seeds": "rlsweep.seeding",
    "ConfigError": "rlsweep.errors",
}
__all__ = ["ConfigError", "Identity", "Job", "Keys", "Seeds", "current", "task"]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'rlsweep' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
