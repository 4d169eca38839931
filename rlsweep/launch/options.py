"""The launcher's options, validated: what ``hydra.launcher`` resolves to.

Light to import: Hydra's plugin scan loads the launcher plugin, which uses these, in
every Hydra app.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from rlsweep.errors import ConfigError
from rlsweep.executors.ray_options import RayOptions
from rlsweep.gpus import (
    DEVICES_KEY,
    SHARE_KEY,
    Lanes,
    check_devices,
    check_share,
    machine_gpus,
    share_text,
)
from rlsweep.numerics import check_machine, check_setting, unpinned_because


class Executor(Enum):
    serial = "serial"  # an in-process loop: one job at a time, for debugging
    joblib = "joblib"  # worker processes (joblib's loky by default)
    slurm = "slurm"  # SLURM job arrays through submitit
    submitit_local = "submitit_local"  # submitit's local executor (a laptop)
    ray = "ray"  # a Ray cluster's nodes: one Ray task per job


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
    # GPUs each job holds (a whole number, or 1/k of one: k jobs to a device); 0: none asked.
    gpus_per_job: float = 0.0
    # The devices the jobs share (the pool and submitit_local): declared, or this
    # machine's. Empty on SLURM and Ray, which give each job its own.
    gpus: tuple[str, ...] = ()
    # The kernels the jobs run (rlsweep.numerics): native, or portable (pinned in every
    # job process as it starts).
    numerics: str = "native"
    # executor=ray: which cluster, and ray.init's other arguments.
    ray: RayOptions = field(default_factory=RayOptions)

    @property
    def submitit(self) -> bool:
        """Whether jobs go through submitit (SLURM or its local executor)."""
        return self.executor in SUBMITIT_EXECUTORS

    @property
    def on_cluster(self) -> bool:
        """Whether jobs run on a cluster's nodes (SLURM, Ray) rather than this machine's
        cores (submitit_local counts: each job its own allocation)."""
        return self.submitit or self.executor == Executor.ray.value

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
        ends the worker, not the sweep. Never with GPUs: a worker forked from a process that
        initialised CUDA (an app that asks torch.cuda.is_available() as it loads) cannot
        use CUDA, so the job runs in its device group's worker (see rlsweep.gpus). Nor when
        this process cannot run the kernels the job's numerics ask for (the fork would
        inherit its libraries as they are)."""
        return (
            jobs == 1
            and self.executor == Executor.joblib.value
            and self.backend != Backend.threading.value
            and not self.gpus_per_job
            and unpinned_because(self.numerics) is None
        )

    def single_job_fork(self) -> LauncherOptions:
        """These options for one job in a worker forked from this process."""
        return dataclasses.replace(
            self,
            backend=Backend.multiprocessing.value,
            start_method=StartMethod.fork.value,
            n_jobs=1,
        )

    def lanes(self) -> Lanes:
        """The slots jobs run in: one lane per device group with GPUs (see rlsweep.gpus),
        else one lane of n_jobs (and on SLURM, which places each job itself)."""
        return Lanes.create(self.gpus, self.gpus_per_job if self.gpus else 0.0, self.n_jobs)

    def in_workers(self) -> LauncherOptions:
        """These options with the jobs in fresh worker processes (loky's), for jobs that would
        run in this process but whose numerics it cannot run (see rlsweep.numerics)."""
        workers = self.n_jobs if self.executor == Executor.joblib.value else 1
        return dataclasses.replace(
            self, executor=Executor.joblib.value, backend=Backend.loky.value, n_jobs=workers
        )

    def for_threads(self, threads: int) -> LauncherOptions:
        """These options for jobs of ``threads`` threads: as many workers as fit the cores
        unless n_jobs was set."""
        workers = self.n_jobs
        if self.n_jobs_auto and self.executor != Executor.serial.value:
            workers = max(1, available_cores() // threads)
        if self.gpus:  # no more at once than the shares allow
            workers = Lanes.create(self.gpus, self.gpus_per_job, workers).slots
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
        gpus_per_job: float | None = None,
        gpus: Sequence[Any] | None = None,
        slurm_gpus_per_node: int = 0,
        numerics: str = "native",
        ray: RayOptions | None = None,
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
        _check_numerics(check_setting(numerics), ex, bk)
        _check_timeout(job_timeout_s, ex, bk)
        ray = _check_ray(ex, ray)
        share, devices = _gpus(ex, bk, gpus_per_job, gpus, slurm_gpus_per_node)
        workers = 1 if ex == Executor.serial.value else (n_jobs or cores)
        if devices:
            workers = Lanes.create(devices, share, workers).slots
        return LauncherOptions(
            executor=ex,
            n_jobs=workers,
            backend=bk,
            start_method=_choice(StartMethod, "start_method", start_method),
            progress=bool(progress),
            idle_worker_timeout=float(idle_worker_timeout),
            job_timeout_s=None if job_timeout_s is None else float(job_timeout_s),
            retries=int(retries),
            n_jobs_auto=n_jobs is None,
            gpus_per_job=share,
            gpus=devices,
            numerics=str(numerics),
            ray=ray,
        )


def _check_timeout(job_timeout_s: float | None, executor: str, backend: str) -> None:
    """A job time limit: > 0 seconds, for jobs in worker processes (which can be killed)."""
    if job_timeout_s is None:
        return
    if job_timeout_s <= 0:
        raise ConfigError(
            f"hydra.launcher.job_timeout_s must be > 0 seconds or null, got {job_timeout_s}."
        )
    if executor == Executor.serial.value or backend == Backend.threading.value:
        raise ConfigError(
            "hydra.launcher.job_timeout_s needs jobs in worker processes (a thread or "
            "the sweep's own process cannot be killed alone): use launcher=joblib with "
            "backend loky or multiprocessing."
        )


def _check_numerics(numerics: str, executor: str, backend: str) -> None:
    """numerics=portable needs each job's process to start with its variables: refused
    where rlsweep cannot start them so (the standard library's pool), and on a machine
    whose jobs could not run its kernels (no AVX2; a SLURM node is checked where it runs)."""
    if numerics != "portable":
        return
    if executor == Executor.joblib.value and backend == Backend.multiprocessing.value:
        raise ConfigError(
            "hydra.launcher.numerics=portable pins the kernels in each job process as it "
            "starts, which backend=multiprocessing does not let rlsweep do (its workers "
            "import numpy before their first job): use backend=loky (the default)."
        )
    if executor != Executor.slurm.value:
        check_machine(numerics)


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


def _gpus(
    executor: str,
    backend: str,
    gpus_per_job: float | None,
    gpus: Sequence[Any] | None,
    slurm_gpus_per_node: int,
) -> tuple[float, tuple[str, ...]]:
    """The jobs' share of a GPU and the devices they share, checked (see rlsweep.gpus).
    Under the submitit executors, ``slurm.gpus_per_node`` is the same request in whole GPUs."""
    key = SHARE_KEY
    if slurm_gpus_per_node > 0 and executor in SUBMITIT_EXECUTORS:
        if gpus_per_job is None:
            gpus_per_job, key = slurm_gpus_per_node, "hydra.launcher.slurm.gpus_per_node"
        elif gpus_per_job != slurm_gpus_per_node:
            raise ConfigError(
                f"{SHARE_KEY}={gpus_per_job:g} and hydra.launcher.slurm.gpus_per_node="
                f"{slurm_gpus_per_node} disagree: set one of them (gpus_per_job alone suffices)."
            )
    share = check_share(gpus_per_job, key)
    declared = check_devices(gpus)
    if not share:
        if declared:
            raise ConfigError(
                f"{DEVICES_KEY} lists devices but {SHARE_KEY} is null: set how many each job "
                "gets, e.g. gpus_per_job=1 (its own) or gpus_per_job=0.5 (two jobs to a GPU)."
            )
        return 0.0, ()
    threads = executor == Executor.joblib.value and backend == Backend.threading.value
    if executor == Executor.serial.value or threads:
        raise ConfigError(
            f"{key} needs jobs in worker processes (CUDA reads its devices once per "
            "process, so jobs sharing one process would share its GPUs): use "
            "launcher=joblib with backend loky or multiprocessing, or submitit_local."
        )
    if executor == Executor.slurm.value:
        return _slurm_gpus(share, key, declared)
    if executor == Executor.ray.value:
        if declared:
            raise ConfigError(
                f"{DEVICES_KEY} does not apply to executor=ray: each node declares its GPUs "
                f"(`ray start --num-gpus=N`) and Ray chooses each job's. Drop {DEVICES_KEY}."
            )
        return share, ()  # Ray's num_gpus; the nodes' GPUs are checked at launch
    devices, where = (declared, DEVICES_KEY) if declared else machine_gpus()
    if not devices:
        raise ConfigError(
            f"{key}={share:g} but this machine shows 0 GPUs ({where}): declare the devices "
            f"with {DEVICES_KEY}=[0,1], run where the GPUs are, or set {key}=null."
        )
    if share > len(devices):
        raise ConfigError(
            f"{key}={share:g} asks more GPUs per job than the {len(devices)} device(s) "
            f"there are ({where}: {','.join(devices)})."
        )
    return share, devices


def _slurm_gpus(share: float, key: str, declared: tuple[str, ...]) -> tuple[float, tuple[str, ...]]:
    """SLURM gives each job its own whole GPUs (sbatch --gpus-per-node): no declared
    devices, no share of one."""
    if declared:
        raise ConfigError(
            f"{DEVICES_KEY} does not apply to executor=slurm: SLURM chooses each job's "
            f"devices on its node. Drop {DEVICES_KEY}."
        )
    if share < 1:
        raise ConfigError(
            f"{key}={share:g} ({share_text(share)} per job) is not available with "
            "executor=slurm: SLURM allocates whole GPUs (gpus_per_job=1, 2, ...). If your "
            "cluster splits its GPUs into shards (GRES shard: `sinfo -o '%N %G'` lists "
            "them), set gpus_per_job=null and request shards with "
            "hydra.launcher.slurm.additional_parameters='{gres: \"shard:N\"}'."
        )
    return share, ()


def _check_ray(executor: str, ray: RayOptions | None) -> RayOptions:
    """The Ray executor's options, and Ray installed, checked up front."""
    ray = ray or RayOptions()
    ray.check()
    if executor != Executor.ray.value:
        return ray
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(
            "launcher=ray (hydra.launcher.executor=ray) needs Ray, which is not installed "
            "here: pip install 'rlsweep[ray]' (on every node of the cluster too)."
        )
    return ray
