"""Sweeps whose next jobs depend on earlier results (a search, a comparison): a
:class:`Driver` says which jobs can start, and :class:`Feeder` runs them through the launcher,
skipping every job a previous run of the same command completed.

A driver must be a pure function of the results it was given, in its own order (never of the
order jobs finish in, nor of which jobs were found complete): then the same command proposes
the same jobs on any launcher, with any number of workers, and after a resume.

With a launcher that streams (rlsweep's: ``launch_stream``), a job the driver releases starts
as soon as a worker is free; with any other launcher, the released jobs run as the next batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hydra.core.override_parser.types import Override
from hydra.core.utils import JobReturn
from omegaconf import DictConfig

from rlsweep.errors import ConfigError
from rlsweep.sweep.plan import Planner, sweep_level_keys

# A job a driver releases: its number in the sweep (stable: the driver's own numbering)
# and its overrides.
Release = tuple[int, list[str]]


class Driver(Protocol):
    """What a search or a comparison gives the sweep."""

    def start(self) -> list[Release]:
        """The jobs that can run before any result is known."""
        ...

    def done(self, ret: JobReturn) -> list[Release]:
        """A job of :meth:`start` or of an earlier :meth:`done` ended (completed now, found
        completed by an earlier run, or failed): the jobs that can run now. Called once per
        released job, in whatever order jobs end."""
        ...

    def finish(self, sweep_dir: Path) -> None:
        """Every released job ended and nothing more is released: record the outcome (a
        file in the sweep directory) and say it."""
        ...


def split_overrides(
    overrides: Sequence[Override], config: DictConfig, replicate: str, chooses: str
) -> tuple[list[str], list[Override]]:
    """A search's or comparison's command-line overrides as ``(fixed, swept)``: ``fixed``
    go to every job, except the app's aliases of the sweeper's own settings
    (``search.trials=16`` when ``hydra.sweeper.search`` is ``${search}``), so that a job is
    the very job a plain grid runs; ``swept`` are the sweeps. A key given twice keeps its
    last value, as on Hydra's command line. Setting ``replicate`` (the seed key) is refused
    with a ConfigError saying how the mode ``chooses`` the replicates instead."""
    aliases = sweep_level_keys(config)
    kept: dict[str, Override] = {}
    for o in overrides:
        key = o.key_or_group
        if key == replicate:
            raise ConfigError(
                f"'{o.input_line}' sets the replicate key '{key}', which {chooses}. "
                f"Leave '{key}' out."
            )
        if "." in key and key.split(".", 1)[0] in aliases:
            continue
        kept.pop(o.get_key_element(), None)
        kept[o.get_key_element()] = o
    fixed = [
        f"{element}={o.get_value_element_as_str()}"
        for element, o in kept.items()
        if not o.is_sweep_override()
    ]
    return fixed, [o for o in kept.values() if o.is_sweep_override()]


@dataclass
class Feeder:
    """Runs a driver's jobs through Hydra's launcher until it releases no more."""

    launcher: Any
    driver: Driver
    # Decides, from a job's directory, whether it runs or was already completed.
    planner: Planner
    # The JobReturns of the jobs run, and of the jobs found completed (skipped).
    returns: list[JobReturn] = field(default_factory=list)
    skipped: list[JobReturn] = field(default_factory=list)

    def run(self) -> None:
        """Run the driver's jobs until it releases no more (:attr:`returns`,
        :attr:`skipped`)."""
        ready = self._admit(self.driver.start())
        stream: Callable[..., Sequence[JobReturn]] | None = getattr(
            self.launcher, "launch_stream", None
        )
        while ready:
            first = min(idx for idx, _ in ready)
            jobs = [overrides for _, overrides in ready]
            ready = []
            if stream is not None:
                self.returns += stream(jobs, first, self._more)
                continue
            # Any other launcher: the released jobs run as the next batch.
            rets = list(self.launcher.launch(jobs, initial_job_idx=first))
            self.returns += rets
            for ret in rets:
                ready += self._admit(self.driver.done(ret))

    def _more(self, ret: JobReturn) -> list[list[str]]:
        """The streaming launcher's callback: a job ended; the jobs to start now."""
        return [overrides for _, overrides in self._admit(self.driver.done(ret))]

    def _admit(self, releases: list[Release]) -> list[Release]:
        """Check released jobs; a job already completed is given to the driver at once
        (which may release more). Returns the jobs to run."""
        to_run: list[Release] = []
        queue = list(releases)
        while queue:
            idx, overrides = queue.pop(0)
            prepare = getattr(self.launcher, "prepare", None)
            if prepare is not None:
                prepare([overrides], idx)
            plan = self.planner.plan([[overrides]])
            if plan.running:
                to_run.append((idx, overrides))
            for done in plan.skipped:
                self.skipped.append(done)
                queue += self.driver.done(done)
        return to_run
