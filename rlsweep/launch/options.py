"""The launcher's options, declared once: what ``hydra.launcher`` holds, checked.

:class:`LauncherOptions` is the launcher's config node (rlsweep's launcher plugin stores it
in Hydra's ConfigStore as ``hydra/launcher=rlsweep``, a comment per option, as Hydra's own
launcher plugins do) and, checked by :meth:`LauncherOptions.checked`, what the launcher and
the executors read. An option is one field of it, and its check, if it has one, a line of
``checked`` (or its group's own ``check``): the plugin passes the node's keys on, typed, and
every executor reads ``options.<field>``.

Light to import: Hydra's plugin scan loads the launcher plugin, which uses these, in
every Hydra app.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from omegaconf import OmegaConf

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
from rlsweep.identity import Keys, KeySettings, key_settings
from rlsweep.numerics import check_machine, check_setting, unpinned_because
from rlsweep.settings import Objective
from rlsweep.slurm_options import SlurmOptions
from rlsweep.trackers.settings import of_node


class _Choice(str, Enum):
    """A choice of the config node (which lists what is allowed) that reads as its value: it
    equals the plain string ("joblib"), and prints as it, in any process it is unpickled in
    (``enum.StrEnum``, which Python 3.10 lacks)."""

    def __str__(self) -> str:
        return str(self.value)


class Executor(_Choice):
    serial = "serial"  # an in-process loop: one job at a time, for debugging
    joblib = "joblib"  # worker processes (joblib's loky by default)
    slurm = "slurm"  # SLURM job arrays through submitit
    submitit_local = "submitit_local"  # submitit's local executor (a laptop)
    ray = "ray"  # a Ray cluster's nodes: one Ray task per job


class Backend(_Choice):
    loky = "loky"  # joblib's robust process pool; workers stay warm between batches
    multiprocessing = "multiprocessing"  # the standard library's pool, with start_method
    threading = "threading"  # threads in the parent process (jobs must release the GIL)


class StartMethod(_Choice):
    spawn = "spawn"
    forkserver = "forkserver"
    fork = "fork"


SUBMITIT_EXECUTORS = (Executor.slurm.value, Executor.submitit_local.value)
# The metadata that leaves a dataclass field out of its config node (OmegaConf's).
IGNORED = "omegaconf_ignore"
E = TypeVar("E", bound=Enum)


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _choice(enum: type[E], key: str, value: object) -> E:
    raw = value.value if isinstance(value, Enum) else value
    allowed = [m.value for m in enum]
    if raw not in allowed:
        raise ConfigError(
            f"hydra.launcher.{key}={raw!r} is not allowed; choose one of {', '.join(allowed)}."
        )
    return enum(raw)


def _derived(default: Any) -> Any:
    """A field that is no config key: what the checks derive from the options."""
    return field(default=default, metadata={IGNORED: True})


@dataclass(frozen=True)
class LauncherOptions:
    """``hydra.launcher``: the launcher's options (each field but the derived ones at the
    end is a config key, with its default), and, once :meth:`checked`, what the launcher
    and the executors read. Its config node is Hydra's ``hydra/launcher=rlsweep``."""

    # Hydra's: the launcher class made of this node (it is given the other keys).
    _target_: str = "hydra_plugins.rlsweep_launcher.rlsweep_launcher.RLSweepLauncher"
    # How jobs run: serial (in-process loop, for debugging), joblib (parallel workers),
    # slurm (SLURM job arrays), submitit_local (submitit's local executor) or ray (a Ray
    # cluster's nodes, one task per job).
    executor: Executor = Executor.joblib
    # Jobs run at once with executor=joblib (ray: handed to Ray at once); null = as many
    # as fit the cores (ray: the cluster's nodes).
    n_jobs: int | None = None
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
    job_timeout_s: float | None = None
    # Times a failed or crashed job is run again before it is marked failed (every
    # attempt is logged to attempts.jsonl in its directory). Timed-out jobs are not retried.
    retries: int = 0
    # GPUs each job gets (executor=joblib, submitit_local, slurm, ray): a whole number (1,
    # 2: each job its own devices) or a share 1/k of one (0.5, 0.25: k jobs to a GPU; not on
    # SLURM). Each job sees only its device(s) through CUDA_VISIBLE_DEVICES, and no more
    # jobs run at once than the shares allow. null = no GPU asked (jobs see what the
    # machine shows). Under ray, Ray's num_gpus: the nodes declare their GPUs.
    gpus_per_job: float | None = None
    # The devices jobs share with gpus_per_job (CUDA_VISIBLE_DEVICES names: [0,1], or GPU
    # UUIDs); null = the GPUs this machine shows (CUDA_VISIBLE_DEVICES if set, else
    # nvidia-smi). Not on SLURM or Ray, which choose each job's devices.
    gpus: list[str] | None = None
    # Which floating-point kernels jobs run (part of each job's identity): native (each
    # machine's fastest; numbers may differ between machines) or portable (the AVX2 kernels
    # of numpy, OpenBLAS, torch and MKL, pinned in every job process: the same bits on any
    # x86-64 CPU with AVX2). See rlsweep/numerics.py.
    numerics: str = "native"
    # Options of executor=slurm / submitit_local (see rlsweep/slurm_options.py).
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    # Options of executor=ray: the cluster (address) and ray.init's other arguments.
    ray: RayOptions = field(default_factory=RayOptions)
    # For Hydra's own sweepers (hydra/sweeper=optuna...), whose jobs are trials: each job
    # runs as this many jobs, the task's replicate key (seed) set to 0..replicates-1, and
    # returns one value, their aggregate. 1: each job runs once, as it is.
    replicates: int = 1
    # A trial's value from its replicates' results (replicates > 1): iqm, mean or lcb.
    objective: Objective = Objective.iqm
    # The result aggregated (a number the task returns); null: the task's main result.
    metric: str | None = None
    # The config keys that play a part in a job's identity, named here with no code edit
    # (each null: the task's @rlsweep.task(keys=...) declaration, else the default):
    # identity.replicate=env.seed (the replicate index's key; default seed),
    # identity.replicate_value=derived|index (what the app reads there: the job's own
    # 31-bit seed, the default, or the index as swept), identity.root, identity.ignore,
    # identity.agent (agent-side keys, for common random numbers), identity.threads.
    identity: KeySettings = field(default_factory=KeySettings)
    # Trackers fed every row a job logs, by name, with their settings: chosen with
    # rlsweep/trackers=[tensorboard,wandb,mlflow] (the built-in app: logger=[...]).
    trackers: dict[str, Any] | None = field(default_factory=dict)

    # -- Derived, no config keys: set by checked() (workers, GPUs) and at launch (threads).
    # Jobs that run at once: n_jobs, or as many as fit the cores (null), no more than the
    # GPU shares allow; 1 serially.
    workers: int = _derived(1)
    # GPUs each job holds (gpus_per_job, or slurm.gpus_per_node: a whole number, or 1/k
    # of one, k jobs to a device); 0: none asked.
    gpu_share: float = _derived(0.0)
    # The devices the jobs share (the pool and submitit_local): gpus, or this machine's.
    # Empty on SLURM and Ray, which give each job its own.
    devices: tuple[str, ...] = _derived(())
    # torch/BLAS threads of the batch's jobs (their largest thread count, set at launch):
    # a job's threads are its own setting, never derived from the worker count.
    threads_per_job: int = _derived(1)

    @classmethod
    def config_keys(cls) -> list[str]:
        """The config keys (``hydra.launcher.<key>``): every field but the derived ones."""
        return [f.name for f in dataclasses.fields(cls) if not f.metadata.get(IGNORED)]

    @classmethod
    def of(cls, node: Mapping[str, Any], caller: str = "LauncherOptions.of()") -> LauncherOptions:
        """The options a launcher node holds, as Hydra passes its keys to ``caller`` (the
        launcher's constructor): values typed by the node, groups as DictConfigs; or plain
        values, from Python. Each group becomes its dataclass, each container plain data;
        a key that is no option is refused as Python refuses an unknown keyword argument."""
        keys, hints = cls.config_keys(), typing.get_type_hints(cls)
        for key in node:
            if key not in keys:
                raise TypeError(f"{caller} got an unexpected keyword argument {key!r}")
        return cls(**{key: _typed(hints[key], value) for key, value in node.items()})

    @property
    def n_jobs_auto(self) -> bool:
        """Whether n_jobs was left to rlsweep (null): then cores // the jobs' thread count."""
        return self.n_jobs is None

    @property
    def submitit(self) -> bool:
        """Whether jobs go through submitit (SLURM or its local executor)."""
        return self.executor in SUBMITIT_EXECUTORS

    @property
    def on_cluster(self) -> bool:
        """Whether jobs run on a cluster's nodes (SLURM, Ray) rather than this machine's
        cores (submitit_local counts: each job its own allocation)."""
        return self.submitit or self.executor == Executor.ray

    @property
    def jobs_elsewhere(self) -> bool:
        """Whether jobs run in other processes, leaving the parent idle while they run."""
        return self.executor != Executor.serial and not (
            self.executor == Executor.joblib and self.backend == Backend.threading
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
            and self.executor == Executor.joblib
            and self.backend != Backend.threading
            and not self.gpu_share
            and unpinned_because(self.numerics) is None
        )

    def single_job_fork(self) -> LauncherOptions:
        """These options for one job in a worker forked from this process."""
        return dataclasses.replace(
            self, backend=Backend.multiprocessing, start_method=StartMethod.fork, workers=1
        )

    def lanes(self) -> Lanes:
        """The slots jobs run in: one lane per device group with GPUs (see rlsweep.gpus),
        else one lane of ``workers`` (and on SLURM, which places each job itself)."""
        share = self.gpu_share if self.devices else 0.0
        return Lanes.create(self.devices, share, self.workers)

    def in_workers(self) -> LauncherOptions:
        """These options with the jobs in fresh worker processes (loky's), for jobs that would
        run in this process but whose numerics it cannot run (see rlsweep.numerics)."""
        workers = self.workers if self.executor == Executor.joblib else 1
        return dataclasses.replace(
            self, executor=Executor.joblib, backend=Backend.loky, workers=workers
        )

    def for_threads(self, threads: int) -> LauncherOptions:
        """These options for jobs of ``threads`` threads: as many workers as fit the cores
        unless n_jobs was set."""
        workers = self.workers
        if self.n_jobs_auto and self.executor != Executor.serial:
            workers = max(1, available_cores() // threads)
        if self.devices:  # no more at once than the shares allow
            workers = Lanes.create(self.devices, self.gpu_share, workers).slots
        return dataclasses.replace(self, workers=workers, threads_per_job=threads)

    def checked(self) -> LauncherOptions:
        """These options checked, with what the checks derive (the workers, the GPU share
        and devices), before the sweep directory or anything is made; else a ConfigError
        naming the key and what is allowed."""
        cores = available_cores()
        _check_counts(self.n_jobs, self.idle_worker_timeout, self.retries, cores)
        ex = _choice(Executor, "executor", self.executor)
        bk = _choice(Backend, "backend", self.backend)
        _check_submitit(ex, self.job_timeout_s, self.retries)
        _check_numerics(check_setting(self.numerics), ex, bk)
        _check_timeout(self.job_timeout_s, ex, bk)
        ray = _check_ray(ex, self.ray)
        gpus = self.gpus_per_job, self.gpus, self.slurm.gpus_per_node
        share, devices = _gpus(ex, bk, *gpus)
        workers = 1 if ex == Executor.serial else (self.n_jobs or cores)
        if devices:
            workers = Lanes.create(devices, share, workers).slots
        start_method = _choice(StartMethod, "start_method", self.start_method)
        self.slurm.check(ex)
        of_node(self.trackers)  # checked here, named by their key; each job reads its own
        key_settings(self.identity).apply(Keys())  # checked here; each job reads its own
        return dataclasses.replace(
            self,
            executor=ex,
            backend=bk,
            start_method=start_method,
            progress=bool(self.progress),
            idle_worker_timeout=float(self.idle_worker_timeout),
            job_timeout_s=None if self.job_timeout_s is None else float(self.job_timeout_s),
            retries=int(self.retries),
            numerics=str(self.numerics),
            ray=ray,
            workers=workers,
            gpu_share=share,
            devices=devices,
        )


def _typed(kind: Any, value: Any) -> Any:
    """A node's value as its field holds it: a group as its dataclass (Hydra passes a
    DictConfig, or nothing), a container as plain data, any other value as it is."""
    if kind is KeySettings:
        return key_settings(value)  # (its unknown keys refused by name)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        if isinstance(value, kind):
            return value
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(kind), value or {}))
    if OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _check_counts(n_jobs: int | None, idle_worker_timeout: float, retries: int, cores: int) -> None:
    """How many jobs at once, how long an idle worker waits, how many retries."""
    if n_jobs is not None and n_jobs < 1:
        raise ConfigError(
            f"n_jobs (hydra.launcher.n_jobs) must be >= 1, or null for all {cores} cores; "
            f"got {n_jobs}."
        )
    if idle_worker_timeout <= 0:
        raise ConfigError(
            f"hydra.launcher.idle_worker_timeout must be > 0 seconds, got {idle_worker_timeout}."
        )
    if retries < 0:
        raise ConfigError(f"hydra.launcher.retries must be >= 0, got {retries}.")


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


def _check_ray(executor: str, ray: RayOptions) -> RayOptions:
    """The Ray executor's options, and Ray installed, checked up front."""
    ray.check()
    if executor != Executor.ray.value:
        return ray
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(
            "launcher=ray (hydra.launcher.executor=ray) needs Ray, which is not installed "
            "here: pip install 'rlsweep[ray]' (on every node of the cluster too)."
        )
    return ray
