"""The pool executor (``executor: joblib``): jobs in worker processes (joblib's loky by
default, or the standard library's multiprocessing) or threads, through the
fault-tolerant :class:`~rlsweep.executors.dispatch.Dispatcher`.

With GPUs each lane (a device group, :mod:`rlsweep.gpus`) has a pool of its own, whose
workers get the lane's CUDA_VISIBLE_DEVICES as they start: loky's reusable pool is one per
process, so a lane's loky pool is kept warm here instead, reused by the next launch with
the same devices and thread count."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor as FuturesExecutor
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import cloudpickle
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn
from omegaconf import DictConfig, OmegaConf

from rlsweep.errors import ConfigError
from rlsweep.executors.base import More
from rlsweep.executors.dispatch import Dispatcher, Submit
from rlsweep.launch.jobs import LaunchContext, SweepJob, execute
from rlsweep.launch.options import LauncherOptions
from rlsweep.launch.worker import (
    forked_entry,
    inherit,
    init_worker,
    install,
    process_env,
    shared_blob,
    worker_entry,
)
from rlsweep.progress import Progress
from rlsweep.trace import event

log = logging.getLogger(__name__)


def run_pool(
    context: LaunchContext,
    options: LauncherOptions,
    jobs: list[SweepJob],
    progress: Progress,
    more: More | None = None,
) -> list[JobReturn]:
    """Run a batch on a pool: one JobReturn per job, in input order (then the jobs ``more``
    released, in release order)."""
    if more is None:
        options = _sized_for(options, len(jobs))
    with contextlib.ExitStack() as stack:
        if options.backend == "threading":
            check_threading(context.config)
            stack.enter_context(_thread_local_hydra_config())
            submit = _thread_submitter(context)
        elif options.start_method == "fork" and options.backend == "multiprocessing":
            submit = _forked_submitter(context)
        else:
            submit = _process_submitter(context)
        pools = PoolFactory(options)
        dispatcher = Dispatcher(options, submit, jobs, progress, pools, more)
        progress.follow(
            lambda: [dispatcher.jobs[i].directory.name for i in dispatcher.in_flight.values()]
        )
        return dispatcher.run()


def start_workers(
    context: LaunchContext, options: LauncherOptions, jobs: int
) -> Callable[[], None]:
    """Start loky's reusable pool for a batch of ``jobs`` and install the launch's Hydra
    state (the app's imports) in its workers, without waiting; the batch's
    :func:`run_pool` then finds the same pool warm. Returns how to stop it (a sweep refused
    after this)."""
    options = _sized_for(options, jobs)
    event("workers-starting")
    pools = PoolFactory(options)
    pool, _ = pools.make(0)
    shared = shared_blob(context.hydra_context, context.task_function)
    for _ in range(options.workers):
        pool.submit(install, shared)
    return lambda: pools.kill(pool)


def check_threading(config: DictConfig) -> None:
    """Threads share one working directory: refuse a config whose jobs change it."""
    if _changes_dir(config):
        raise ConfigError(
            "hydra.launcher.backend=threading needs hydra.job.chdir=false (all threads "
            "share one working directory; Hydra versions before 1.2 change it by "
            "default): set hydra.job.chdir=false or use backend=loky."
        )


def _sized_for(options: LauncherOptions, jobs: int) -> LauncherOptions:
    """The options of a pool for a batch of ``jobs``: no more workers than jobs, since
    each would start Python and the app's imports for nothing beside the workers that have
    jobs. (A warm loky pool keeps its size: resizing it would stop workers the next launch
    starts again. A GPU lane's warm pool is reused when it has workers enough.)"""
    if jobs and (options.devices or not _warm_loky_pool(options)):
        return dataclasses.replace(options, workers=min(options.workers, jobs))
    return options


def _warm_loky_pool(options: LauncherOptions) -> bool:
    """Whether this process already has loky's reusable pool (an earlier launch's)."""
    if options.backend != "loky":
        return False
    from joblib.externals.loky import reusable_executor

    return getattr(reusable_executor, "_executor", None) is not None


class PoolFactory:
    """Makes the pools a dispatcher runs jobs on, one per lane, and kills one (with its
    workers' children)."""

    def __init__(self, options: LauncherOptions) -> None:
        self.options = options
        self.lanes = options.lanes()

    def make(self, lane: int) -> tuple[FuturesExecutor, Callable[[], None]]:
        """A pool for ``lane`` and how to shut it down (loky's stay warm for reuse)."""
        options = self.options
        env = {**process_env(options.threads_per_job, options.numerics), **self.lanes.env(lane)}
        workers = self.lanes.per_lane
        if options.backend == "loky" and options.devices:
            return _lane_pool(env, workers, options.idle_worker_timeout), lambda: None
        if options.backend == "loky":
            from joblib.externals.loky import get_reusable_executor

            pool = get_reusable_executor(
                max_workers=options.workers,
                timeout=options.idle_worker_timeout,
                env=env,
                initializer=init_worker,
                initargs=(env, os.getpid()),
            )
            return pool, lambda: None
        if options.backend == "multiprocessing":
            import multiprocessing

            mp = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context(options.start_method),
                initializer=init_worker,
                initargs=(env, os.getpid()),
            )
            return mp, lambda: mp.shutdown(wait=True)
        threads = ThreadPoolExecutor(max_workers=options.workers, thread_name_prefix="rlsweep-job")
        return threads, lambda: threads.shutdown(wait=True)

    def kill(self, pool: FuturesExecutor) -> None:
        """Stop a pool now: kill every worker with its children, then drop queued jobs."""
        if self.options.backend == "threading":
            return  # threads cannot be killed; the interrupt reaches the parent only
        from joblib.externals.loky.backend.utils import kill_process_tree

        processes = getattr(pool, "_processes", None) or {}
        for proc in list(processes.values()):
            try:
                kill_process_tree(proc)
            except OSError as exc:  # gone already, or not ours to kill
                log.warning(f"could not kill worker {getattr(proc, 'pid', '?')}: {exc}")
        try:
            if self.options.backend == "loky":
                pool.shutdown(wait=True, kill_workers=True)  # type: ignore[call-arg]
            else:
                pool.shutdown(wait=True, cancel_futures=True)
        except Exception as exc:  # a broken pool may fail to shut down; its workers are dead
            log.warning(f"the {self.options.backend} pool did not shut down cleanly: {exc!r}")

    def stop(self, pool: FuturesExecutor, job: Future[JobReturn], pid: int) -> None:
        """Kill the worker running one job (past its time limit): the pool breaks, and the
        dispatcher sorts out its other jobs."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# Each GPU lane's loky pool, by its workers' environment: warm for the next launch.
_lane_pools: dict[tuple[tuple[str, str], ...], Any] = {}


def _lane_pool(env: dict[str, str], workers: int, idle_timeout: float) -> FuturesExecutor:
    """A loky pool of at least ``workers`` workers that start with ``env`` (a GPU lane's
    devices): the one an earlier launch left, unless it broke, was shut down or is smaller."""
    from joblib.externals.loky.process_executor import ProcessPoolExecutor as LokyPool

    key = tuple(sorted(env.items()))
    pool = _lane_pools.get(key)
    if pool is not None and (pool._flags.broken or pool._flags.shutdown):
        pool = None
    if pool is not None and pool._max_workers < workers:
        pool.shutdown(wait=False)
        pool = None
    if pool is None:
        pool = LokyPool(
            max_workers=workers,
            timeout=idle_timeout,
            env=env,
            initializer=init_worker,
            initargs=(env, os.getpid()),
        )
        _lane_pools[key] = pool
    return pool


def _process_submitter(context: LaunchContext) -> Submit:
    """How a job is handed to a process pool: Hydra's state pickled once per launch."""
    shared = shared_blob(context.hydra_context, context.task_function)

    def submit(pool: FuturesExecutor, job: SweepJob) -> Future[JobReturn]:
        return pool.submit(worker_entry, shared, cloudpickle.dumps(job))

    return submit


def _forked_submitter(context: LaunchContext) -> Submit:
    """How a job is handed to workers forked from this process: they inherit Hydra's state
    and the app in memory, so only the job is sent."""
    inherit(context.hydra_context, context.task_function)

    def submit(pool: FuturesExecutor, job: SweepJob) -> Future[JobReturn]:
        return pool.submit(forked_entry, cloudpickle.dumps(job))

    return submit


def _thread_submitter(context: LaunchContext) -> Submit:
    def submit(pool: FuturesExecutor, job: SweepJob) -> Future[JobReturn]:
        return pool.submit(
            execute, context.hydra_context, context.task_function, job, configure_logging=False
        )

    return submit


class _ThreadLocalHydraConfig(HydraConfig):
    """HydraConfig whose ``cfg`` is per thread, so threaded jobs each see their own."""

    def __init__(self, default: DictConfig | None) -> None:
        self._local = threading.local()
        self._default = default

    @property  # type: ignore[override]
    def cfg(self) -> DictConfig | None:
        return getattr(self._local, "cfg", self._default)

    @cfg.setter
    def cfg(self, value: DictConfig | None) -> None:
        self._local.cfg = value


@contextlib.contextmanager
def _thread_local_hydra_config() -> Iterator[None]:
    instances: dict[Any, Any] = Singleton._instances
    original = HydraConfig.instance()
    instances[HydraConfig] = _ThreadLocalHydraConfig(original.cfg)  # type: ignore[arg-type]
    try:
        yield
    finally:
        instances[HydraConfig] = original


def _changes_dir(config: DictConfig) -> bool:
    """Whether run_job will chdir into the job dir (its rule, incl. the version_base default)."""
    from hydra import version

    chdir = OmegaConf.select(config, "hydra.job.chdir")
    return bool(chdir) if chdir is not None else not version.base_at_least("1.2")
