"""The launcher's options, validated: what ``hydra.launcher`` resolves to.

Light to import: Hydra's plugin scan loads the launcher plugin, which uses these, in
every Hydra app.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from enum import Enum

from rlsweep.errors import ConfigError


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


SUBMITIT_EXECUTORS = (Executor.slurm.value, Executor.submitit_local.value)


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _choice(enum: type[Enum], key: str, value: object) -> str:
    raw = value.value if isinstance(value, Enum) else value
    allowed = [m.value for m in enum]
    if raw not in allowed:
        raise ConfigError(
            f"hydra.launcher.{key}={raw!r} is not allowed; choose one of {', '.join(allowed)}."
        )
    return str(raw)


@dataclass(frozen=True)
class LauncherOptions:
    """Validated launcher options (what ``RLSweepLauncherConf`` resolves to).

    Choices are kept as plain strings: Hydra's plugin scan loads the plugin module a second
    time outside ``sys.modules``, so enum identity is not stable across the two copies.
    """

    executor: str
    n_jobs: int
    backend: str
    start_method: str
    progress: bool
    idle_worker_timeout: float
    job_timeout_s: float | None = None
    retries: int = 0
    # Whether n_jobs was left to rlsweep (null): then cores // the jobs' thread count.
    n_jobs_auto: bool = True
    # torch/BLAS threads of the batch's jobs (their largest thread count, set at launch):
    # a job's threads are its own setting, never derived from the worker count.
    threads_per_job: int = 1

    @property
    def submitit(self) -> bool:
        """Whether jobs go through submitit (SLURM or its local executor)."""
        return self.executor in SUBMITIT_EXECUTORS

    @property
    def jobs_elsewhere(self) -> bool:
        """Whether jobs run in other processes, leaving the parent idle while they run."""
        return self.executor != Executor.serial.value and not (
            self.executor == Executor.joblib.value and self.backend == Backend.threading.value
        )

    def forks_single_job(self, jobs: int) -> bool:
        """Whether a launch of ``jobs`` jobs on the process pool runs in a worker forked from
        this process: a single job, whose fresh worker would only import the app a second
        time (seconds of a short sweep). The forked worker has the app in memory already;
        the job's numbers are the same in any process, and a crash or a time limit still
        ends the worker, not the sweep."""
        return (
            jobs == 1
            and self.executor == Executor.joblib.value
            and self.backend != Backend.threading.value
        )

    def single_job_fork(self) -> LauncherOptions:
        """These options for one job in a worker forked from this process."""
        return dataclasses.replace(
            self,
            backend=Backend.multiprocessing.value,
            start_method=StartMethod.fork.value,
            n_jobs=1,
        )

    def for_threads(self, threads: int) -> LauncherOptions:
        """These options for jobs of ``threads`` threads: as many workers as fit the cores
        unless n_jobs was set."""
        workers = self.n_jobs
        if self.n_jobs_auto and self.executor != Executor.serial.value:
            workers = max(1, available_cores() // threads)
        return dataclasses.replace(self, n_jobs=workers, threads_per_job=threads)

    @staticmethod
    def create(
        *,
        executor: Executor | str,
        n_jobs: int | None,
        backend: Backend | str,
        start_method: StartMethod | str,
        progress: bool,
        idle_worker_timeout: float,
        job_timeout_s: float | None = None,
        retries: int = 0,
    ) -> LauncherOptions:
        """The options, or a ConfigError naming the key and what is allowed."""
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
        ex = _choice(Executor, "executor", executor)
        bk = _choice(Backend, "backend", backend)
        _check_submitit(ex, job_timeout_s, retries)
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
        return LauncherOptions(
            executor=ex,
            n_jobs=1 if ex == Executor.serial.value else (n_jobs or cores),
            backend=bk,
            start_method=_choice(StartMethod, "start_method", start_method),
            progress=bool(progress),
            idle_worker_timeout=float(idle_worker_timeout),
            job_timeout_s=None if job_timeout_s is None else float(job_timeout_s),
            retries=int(retries),
            n_jobs_auto=n_jobs is None,
        )


def _check_submitit(executor: str, job_timeout_s: float | None, retries: int) -> None:
    """Options the submitit executors do not take, refused before anything is written."""
    if executor not in SUBMITIT_EXECUTORS:
        return
    if job_timeout_s is not None:
        raise ConfigError(
            f"hydra.launcher.job_timeout_s does not apply to executor={executor}: set the "
            "time limit in minutes with hydra.launcher.slurm.timeout_min."
        )
    if retries:
        raise ConfigError(
            f"hydra.launcher.retries is not supported with executor={executor} yet: set "
            "it to 0 and rerun the sweep (rerun=failed) to run failed jobs again."
        )
