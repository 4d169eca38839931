"""The test sweeper of tests/apps/stream: a search stand-in that streams.

It reads a plan (the JSON file $STREAM_PLAN): the jobs to start, and the jobs each job
releases when it ends, by job name::

    {"start": [["name=a"], ...], "releases": {"a": [["name=b", "fail=true"], ...]}}

Every job is checked with the launcher's ``prepare`` (its own number) before it is handed
over, as rlsweep's Feeder does. After the launch it writes $STREAM_RECORD: each ``more``
call (job name, status, whether it came from the main thread, when), the names in release order,
and the launch's returns in order.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

ConfigStore.instance().store(
    group="hydra/sweeper",
    name="stream",
    node={"_target_": "hydra_plugins.stream_sweeper.StreamSweeper"},
    provider="rlsweep-tests",
)


def name_of(overrides: list[str]) -> str:
    return next(o.split("=", 1)[1] for o in overrides if o.startswith("name="))


class StreamSweeper(Sweeper):
    def __init__(self) -> None:
        self.launcher: Any = None
        self.next_idx = 0
        self.calls: list[dict[str, object]] = []
        self.released: list[str] = []

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def _prepared(self, jobs: list[list[str]]) -> list[list[str]]:
        for overrides in jobs:
            self.launcher.prepare([overrides], self.next_idx)
            self.next_idx += 1
        return jobs

    def sweep(self, arguments: list[str]) -> Any:
        plan = json.loads(Path(os.environ["STREAM_PLAN"]).read_text())
        releases: dict[str, list[list[str]]] = plan["releases"]

        def more(ret: JobReturn) -> list[list[str]]:
            name = name_of(list(ret.overrides or []))
            main = threading.current_thread() is threading.main_thread()
            call = {"name": name, "status": ret.status.name, "main_thread": main, "t": time.time()}
            self.calls.append(call)
            new = releases.pop(name, [])  # a second call for a job would release nothing
            self.released += [name_of(o) for o in new]
            return self._prepared(new)

        first = self._prepared(plan["start"])
        rets = self.launcher.launch_stream(first, 0, more)
        record = {
            "calls": self.calls,
            "released": self.released,
            "returns": [[name_of(list(r.overrides or [])), r.status.name] for r in rets],
        }
        Path(os.environ["STREAM_RECORD"]).write_text(json.dumps(record))
        return rets
