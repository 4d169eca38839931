"""The launcher's work: check and validate a batch's jobs, then hand them to an executor.

:class:`Launch` is what rlsweep's Hydra launcher plugin holds; it translates nothing
Hydra-specific beyond Hydra's own types, and knows no agent or app.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from hydra.core.utils import JobReturn, configure_log, filter_overrides, setup_globals
from omegaconf import DictConfig

from rlsweep.executors.base import Runner
from rlsweep.identity import hydra_ignored_keys
from rlsweep.launch.jobs import Job, LaunchContext
from rlsweep.launch.options import LauncherOptions, available_cores
from rlsweep.launch.worker import exit_without_collecting
from rlsweep.progress import Progress
from rlsweep.task import TaskHooks, hooks_of
from rlsweep.trackers.settings import of_config as tracker_settings

log = logging.getLogger(__name__)

# How each executor runs a batch, for the launch message.
_HOW = {
    "serial": "serially, in-process",
    "slurm": "as a SLURM job array",
    "submitit_local": "with submitit's local executor",
}


def runner(executor: str) -> Runner:
    """The executor that ``hydra.launcher.executor`` names (its module imported now)."""
    if executor == "serial":
        from rlsweep.executors.serial import run_serial

        return run_serial
    if executor in ("slurm", "submitit_local"):
        from rlsweep.executors.submitit import run_submitit

        return run_submitit
    from rlsweep.executors.pool import run_pool

    return run_pool


@dataclass
class Launch:
    """A launcher's state between Hydra's ``setup`` and its ``launch`` calls."""

    context: LaunchContext
    options: LauncherOptions
    # Jobs checked and validated ahead of launch() (by rlsweep's sweeper), by the job's
    # overrides (unique within a sweep).
    prepared: dict[tuple[str, ...], Job] = field(default_factory=dict)

    def check(self) -> None:
        """What the launch's config must allow, refused before anything is written."""
        if self.options.backend == "threading" and self.options.executor == "joblib":
            from rlsweep.executors.pool import check_threading

            check_threading(self.context.config)

    def prepare(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> None:
        """Check every job of the batch in the parent, before any starts: its overrides
        apply, the task's validator accepts its values, and its identity is known. Jobs
        are composed where they run."""
        self.check()
        hooks = hooks_of(self.context.task_function) or TaskHooks()
        ignored = hydra_ignored_keys(self.context.config)
        for i, overrides in enumerate(job_overrides):
            recipe, keys = self.context.composer.plan(overrides)
            if hooks.validate is not None:
                hooks.validate(keys)
            tracker_settings(keys)  # checks logger.* of any app, naming a wrong key
            key = tuple(overrides)
            self.prepared[key] = Job(
                initial_job_idx + i, key, recipe, hooks.identify(keys, ignored)
            )

    def job_keys(self, overrides: Sequence[str]) -> DictConfig:
        """A job's own keys (its config without ``hydra``), every override applied."""
        return self.context.composer.plan(overrides)[1]

    def take_jobs(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Job]:
        """The batch's jobs: prepared ahead (keeping their number in the whole grid, when
        rlsweep's sweeper skips completed jobs) or checked now."""
        keys = [tuple(o) for o in job_overrides]
        for i, key in enumerate(keys):
            if key not in self.prepared:
                self.prepare([job_overrides[i]], initial_job_idx + i)
        return [self.prepared.pop(key) for key in keys]

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> list[JobReturn]:
        """Run a batch of jobs; one JobReturn per job, in input order."""
        setup_globals()
        exit_without_collecting()  # this process's exit, after the report's imports
        config = self.context.config
        configure_log(config.hydra.hydra_logging, config.hydra.verbose)
        jobs = self.take_jobs(job_overrides, initial_job_idx)
        options = self.options.for_threads(max((j.identity.threads for j in jobs), default=1))
        self.context.sweep_dir.mkdir(parents=True, exist_ok=True)
        _announce(options, jobs, self.context)
        progress = Progress(total=len(jobs), enabled=options.progress)
        try:
            return runner(options.executor)(self.context, options, jobs, progress)
        finally:
            progress.close()


def _announce(options: LauncherOptions, jobs: list[Job], context: LaunchContext) -> None:
    """Say how the batch runs, and warn when its jobs oversubscribe the cores."""
    how = _HOW.get(options.executor, f"with {options.backend} on {options.n_jobs} workers")
    threads = "" if options.submitit else f" ({options.threads_per_job} threads per job)"
    count = f"{len(jobs)} job{'s' if len(jobs) != 1 else ''}"
    log.info(f"rlsweep launching {count} {how}{threads}; sweep dir: {context.sweep_dir}")
    if len(jobs) <= 32:
        for job in jobs:
            log.info(f"\t#{job.idx} : {' '.join(filter_overrides(job.overrides))}")
    cores = available_cores()
    if not options.submitit and options.n_jobs * options.threads_per_job > cores:
        log.warning(
            f"{options.n_jobs} jobs at once with {options.threads_per_job} threads each "
            f"oversubscribe the {cores} cores (results are unaffected): "
            "leave n_jobs unset to run as many jobs as fit"
        )
