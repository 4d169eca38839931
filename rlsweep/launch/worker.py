"""What a worker process (a pool's, or a SLURM job) runs: Hydra's state installed once per
launch, then each job handed to it."""

from __future__ import annotations

import atexit
import functools
import gc
import hashlib
import io
import multiprocessing
import multiprocessing.spawn
import os
import sys
import threading
import time
from collections import ChainMap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType
from typing import Any, ClassVar

import cloudpickle
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn
from hydra.types import HydraContext, TaskFunction

from rlsweep.launch.compose import resolve_dir
from rlsweep.launch.jobs import SweepJob, execute, without_configs
from rlsweep.numerics import worker_env
from rlsweep.store import WORKER_PID_FILE, refuse_link, write_no_follow
from rlsweep.threads import THREAD_ENV_VARS as JOB_THREAD_ENV_VARS
from rlsweep.trace import event

# Set in every worker process (and SLURM job) to the jobs' thread count before anything
# is imported there; RLSWEEP_THREADS_PER_JOB tells a job how many threads it was given.
THREAD_ENV_VARS = (*JOB_THREAD_ENV_VARS, "RLSWEEP_THREADS_PER_JOB")

# In a worker: the launch whose Hydra state is installed (digest of its blob) and its
# (hydra_context, task_function). Workers are reused across jobs and sweeps.
_installed: dict[bytes, tuple[HydraContext, TaskFunction]] = {}


def shared_blob(hydra_context: HydraContext, task_function: TaskFunction) -> bytes:
    """What every job of a launch needs in a worker, pickled once per launch."""
    buffer = io.BytesIO()
    state = (hydra_context, task_function, Singleton.get_state(), main_module())
    _KeepFileNames(buffer).dump(state)
    return buffer.getvalue()


def main_module() -> dict[str, str]:
    """How a worker finds the app's ``__main__`` (the script, or ``-m`` module), in the form
    :func:`multiprocessing.spawn.prepare` takes: a config may name a target defined there
    (hydra-zen's ``builds(make_policy)`` is ``__main__.make_policy``)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        return {"init_main_from_name": spec.name}
    path = getattr(main, "__file__", None)
    return {"init_main_from_path": os.path.abspath(path)} if path else {}


def _code_with_file_name(constructor: Any, args: tuple[Any, ...], file_name: str) -> CodeType:
    """A code object rebuilt by cloudpickle, with the file name it was compiled from."""
    code: CodeType = constructor(*args)
    return code.replace(co_filename=file_name)


_reduce_code = cloudpickle.Pickler.dispatch_table[CodeType]


def _reduce_code_keeping_file_name(code: CodeType) -> tuple[Any, ...]:
    constructor, args = _reduce_code(code)
    return _code_with_file_name, (constructor, args, code.co_filename)


class _KeepFileNames(cloudpickle.Pickler):
    """cloudpickle, keeping the file name of the code it pickles by value.

    An app's task function lives in its script's ``__main__``, which workers cannot import:
    cloudpickle sends it by value and names its code (and that of every helper of the script
    it calls) ``<dynamic-code>``, so a failed job's traceback would say ``File
    "<dynamic-code>", line 71`` instead of the app's own file and line."""

    dispatch_table: ClassVar[ChainMap[Any, Any]] = ChainMap(
        {CodeType: _reduce_code_keeping_file_name},
        cloudpickle.Pickler.dispatch_table,
    )


def _install(blob: bytes) -> tuple[HydraContext, TaskFunction]:
    """Restore Hydra's singletons once per launch in this worker, not once per job:
    ``Singleton.set_state`` rescans every Hydra plugin, a large part of a short job's cost."""
    key = hashlib.blake2b(blob, digest_size=16).digest()
    if key not in _installed:
        event("install")
        hydra_context, task_function, singleton_state, main = cloudpickle.loads(blob)
        # The app's __main__ imported as multiprocessing's spawned workers do (its
        # ``if __name__ == "__main__":`` block does not run), for targets named there.
        multiprocessing.spawn.prepare(main)
        Singleton.set_state(singleton_state)
        _installed.clear()
        _installed[key] = (hydra_context, task_function)
    return _installed[key]


def install(shared: bytes) -> None:
    """Entry point in a worker process started ahead of its first job: restore Hydra's
    singletons (and so import the app) now."""
    _install(shared)


def worker_entry(shared: bytes, job_blob: bytes) -> JobReturn:
    """Entry point in a worker process: restore Hydra's singletons, then run the job."""
    hydra_context, task_function = _install(shared)
    return _run(hydra_context, task_function, cloudpickle.loads(job_blob))


# In a worker forked from the sweep's process: the launch's Hydra context and task function,
# inherited in memory (set by the parent before the fork: nothing to unpickle or import).
_inherited: tuple[HydraContext, TaskFunction] | None = None


def inherit(hydra_context: HydraContext, task_function: TaskFunction) -> None:
    """In the sweep's process, before a pool forks its workers: what they will inherit."""
    global _inherited
    _inherited = (hydra_context, task_function)


def forked_entry(job_blob: bytes) -> JobReturn:
    """Entry point in a worker forked from the sweep's process (see :func:`inherit`)."""
    if _inherited is None:
        raise RuntimeError("a forked worker without the launch's state (inherit not called)")
    return _run(*_inherited, cloudpickle.loads(job_blob))


def _run(hydra_context: HydraContext, task_function: TaskFunction, job: SweepJob) -> JobReturn:
    """Run one job in this worker; its pid is in the job's directory meanwhile."""
    # Composed once: its directory comes from the config the job runs with.
    config = job.compose()
    job_dir = resolve_dir(config)
    write_worker_pid(job_dir)
    try:
        with platform_start_method():
            # Sent back without its configs: the parent composes them if read (Returned).
            return without_configs(execute(hydra_context, task_function, job, config=config))
    finally:
        (job_dir / WORKER_PID_FILE).unlink(missing_ok=True)


@contextmanager
def platform_start_method() -> Iterator[None]:
    """While a job runs: multiprocessing's default start method is the platform's, as in a
    process the app was started in by hand.

    A joblib (loky) worker's default is ``loky``: an app's ``multiprocessing.Process``,
    ``Pool`` or gymnasium ``AsyncVectorEnv`` left on the default context would start its
    children through loky's pickler (which cannot pickle the shared memory of an async
    vector env: the job fails) and as fresh interpreters (whose unseeded randomness cannot
    continue the job's streams), where run serially, on SLURM or on Ray they are forked.
    """
    previous = multiprocessing.get_start_method(allow_none=True)
    if previous is None or previous in multiprocessing.get_all_start_methods():
        yield
        return
    multiprocessing.set_start_method(None, force=True)
    try:
        yield
    finally:
        multiprocessing.set_start_method(previous, force=True)


def process_env(threads: int, numerics: str = "native") -> dict[str, str]:
    """The variables a worker process (or submitit job) starts with: the thread count of its
    jobs (``threads``), and the variables that pin their kernels (``numerics``)."""
    return {**{k: str(threads) for k in THREAD_ENV_VARS}, **worker_env(numerics)}


def init_worker(env: dict[str, str], parent_pid: int) -> None:
    """Runs once in each worker process: thread caps, and die with the parent.

    If the sweep process is killed (SIGKILL, OOM), its workers must not run on as orphans:
    a resumed sweep would run the same jobs again beside them. A daemon thread watches the
    parent pid and exits the worker as soon as the worker is re-parented.
    """
    os.environ.update(env)
    event("worker-init")
    exit_without_collecting()

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(70)

    threading.Thread(target=watch, name="rlsweep-parent-watch", daemon=True).start()


@functools.cache
def exit_without_collecting() -> None:
    """At exit, skip the interpreter's garbage collections over every object left.

    With torch imported they are a large part of a process's exit (more under load), which
    a sweep's command waits for twice: its parent's interpreter shutdown joins its loky
    workers, then its own exit (matplotlib and pyarrow imported too; bench/overhead.py
    measures the end of a sweep). ``gc.freeze`` at exit leaves every atexit handler, flush
    and close to run as they would without it (registered last, it runs first); only cycles
    still alive at exit are not collected, whose finalizers Python never promises to run at
    exit anyway. Registered once."""
    atexit.register(gc.freeze)


def write_worker_pid(job_dir: Path) -> None:
    """Called in the worker as a job starts: lets the parent kill exactly this job. A job
    directory that is a symbolic link is refused (:class:`~rlsweep.store.LinkRefused`)
    before anything is written there (a sweeper other than rlsweep's plans no job)."""
    job_dir.mkdir(parents=True, exist_ok=True)
    refuse_link(job_dir)
    write_no_follow(job_dir / WORKER_PID_FILE, str(os.getpid()))


def worker_pid(job_dir: Path) -> int | None:
    """The pid of the worker running the job in ``job_dir`` (None: none has started it)."""
    try:
        return int((job_dir / WORKER_PID_FILE).read_text())
    except (OSError, ValueError):
        return None
