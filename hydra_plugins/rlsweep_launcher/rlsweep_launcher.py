"""The rlsweep launcher plugin: config and a thin ``Launcher``; the work is in ``_core``.

Works for any Hydra app. Jobs run in-process (``executor: serial``) or in worker
processes through joblib's loky (``executor: joblib``, the default). Each job's overrides
are checked and validated in the parent before any job starts (its config is composed
where it runs); a failing job never stops the others, and its full traceback lands in
``error.txt`` in its job directory.

This module is imported by Hydra's plugin scan in every Hydra app, so it stays light:
no torch, gymnasium or joblib imports here.
"""

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from rlsweep.errors import ConfigError
from rlsweep.slurm_options import SlurmOptions
from rlsweep.store import job_dir_name

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override
    from hydra.core.utils import JobReturn

    from ._core import Job


class Executor(Enum):
    serial = "serial"  # an in-process loop: one job at a time, for debugging
    joblib = "joblib"  # worker processes (joblib's loky by default)
    slurm = "slurm"  # SLURM job arrays through submitit
    submitit_local = "submitit_local"  # submitit's local executor (a laptop)


class Backend(Enum):
    loky = "loky"  # joblib's robust process pool; workers stay warm between batches
    multiprocessing = "multiprocessing"  # the standard library's pool, with start_method
    threading = "threading"  # threads in the parent process (jobs must release the GIL)


class StartMethod(Enum):
    spawn = "spawn"
    forkserver = "forkserver"
    fork = "fork"


@dataclass
class RLSweepLauncherConf:
    _target_: str = "hydra_plugins.rlsweep_launcher.rlsweep_launcher.RLSweepLauncher"
    # How jobs run: serial (in-process loop, for debugging) or joblib (parallel workers).
    executor: Executor = Executor.joblib
    # Jobs run at once with executor=joblib; null = all cores.
    n_jobs: Optional[int] = None
    # Parallel backend for executor=joblib: loky, multiprocessing or threading.
    backend: Backend = Backend.loky
    # Process start method for backend=multiprocessing: spawn, forkserver or fork.
    start_method: StartMethod = StartMethod.spawn
    # Show the live progress line (done / failed / running / total, elapsed, ETA) on stderr.
    progress: bool = True
    # Seconds an idle loky worker stays alive, warm for the next batch or sweep.
    idle_worker_timeout: float = 300.0
    # Wall-time limit of one job in seconds (process backends), counted from when a
    # worker starts it: a job still running then is killed and marked timed out.
    # null = no limit.
    job_timeout_s: Optional[float] = None
    # Times a failed or crashed job is run again before it is marked failed (each
    # attempt is logged to attempts.jsonl in its directory). Timed-out jobs are not retried.
    retries: int = 0
    # Options of executor=slurm / submitit_local (see rlsweep/slurm_options.py).
    slurm: SlurmOptions = field(default_factory=SlurmOptions)


ConfigStore.instance().store(
    group="hydra/launcher", name="rlsweep", node=RLSweepLauncherConf, provider="rlsweep"
)

# The one-line opt-in for any Hydra app: ``defaults: [{rlsweep: joblib}, _self_]`` in its
# primary config (or ``+rlsweep=joblib`` on the command line) selects rlsweep's launcher
# with that executor and rlsweep's sweeper, and a stable sweep directory (multirun/<app>,
# so the same command resumes) with job directories named by their overrides.
for _executor in Executor:
    ConfigStore.instance().store(
        group="rlsweep",
        name=_executor.value,
        package="_global_",
        provider="rlsweep",
        node={
            "defaults": [
                {"override /hydra/launcher": "rlsweep"},
                {"override /hydra/sweeper": "rlsweep"},
            ],
            "hydra": {
                "launcher": {"executor": _executor.value},
                "sweep": {
                    "dir": "multirun/${rlsweep.job_dir:${hydra.job.name}}",
                    "subdir": "${rlsweep.job_dir:${hydra.job.override_dirname}}",
                },
            },
        },
    )

if not OmegaConf.has_resolver("rlsweep.job_dir"):
    # ${rlsweep.job_dir:${hydra.job.override_dirname}}: a job's directory named by its
    # overrides (its stable identity), made filesystem-safe.
    OmegaConf.register_new_resolver("rlsweep.job_dir", job_dir_name)


def _seed(purpose: str, index: int = 0, *, _root_: DictConfig) -> int:
    from rlsweep.task import resolve_seed

    return resolve_seed(purpose, index, shared=False, root=_root_)


def _shared_seed(purpose: str, index: int = 0, *, _root_: DictConfig) -> int:
    from rlsweep.task import resolve_seed

    return resolve_seed(purpose, index, shared=True, root=_root_)


if not OmegaConf.has_resolver("rlsweep.seed"):
    # ${rlsweep.seed:purpose} / ${rlsweep.seed:purpose,index}: the job's seed for a purpose
    # (rlsweep.Seeds.seed); rlsweep.shared_seed: a stream shared across agents (CRN).
    OmegaConf.register_new_resolver("rlsweep.seed", _seed)
    OmegaConf.register_new_resolver("rlsweep.shared_seed", _shared_seed)


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class LauncherOptions:
    """Validated launcher options (what ``RLSweepLauncherConf`` resolves to).

    Choices are kept as plain strings: Hydra's plugin scan loads this module a second
    time outside ``sys.modules``, so enum identity is not stable across the two copies.
    """

    executor: str
    n_jobs: int
    backend: str
    start_method: str
    progress: bool
    idle_worker_timeout: float
    job_timeout_s: Optional[float] = None
    retries: int = 0
    # Whether n_jobs was left to rlsweep (null): then cores // the jobs' thread count.
    n_jobs_auto: bool = True
    # torch/BLAS threads of the batch's jobs (their largest thread count, set at launch):
    # a job's threads are its own setting, never derived from the worker count.
    threads_per_job: int = 1

    def for_threads(self, threads: int) -> "LauncherOptions":
        """These options for jobs of ``threads`` threads: as many workers as fit the cores
        unless n_jobs was set."""
        workers = self.n_jobs
        if self.n_jobs_auto and self.executor != Executor.serial.value:
            workers = max(1, available_cores() // threads)
        return dataclasses.replace(self, n_jobs=workers, threads_per_job=threads)

    @staticmethod
    def create(
        *,
        executor: "Executor | str",
        n_jobs: Optional[int],
        backend: "Backend | str",
        start_method: "StartMethod | str",
        progress: bool,
        idle_worker_timeout: float,
        job_timeout_s: Optional[float] = None,
        retries: int = 0,
    ) -> "LauncherOptions":
        def choice(enum: type[Enum], key: str, value: object) -> str:
            raw = value.value if isinstance(value, Enum) else value
            allowed = [m.value for m in enum]
            if raw not in allowed:
                raise ConfigError(
                    f"hydra.launcher.{key}={raw!r} is not allowed; choose one of "
                    f"{', '.join(allowed)}."
                )
            return str(raw)

        cores = available_cores()
        if n_jobs is not None and n_jobs < 1:
            raise ConfigError(
                f"n_jobs (hydra.launcher.n_jobs) must be >= 1, or null for all {cores} cores; "
                f"got {n_jobs}."
            )
        if idle_worker_timeout <= 0:
            raise ConfigError(
                "hydra.launcher.idle_worker_timeout must be > 0 seconds, "
                f"got {idle_worker_timeout}."
            )
        if retries < 0:
            raise ConfigError(f"hydra.launcher.retries must be >= 0, got {retries}.")
        ex = choice(Executor, "executor", executor)
        bk = choice(Backend, "backend", backend)
        if job_timeout_s is not None:
            if job_timeout_s <= 0:
                raise ConfigError(
                    f"hydra.launcher.job_timeout_s must be > 0 seconds or null, got {job_timeout_s}."
                )
            if ex == Executor.serial.value or bk == Backend.threading.value:
                raise ConfigError(
                    "hydra.launcher.job_timeout_s needs jobs in worker processes (a thread or "
                    "the sweep's own process cannot be killed alone): use launcher=joblib with "
                    "backend loky or multiprocessing."
                )
        workers = 1 if ex == Executor.serial.value else (n_jobs or cores)
        return LauncherOptions(
            executor=ex,
            n_jobs=workers,
            backend=bk,
            start_method=choice(StartMethod, "start_method", start_method),
            progress=bool(progress),
            idle_worker_timeout=float(idle_worker_timeout),
            job_timeout_s=None if job_timeout_s is None else float(job_timeout_s),
            retries=int(retries),
            n_jobs_auto=n_jobs is None,
        )


@dataclass(frozen=True)
class LaunchContext:
    """What ``setup`` receives; ``launch`` needs all of it."""

    hydra_context: HydraContext
    task_function: TaskFunction
    config: DictConfig
    # Composes each job, sharing the work between jobs with the same group choices
    # (a _compose.FastComposer; typed Any: a string annotation breaks Hydra's plugin scan).
    composer: Any


class RLSweepLauncher(Launcher):
    def __init__(
        self,
        executor: "Executor | str" = "joblib",
        n_jobs: Optional[int] = None,
        backend: "Backend | str" = "loky",
        start_method: "StartMethod | str" = "spawn",
        progress: bool = True,
        idle_worker_timeout: float = 300.0,
        job_timeout_s: Optional[float] = None,
        retries: int = 0,
        slurm: "SlurmOptions | DictConfig | None" = None,
    ) -> None:
        # The submitit executors' options, typed (Hydra passes a DictConfig).
        self.slurm: SlurmOptions = (
            slurm
            if isinstance(slurm, SlurmOptions)
            else OmegaConf.to_object(
                OmegaConf.merge(OmegaConf.structured(SlurmOptions), slurm or {})
            )  # type: ignore[assignment]
        )
        self.options = LauncherOptions.create(
            executor=executor,
            n_jobs=n_jobs,
            backend=backend,
            start_method=start_method,
            progress=progress,
            idle_worker_timeout=idle_worker_timeout,
            job_timeout_s=job_timeout_s,
            retries=retries,
        )
        # SLURM options are checked now, before the sweep directory or anything is made.
        self.slurm.check(self.options.executor)
        self._context: Optional[LaunchContext] = None
        # Jobs checked and validated ahead of launch() (by rlsweep's sweeper), by the
        # job's overrides (unique within a sweep).
        self.prepared: dict[tuple[str, ...], "Job"] = {}

    def setup(
        self,
        *,
        hydra_context: HydraContext,
        task_function: TaskFunction,
        config: DictConfig,
    ) -> None:
        from ._compose import FastComposer

        self._context = LaunchContext(
            hydra_context, task_function, config, FastComposer(hydra_context, config)
        )

    @property
    def context(self) -> LaunchContext:
        if self._context is None:
            raise RuntimeError("RLSweepLauncher.launch() called before setup()")
        return self._context

    def prepare(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> None:
        """Check and validate every job of a batch now, before anything starts."""
        from . import _core

        _core.prepare(self, job_overrides, initial_job_idx)

    def prime(self, overrides: Sequence["Override"]) -> None:
        """The sweep's parsed overrides: their elements need not be parsed again per job."""
        self.context.composer.prime(overrides)

    def job_keys(self, overrides: Sequence[str]) -> DictConfig:
        """A job's own keys (its config without ``hydra``), every override applied."""
        return self.context.composer.plan(overrides)[1]

    def prepared_job(self, overrides: Sequence[str]) -> "Job":
        """A job checked by ``prepare``: its directory and identity."""
        return self.prepared[tuple(overrides)]

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence["JobReturn"]:
        from . import _core

        return _core.launch(self, job_overrides, initial_job_idx)
