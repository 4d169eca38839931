"""``RLSWEEP_TRACE=<file>``: every process of a sweep appends ``<unix time> <pid> <event>``
lines to ``<file>`` (what ``bench/overhead.py`` and the overhead tests read). Unset, nothing
is written: each call is one comparison.

Events: ``worker-init`` (a worker process starts), ``install`` (a worker installs a
launch's Hydra state), ``task-start`` / ``task-end`` (the task function is entered / left,
in whatever process runs the job), ``summary-start`` / ``summary-end`` (the end-of-sweep
hook), ``preload-end`` (the report's modules imported ahead), ``sweep-end``.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any

# Read once, when the process imports rlsweep's engine (workers inherit the variable).
PATH = os.environ.get("RLSWEEP_TRACE") or None


def event(name: str) -> None:
    """Append one line (one short write in append mode: lines of processes never mix)."""
    if PATH is None:
        return
    with open(PATH, "a") as f:
        f.write(f"{time.time():.6f} {os.getpid()} {name}\n")


def traced(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``function`` with ``task-start`` / ``task-end`` events around it (itself if unset)."""
    if PATH is None:
        return function

    @functools.wraps(function)
    def wrapper(cfg: Any) -> Any:
        event("task-start")
        try:
            return function(cfg)
        finally:
            event("task-end")

    return wrapper
