"""The launcher's work: check and validate a batch's jobs, then hand them to an executor.

:class:`Launch` is what rlsweep's Hydra launcher plugin holds; it translates nothing
Hydra-specific beyond Hydra's own types, and knows no agent or app. A streaming launch
(``more``) runs the jobs a search releases as earlier ones end, in the same launch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hydra.core.utils import JobReturn, configure_log, filter_overrides, setup_globals
from omegaconf import DictConfig, OmegaConf

from rlsweep.errors import ConfigError, RLSweepError
from rlsweep.executors.base import Runner
from rlsweep.gpus import share_text
from rlsweep.identity import hydra_ignored_keys
from rlsweep.launch.compose import Naming
from rlsweep.launch.jobs import LaunchContext, SweepJob
from rlsweep.launch.options import LauncherOptions, available_cores
from rlsweep.launch.worker import exit_without_collecting
from rlsweep.numerics import PORTABLE_ENV, unpinned_because
from rlsweep.progress import Progress
from rlsweep.store import job_status
from rlsweep.task_api import TaskHooks, hooks_of
from rlsweep.trace import event

log = logging.getLogger(__name__)

# A streaming launch's callback, as the launcher's caller gives it: a job's final JobReturn
# in; the overrides of the jobs to run now out (each checked by ``Launch.prepare`` first).
MoreOverrides = Callable[[JobReturn], Sequence[Sequence[str]]]

# A batch of at least this many jobs starts the pool's workers as soon as its first job is
# checked, so that they boot (Python, the app's imports, Hydra's state) while this process
# checks the rest: about 0.35 ms a job here, against about 1 s for two workers to boot.
EARLY_WORKERS_FROM = 256

# How each executor runs a batch, for the launch message.
_HOW = {
    "serial": "serially, in-process",
    "slurm": "as a SLURM job array",
    "submitit_local": "with submitit's local executor",
    "ray": "on a Ray cluster, one task per job",
}


def runner(executor: str) -> Runner:
    """The executor that ``hydra.launcher.executor`` names (its module imported now)."""
    if executor == "serial":
        from rlsweep.executors.serial import run_serial

        return run_serial
    if executor in ("slurm", "submitit_local"):
        from rlsweep.executors.submitit import run_submitit

        return run_submitit
    if executor == "ray":
        from rlsweep.executors.ray import run_ray

        return run_ray
    from rlsweep.executors.pool import run_pool

    return run_pool


@dataclass
class Launch:
    """A launcher's state between Hydra's ``setup`` and its ``launch`` calls."""

    context: LaunchContext
    options: LauncherOptions
    # Jobs checked and validated ahead of launch() (by rlsweep's sweeper), by the job's
    # overrides (unique within a sweep).
    prepared: dict[tuple[str, ...], SweepJob] = field(default_factory=dict)
    # Whether this launch has started its pool's workers ahead of its first batch.
    workers_started: bool = False
    # The overrides of each job identity checked so far (no two jobs share one), and the
    # first two jobs found with one identity (refused by refuse_twins).
    identities: dict[str, tuple[str, ...]] = field(default_factory=dict)
    twins: list[tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)

    @property
    def hooks(self) -> TaskHooks:
        """The task's declarations, with the keys named in ``hydra.launcher.identity``."""
        hooks = hooks_of(self.context.task_function) or TaskHooks()
        return hooks.configured(self.context.config.hydra, self.context.task_function)

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
        hooks = self.hooks
        ignored = hydra_ignored_keys(self.context.config)
        stop_workers: Callable[[], None] | None = None
        try:
            for i, overrides in enumerate(job_overrides):
                recipe, keys = self.context.composer.plan(overrides)
                if hooks.validate is not None:  # (the task's own message first)
                    hooks.validate(keys)
                _check_replicate(hooks.keys.replicate, overrides, keys)
                key = tuple(overrides)
                identity = hooks.identify(keys, ignored, recipe.choices)
                job = SweepJob(initial_job_idx + i, key, recipe, identity)
                self._find_twin(job)
                self.prepared[key] = job
                if i == 0 and len(job_overrides) >= EARLY_WORKERS_FROM:
                    stop_workers = self._start_workers(job, len(job_overrides))
        except BaseException:
            if stop_workers is not None:  # a refused sweep does not wait for booting workers
                stop_workers()
            raise
        event("jobs-checked")

    def _find_twin(self, job: SweepJob) -> None:
        """Note a job that is the same job as one checked before (see refuse_twins)."""
        twin = self.identities.setdefault(job.identity.digest, job.overrides)
        if twin != job.overrides and not self.twins:
            self.twins.append((twin, job.overrides))

    def refuse_twins(self) -> None:
        """Two jobs of one launch are never the same job: they would share their seeds and
        one result (a job released again by a search, with the same overrides, is one job).
        Raised before any job of theirs runs (rlsweep's sweeper asks once it has refused
        what it refuses first: a sweep over the launcher, whose jobs are twins too)."""
        if not self.twins:
            return
        first, second = self.twins[0]
        raise ConfigError(
            f"Two jobs of this sweep are the same job (the same identity: the same config "
            f"values and group choices): ({' '.join(first)}) and ({' '.join(second)}). "
            "They would run with the same seeds and share one result. The keys they differ in "
            "do not make a job (hydra.launcher.identity.ignore, or Hydra's exclude_keys); "
            "sweep a key that changes what the job computes, or stop ignoring it."
        )

    def _start_workers(self, first: SweepJob, jobs: int) -> Callable[[], None] | None:
        """Start the pool's workers now (how to stop them), or None: when jobs do not run
        on loky's reusable pool (the one pool that outlives this call), when this launch
        started them already, or when the first job is complete (a resume, which may run
        no job at all). Their thread count is the first job's; a launch whose jobs need
        another starts its pool again, so no job runs with other threads than its own."""
        options = self.options
        if self.workers_started or (options.executor, options.backend) != ("joblib", "loky"):
            return None
        if options.devices:  # each GPU lane starts its own workers, at its first job
            return None
        if job_status(first.directory) == "completed":
            return None
        self.workers_started = True
        from rlsweep.executors.pool import start_workers

        return start_workers(self.context, options.for_threads(first.identity.threads), jobs)

    def name_jobs_by(self, keys: Sequence[str]) -> None:
        """Name each job's directory by the values of ``keys`` (the keys the sweep varies),
        the replicate key last, and by the config groups its command line chooses."""
        hooks = self.hooks
        composer = self.context.composer
        composer.name_keys = frozenset(keys)
        composer.naming = Naming(hooks.keys.replicate, hooks.identity is None, hooks.keys.ignore)

    def job_keys(self, overrides: Sequence[str]) -> DictConfig:
        """A job's own keys (its config without ``hydra``), every override applied."""
        return self.context.composer.plan(overrides)[1]

    def take_jobs(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> list[SweepJob]:
        """The batch's jobs: prepared ahead (keeping their number in the whole grid, when
        rlsweep's sweeper skips completed jobs) or checked now."""
        keys = [tuple(o) for o in job_overrides]
        for i, key in enumerate(keys):
            if key not in self.prepared:
                self.prepare([job_overrides[i]], initial_job_idx + i)
        self.refuse_twins()
        return [self.prepared.pop(key) for key in keys]

    def launch(
        self,
        job_overrides: Sequence[Sequence[str]],
        initial_job_idx: int,
        more: MoreOverrides | None = None,
    ) -> list[JobReturn]:
        """Run a batch of jobs; one JobReturn per job, in input order. With ``more``, the
        launch streams: ``more`` is called once per job with its final JobReturn, and the
        jobs it returns run in this launch as soon as a worker is free; their returns
        follow the batch's, in release order."""
        setup_globals()
        exit_without_collecting()  # this process's exit, after the report's imports
        config = self.context.config
        configure_log(config.hydra.hydra_logging, config.hydra.verbose)
        jobs = self.take_jobs(job_overrides, initial_job_idx)
        options = self.options.for_threads(max((j.identity.threads for j in jobs), default=1))
        self.context.sweep_dir.mkdir(parents=True, exist_ok=True)
        options = self._where_pinned(options)
        if more is None and options.forks_single_job(len(jobs)):
            options = options.single_job_fork()  # no fresh worker to import the app again
        _announce(options, jobs, self.context, streaming=more is not None)
        progress = Progress(total=len(jobs), enabled=options.progress)
        release = None if more is None else Releases(self, more, progress, options, jobs)
        try:
            return runner(options.executor)(self.context, options, jobs, progress, release)
        finally:
            progress.close()

    @staticmethod
    def _where_pinned(options: LauncherOptions) -> LauncherOptions:
        """The options that run the jobs where their numerics hold: jobs that would run in
        this process (serial, threads) go to fresh worker processes when it cannot run
        them (it loaded numpy with other kernels than numerics=portable pins)."""
        in_process = options.executor == "serial" or (
            options.executor == "joblib" and options.backend == "threading"
        )
        why = unpinned_because(options.numerics) if in_process else None
        if why is None:
            return options
        log.warning(
            f"numerics={options.numerics}: {why}; so the jobs run in fresh worker processes "
            "(start the command with the variables set to run them in this one: "
            f"{' '.join(f'{k}={v!r}' for k, v in PORTABLE_ENV.items())})"
        )
        return options.in_workers()


class Releases:
    """A streaming launch's callback as executors call it: a job and its final JobReturn
    in, the released jobs (prepared ones taken, with their own numbers) out."""

    def __init__(
        self,
        launch: Launch,
        more: MoreOverrides,
        progress: Progress,
        options: LauncherOptions,
        jobs: list[SweepJob],
    ) -> None:
        self.launch, self.more, self.progress, self.options = launch, more, progress, options
        self.live = {job.overrides for job in jobs}  # queued or running in this launch
        # The number a released job gets if it was not prepared with its own.
        self.next_idx = max((job.idx + 1 for job in jobs), default=0)
        self.warned = False

    def __call__(self, job: SweepJob, ret: JobReturn) -> list[SweepJob]:
        self.live.discard(job.overrides)
        released = [tuple(o) for o in self.more(ret)]
        for overrides in released:
            if overrides in self.live:
                raise RLSweepError(
                    f"the sweep released job ({' '.join(overrides)}) while the same job is "
                    "still queued or running in this launch: both would write one directory. "
                    "A search must release a job again only after it ended."
                )
            self.live.add(overrides)
        jobs = self.launch.take_jobs(released, self.next_idx)
        self.next_idx = max([self.next_idx, *(j.idx + 1 for j in jobs)])
        self.progress.grow(len(jobs))
        for new in jobs:
            log.debug(f"released #{new.idx} : {' '.join(filter_overrides(new.overrides))}")
            self._check_threads(new)
        return jobs

    def _check_threads(self, job: SweepJob) -> None:
        """Workers were sized for the first jobs' threads: say once if a released job needs
        more (it still runs with its own thread count, so its numbers are unchanged)."""
        threads = job.identity.threads
        if threads <= self.options.threads_per_job or self.warned:
            return
        self.warned = True
        log.warning(
            f"released job #{job.idx} runs {threads} threads but this launch's workers were "
            f"sized for {self.options.threads_per_job}: the cores are oversubscribed "
            "(results are unaffected); give every job of a search the same thread count."
        )


def _check_replicate(key: str | None, overrides: Sequence[str], keys: DictConfig) -> None:
    """A replicate index the command line sets is an integer >= 0 (``seed=range(8)``): a
    negative or fractional one would be recorded as replicate 0 of every job (the app's own
    default there, such as ``seed: -1``, is only a value)."""
    if key is None or not any(o.lstrip("+~").split("=", 1)[0] == key for o in overrides):
        return
    value = OmegaConf.select(keys, key, default=None)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return
    raise ConfigError(
        f"The replicate key '{key}' is {value!r} in job ({' '.join(overrides)}): a replicate "
        f"is an index, an integer >= 0 (sweep '{key}=range(8)'; rlsweep derives each job's own "
        "seed from it). If the app reads this key as an RNG seed of its own, it keeps it: the "
        "job's seeds come from the index."
    )


def _announce(
    options: LauncherOptions, jobs: list[SweepJob], context: LaunchContext, *, streaming: bool
) -> None:
    """Say how the batch runs, and warn when its jobs oversubscribe the cores."""
    how = _HOW.get(options.executor, f"with {options.backend} on {options.workers} workers")
    if (options.backend, options.start_method) == ("multiprocessing", "fork"):
        how = f"in {options.workers} worker(s) forked from this process"
    threads = "" if options.submitit else f" ({options.threads_per_job} threads per job)"
    if options.gpu_share:
        threads += f", {share_text(options.gpu_share)} per job"
        if options.devices:
            threads += f" on GPUs {','.join(options.devices)}"
    count = f"{len(jobs)} job{'s' if len(jobs) != 1 else ''}"
    more = ", then the jobs the sweep releases as jobs end" if streaming else ""
    log.info(f"rlsweep launching {count} {how}{threads}{more}; sweep dir: {context.sweep_dir}")
    if len(jobs) <= 32:
        for job in jobs:
            log.info(f"\t#{job.idx} : {' '.join(filter_overrides(job.overrides))}")
    cores = available_cores()
    if not options.on_cluster and options.workers * options.threads_per_job > cores:
        log.warning(
            f"{options.workers} jobs at once with {options.threads_per_job} threads each "
            f"oversubscribe the {cores} cores (results are unaffected): "
            "leave n_jobs unset to run as many jobs as fit"
        )
