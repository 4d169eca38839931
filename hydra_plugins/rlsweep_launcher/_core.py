"""The launcher's work: compose and validate jobs, dispatch them, collect their returns.

Imported lazily by ``RLSweepLauncher.launch`` so that Hydra's plugin scan stays cheap.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor as FuturesExecutor
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import (
    JobReturn,
    JobStatus,
    configure_log,
    filter_overrides,
    run_job,
    setup_globals,
)
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from rlsweep.errors import Preempted
from rlsweep.identity import Identity, hydra_ignored_keys
from rlsweep.progress import Progress
from rlsweep.store import ERROR_FILE, atomic_write_text
from rlsweep.task import THREAD_ENV_VARS as JOB_THREAD_ENV_VARS
from rlsweep.task import TaskHooks, as_task, hooks_of

from ._compose import Recipe, resolve_dir
from .rlsweep_launcher import LauncherOptions, RLSweepLauncher, available_cores

log = logging.getLogger(__name__)

# Set in every worker process (and SLURM job) to the jobs' thread count before anything
# is imported there; RLSWEEP_THREADS_PER_JOB tells a job how many threads it was given.
THREAD_ENV_VARS = (*JOB_THREAD_ENV_VARS, "RLSWEEP_THREADS_PER_JOB")


@dataclass(frozen=True)
class Job:
    """One job of a sweep: its number, its overrides and how to compose its config."""

    idx: int
    overrides: tuple[str, ...]
    # Composes the job's config where it runs (see _compose): the parent only checks it.
    recipe: Recipe
    # What the job is (its config values): resume compares it with its result's.
    identity: Identity

    @functools.cached_property
    def directory(self) -> Path:
        """Where it writes; resolved when first needed (a millisecond a job), then kept."""
        return self.recipe.directory(self.idx)

    def compose(self) -> DictConfig:
        """The job's full config, as Hydra's basic launcher would run it."""
        return self.recipe.compose(self.idx)


class JobError(RuntimeError):
    """A job's exception, carried back from a worker with its full traceback."""

    def __init__(self, message: str, remote_traceback: str) -> None:
        super().__init__(message)
        self.remote_traceback = remote_traceback

    def __reduce__(self) -> tuple[Any, ...]:
        return (JobError, (self.args[0], self.remote_traceback))

    def __str__(self) -> str:
        return f"{self.args[0]}\n\n--- job traceback ---\n{self.remote_traceback}"


# ---------------------------------------------------------------- composing


def prepare(
    launcher: RLSweepLauncher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> None:
    """Check every job of the batch in the parent, before any starts: its overrides apply,
    the task's validator accepts its values, and its identity is known. Jobs are composed
    where they run."""
    hooks = hooks_of(launcher.context.task_function) or TaskHooks()
    composer = launcher.context.composer
    ignored = hydra_ignored_keys(launcher.context.config)
    for i, overrides in enumerate(job_overrides):
        recipe, keys = composer.plan(overrides)
        if hooks.validate is not None:
            hooks.validate(keys)
        key = tuple(overrides)
        launcher.prepared[key] = Job(
            initial_job_idx + i, key, recipe, hooks.identify(keys, ignored)
        )


def _take_jobs(
    launcher: RLSweepLauncher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> list[Job]:
    """The batch's composed jobs: prepared ahead (keeping their number in the whole grid,
    when rlsweep's sweeper skips completed jobs) or composed now."""
    keys = [tuple(o) for o in job_overrides]
    for i, key in enumerate(keys):
        if key not in launcher.prepared:
            prepare(launcher, [job_overrides[i]], initial_job_idx + i)
    return [launcher.prepared.pop(key) for key in keys]


# ---------------------------------------------------------------- running one job


def failed_return(job: Job, exc: BaseException, tb: str) -> JobReturn:
    """A FAILED JobReturn for a job that died outside the task (worker crash, pickling)."""
    job_dir = job.directory
    config = job.compose()
    hydra_cfg = OmegaConf.masked_copy(config, "hydra")
    with read_write(hydra_cfg.hydra.runtime), open_dict(hydra_cfg.hydra.runtime):
        hydra_cfg.hydra.runtime.output_dir = str(job_dir.resolve())
    ret = JobReturn(
        overrides=list(job.overrides),
        hydra_cfg=hydra_cfg,
        working_dir=str(job_dir),
        task_name=str(OmegaConf.select(config, "hydra.job.name")),
        status=JobStatus.FAILED,
    )
    ret.return_value = JobError(f"{type(exc).__name__}: {exc}", tb)
    record_failure_file(job_dir, tb)
    return ret


def record_failure_file(job_dir: Path, tb: str) -> None:
    with contextlib.suppress(OSError):
        atomic_write_text(job_dir / ERROR_FILE, tb)


def _finish(ret: JobReturn, *, keep_exception: bool) -> JobReturn:
    """Write a failed job's traceback into its directory; make the error picklable."""
    if ret.status != JobStatus.FAILED:
        return ret
    exc = ret._return_value
    tb = "".join(traceback.format_exception(exc)) if isinstance(exc, BaseException) else str(exc)
    assert ret.hydra_cfg is not None
    if not isinstance(exc, Preempted):  # stopped after a checkpoint: not a failure
        record_failure_file(Path(ret.hydra_cfg.hydra.runtime.output_dir), tb)
    if not keep_exception:
        ret.return_value = JobError(f"{type(exc).__name__}: {exc}", tb)
    return ret


def execute(
    hydra_context: HydraContext,
    task_function: TaskFunction,
    job: Job,
    *,
    configure_logging: bool = True,
    keep_exception: bool = False,
    config: DictConfig | None = None,
) -> JobReturn:
    """Run one job through Hydra's ``run_job`` (in whatever process this is), composing
    its config here unless the caller already did (``config``). The task runs as an
    rlsweep job (:func:`rlsweep.task.as_task`): its own threads and seeds, its result
    recorded with its identity."""
    setup_globals()
    if config is None:
        config = job.compose()
    HydraConfig.instance().set_config(config)
    ret = run_job(
        hydra_context=hydra_context,
        task_function=as_task(task_function),
        config=config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
        configure_logging=configure_logging,
    )
    return _finish(ret, keep_exception=keep_exception)


# In a worker: the launch whose Hydra state is installed (digest of its blob) and its
# (hydra_context, task_function). Workers are reused across jobs and sweeps.
_installed: dict[bytes, tuple[HydraContext, TaskFunction]] = {}


def _install(shared_blob: bytes) -> tuple[HydraContext, TaskFunction]:
    """Restore Hydra's singletons once per launch in this worker, not once per job:
    ``Singleton.set_state`` rescans every Hydra plugin, a large part of a short job's cost."""
    key = hashlib.blake2b(shared_blob, digest_size=16).digest()
    if key not in _installed:
        hydra_context, task_function, singleton_state = cloudpickle.loads(shared_blob)
        Singleton.set_state(singleton_state)
        _installed.clear()
        _installed[key] = (hydra_context, task_function)
    return _installed[key]


def worker_entry(shared_blob: bytes, job_blob: bytes) -> JobReturn:
    """Entry point in a worker process: restore Hydra's singletons, then run the job."""
    from ._dispatch import WORKER_PID_FILE, write_worker_pid

    hydra_context, task_function = _install(shared_blob)
    job: Job = cloudpickle.loads(job_blob)
    # Composed once: its directory comes from the config the job runs with.
    config = job.compose()
    job_dir = resolve_dir(config)
    write_worker_pid(job_dir)
    try:
        return execute(hydra_context, task_function, job, config=config)
    finally:
        (job_dir / WORKER_PID_FILE).unlink(missing_ok=True)


# ---------------------------------------------------------------- executors


def thread_env(threads: int) -> dict[str, str]:
    return {k: str(threads) for k in THREAD_ENV_VARS}


def init_worker(env: dict[str, str], parent_pid: int) -> None:
    """Runs once in each worker process: thread caps, and die with the parent.

    If the sweep process is killed (SIGKILL, OOM), its workers must not run on as orphans:
    a resumed sweep would run the same jobs again beside them. A daemon thread watches the
    parent pid and exits the worker as soon as the worker is re-parented.
    """
    os.environ.update(env)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(70)

    threading.Thread(target=watch, name="rlsweep-parent-watch", daemon=True).start()


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


def make_pool(options: LauncherOptions) -> tuple[FuturesExecutor, Callable[[], None]]:
    """The futures executor and how to shut it down (loky's stays warm for reuse)."""
    env = thread_env(options.threads_per_job)
    if options.backend == "loky":
        from joblib.externals.loky import get_reusable_executor

        pool = get_reusable_executor(
            max_workers=options.n_jobs,
            timeout=options.idle_worker_timeout,
            env=env,
            initializer=init_worker,
            initargs=(env, os.getpid()),
        )
        return pool, lambda: None
    if options.backend == "multiprocessing":
        import multiprocessing

        mp = ProcessPoolExecutor(
            max_workers=options.n_jobs,
            mp_context=multiprocessing.get_context(options.start_method),
            initializer=init_worker,
            initargs=(env, os.getpid()),
        )
        return mp, lambda: mp.shutdown(wait=True)
    threads = ThreadPoolExecutor(max_workers=options.n_jobs, thread_name_prefix="rlsweep-job")
    return threads, lambda: threads.shutdown(wait=True)


def kill_pool(pool: FuturesExecutor, backend: str) -> None:
    """Stop a pool now: kill every worker with its children, then drop queued jobs."""
    from joblib.externals.loky.backend.utils import kill_process_tree

    processes = getattr(pool, "_processes", None) or {}
    for proc in list(processes.values()):
        with contextlib.suppress(Exception):
            kill_process_tree(proc)
    with contextlib.suppress(Exception):
        if backend == "loky":
            pool.shutdown(wait=True, kill_workers=True)  # type: ignore[call-arg]
        else:
            pool.shutdown(wait=True, cancel_futures=True)


def run_parallel(
    launcher: RLSweepLauncher, options: LauncherOptions, jobs: list[Job], progress: Progress
) -> list[JobReturn]:
    from ._dispatch import Dispatcher, process_submitter

    ctx = launcher.context
    submit: Callable[[FuturesExecutor, Job], Future[JobReturn]]
    with contextlib.ExitStack() as stack:
        if options.backend == "threading":
            if _changes_dir(ctx.config):
                from rlsweep.errors import ConfigError

                raise ConfigError(
                    "hydra.launcher.backend=threading needs hydra.job.chdir=false (all threads "
                    "share one working directory; Hydra versions before 1.2 change it by "
                    "default): set hydra.job.chdir=false or use backend=loky."
                )
            stack.enter_context(_thread_local_hydra_config())

            def submit_thread(pool: FuturesExecutor, job: Job) -> Future[JobReturn]:
                return pool.submit(
                    execute,
                    ctx.hydra_context,
                    ctx.task_function,
                    job,
                    configure_logging=False,
                )

            submit = submit_thread
        else:
            submit = process_submitter(options, ctx.hydra_context, ctx.task_function)
        return Dispatcher(options, submit, jobs, progress).run()


def run_serial(
    launcher: RLSweepLauncher, options: LauncherOptions, jobs: list[Job], progress: Progress
) -> list[JobReturn]:
    ctx = launcher.context
    results: list[JobReturn] = []
    done = failed = 0
    for job in jobs:
        progress.update(running=1, force=not results)
        for attempt in range(options.retries + 1):
            ret = execute(ctx.hydra_context, ctx.task_function, job, keep_exception=True)
            if ret.status == JobStatus.COMPLETED or attempt == options.retries:
                break
            log.warning(f"job #{job.idx} failed on attempt {attempt + 1}: retrying")
        results.append(ret)
        if ret.status == JobStatus.COMPLETED:
            done += 1
        else:
            failed += 1
        progress.update(done=done, failed=failed, running=0)
    return results


def launch(
    launcher: RLSweepLauncher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> Sequence[JobReturn]:
    """Run a batch of jobs; one JobReturn per job, in input order."""
    setup_globals()
    ctx = launcher.context
    configure_log(ctx.config.hydra.hydra_logging, ctx.config.hydra.verbose)
    jobs = _take_jobs(launcher, job_overrides, initial_job_idx)
    options = launcher.options.for_threads(max((j.identity.threads for j in jobs), default=1))
    sweep_dir = Path(str(ctx.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    submitit = options.executor in ("slurm", "submitit_local")
    how = {
        "serial": "serially, in-process",
        "slurm": "as a SLURM job array",
        "submitit_local": "with submitit's local executor",
    }.get(options.executor, f"with {options.backend} on {options.n_jobs} workers")
    threads = "" if submitit else f" ({options.threads_per_job} threads per job)"
    log.info(f"rlsweep launching {len(jobs)} jobs {how}{threads}; sweep dir: {sweep_dir}")
    if len(jobs) <= 32:
        for job in jobs:
            log.info(f"\t#{job.idx} : {' '.join(filter_overrides(job.overrides))}")
    progress = Progress(total=len(jobs), enabled=options.progress)
    runner: Callable[[RLSweepLauncher, LauncherOptions, list[Job], Progress], list[JobReturn]]
    if options.executor == "serial":
        runner = run_serial
    elif options.executor in ("slurm", "submitit_local"):
        from ._submitit import run_submitit

        runner = run_submitit
    else:
        runner = run_parallel
    try:
        if options.n_jobs * options.threads_per_job > available_cores() and not submitit:
            log.warning(
                f"{options.n_jobs} jobs at once with {options.threads_per_job} threads each "
                f"oversubscribe the {available_cores()} cores (results are unaffected): "
                "leave n_jobs unset to run as many jobs as fit"
            )
        results = runner(launcher, options, jobs, progress)
    finally:
        progress.close()
    return results
