"""The Ray executor (``executor: ray``): one Ray task per job on a Ray cluster's nodes,
through the same fault-tolerant :class:`~rlsweep.executors.dispatch.Dispatcher` the pool
uses (retries and ``attempts.jsonl``, streaming, Ctrl-C).

- Connects to an existing cluster or starts a local one (``hydra.launcher.ray.address``),
  once per process.
- Before any job starts: every node a job fits must see the sweep directory as this
  process does (:func:`~rlsweep.executors.ray_cluster.check_shared`), and some node must
  have the CPUs (the job's threads) and GPU share (``gpus_per_job``) a job asks for.
- Each task asks for the job's thread count in CPUs and its GPU share (Ray sets the
  task's ``CUDA_VISIBLE_DEVICES``), with Ray's own retries off: rlsweep's ``retries``
  decide, and every attempt is in ``attempts.jsonl``. A task runs the job as a pool's
  worker does (:func:`~rlsweep.launch.worker.worker_entry`), so its numbers are serial's.
- At most as many jobs are handed to Ray as the cluster's nodes fit (``n_jobs``, if set):
  a freed slot takes the next job, or a job a search released.
- A job whose worker or node dies fails alone (:class:`~rlsweep.errors.JobLost`), with
  Ray's account of the cause, unless it recorded its result first; Ctrl-C cancels every
  task (killing its worker), and so does ``job_timeout_s`` a job's task that runs longer.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor as FuturesExecutor
from concurrent.futures import Future
from typing import Any

import cloudpickle
from hydra.core.utils import JobReturn

from rlsweep.errors import JobError, JobLost
from rlsweep.executors.base import More
from rlsweep.executors.dispatch import Dispatcher, Submit
from rlsweep.executors.ray_cluster import (
    CHECK_FILE,
    alive_nodes,
    check_shared,
    connect,
    job_nodes,
    run_on_node,
)
from rlsweep.launch.jobs import LaunchContext, SweepJob
from rlsweep.launch.options import LauncherOptions
from rlsweep.launch.worker import process_env, shared_blob
from rlsweep.progress import Progress

log = logging.getLogger(__name__)


def run_ray(
    context: LaunchContext,
    options: LauncherOptions,
    jobs: list[SweepJob],
    progress: Progress,
    more: More | None = None,
) -> list[JobReturn]:
    """Run a batch on a Ray cluster: one JobReturn per job, in input order (then the jobs
    ``more`` released, in release order)."""
    where = connect(options.ray)
    threads, gpus = options.threads_per_job, options.gpu_share
    nodes = job_nodes(alive_nodes(), threads, gpus)
    slots = sum(node.fits(threads, gpus) for node in nodes)
    if options.n_jobs_auto:
        options = dataclasses.replace(options, workers=slots)
    check_file = context.sweep_dir.resolve() / CHECK_FILE
    task_options = _task_options(options)
    token = check_shared(context.sweep_dir, nodes, task_options["runtime_env"])
    try:
        log.info(
            f"rlsweep: {where}: {len(nodes)} node(s) for these jobs, room for {slots} at "
            f"once ({threads} CPU{'s' if threads > 1 else ''}"
            + (f", {gpus:g} GPU" if gpus else "")
            + f" each); at most {options.workers} handed to Ray at a time"
        )
        pool = RayPool(task_options)
        submit = _submitter(context, str(check_file), token, gpus)
        dispatcher = Dispatcher(options, submit, jobs, progress, RayPools(pool), more)
        progress.follow(
            lambda: [dispatcher.jobs[i].directory.name for i in dispatcher.in_flight.values()]
        )
        return dispatcher.run()
    finally:
        check_file.unlink(missing_ok=True)


def _task_options(options: LauncherOptions) -> dict[str, Any]:
    """Each job's task: its CPUs and GPU share, its thread caps and the variables that pin
    its kernels (numerics: in the worker process's environment from its start, as the
    pool's workers), and no retry by Ray. A task with GPUs runs in a fresh worker process (max_calls=1, Ray's default for them,
    lost when set through .options()): CUDA reads CUDA_VISIBLE_DEVICES once per process,
    and a reused worker would keep the devices of its first job."""
    task: dict[str, Any] = {
        "num_cpus": options.threads_per_job,
        "num_gpus": options.gpu_share,
        "max_retries": 0,
        "retry_exceptions": False,
        "runtime_env": {"env_vars": process_env(options.threads_per_job, options.numerics)},
    }
    if options.gpu_share:
        task["max_calls"] = 1
    return task


def _submitter(context: LaunchContext, check_file: str, token: str, gpus: float) -> Submit:
    """How a job is handed to Ray: Hydra's state put in the object store once per launch."""
    import ray

    # Resolved to the bytes on the node (a task argument that is an ObjectRef).
    shared: Any = ray.put(shared_blob(context.hydra_context, context.task_function))
    cwd = os.getcwd()

    def submit(pool: FuturesExecutor, job: SweepJob) -> Future[JobReturn]:
        job_blob = cloudpickle.dumps(job)
        return pool.submit(run_on_node, shared, job_blob, cwd, check_file, token, gpus)

    return submit


class RayPool(FuturesExecutor):
    """Ray tasks as a ``concurrent.futures`` executor: ``submit`` starts a task with the
    launch's options; a future fails with the task's own exception if it raised, with
    :class:`~rlsweep.errors.JobLost` if Ray lost it (its worker or node died)."""

    def __init__(self, task_options: dict[str, Any]) -> None:
        self.task_options = task_options
        self.live: dict[Any, Future[Any]] = {}  # ObjectRef -> its future, until it ends
        self.remotes: dict[Callable[..., Any], Any] = {}
        self.lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        import ray

        if fn not in self.remotes:  # made once: Ray exports a function once per remote
            self.remotes[fn] = ray.remote(**self.task_options)(fn)
        ref = self.remotes[fn].remote(*args, **kwargs)
        out: Future[Any] = Future()
        with self.lock:
            self.live[ref] = out
        ref.future().add_done_callback(lambda done: self._settle(ref, done, out))
        return out

    def _settle(self, ref: Any, done: Future[Any], out: Future[Any]) -> None:
        from ray.exceptions import RayError, RayTaskError

        with self.lock:
            self.live.pop(ref, None)
        try:
            out.set_result(done.result())
        except RayTaskError as exc:  # the task raised: its exception, with the node's traceback
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            out.set_exception(JobError(f"{type(cause).__name__}: {cause}", exc.traceback_str))
        except RayError as exc:
            out.set_exception(JobLost(_lost(exc)))
        except BaseException as exc:  # cancelled, or what Ray did not wrap: said as it is
            out.set_exception(exc)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Cancel every task still queued or running (killing its worker)."""
        with self.lock:
            refs = list(self.live)
        for ref in refs:
            _cancel(ref)
        if refs:
            log.warning(f"cancelled {len(refs)} Ray task(s) of this sweep")

    def cancel(self, job: Future[Any]) -> None:
        """Cancel the task of one job's future (killing its worker, wherever it runs): its
        future then fails with :class:`~rlsweep.errors.JobLost`."""
        with self.lock:
            refs = [ref for ref, out in self.live.items() if out is job]
        for ref in refs:
            _cancel(ref)


def _cancel(ref: Any) -> None:
    import ray

    try:
        ray.cancel(ref, force=True)
    except Exception as exc:  # already ended, or the cluster is gone
        log.warning(f"could not cancel Ray task {ref.task_id().hex()}: {exc!r}")


def _lost(exc: BaseException) -> str:
    """Ray's account of a lost task, in one line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"Ray lost the job's process: {type(exc).__name__}: {lines[0] if lines else ''}"


@dataclasses.dataclass
class RayPools:
    """The dispatcher's pools on Ray: one per launch, cancelled on Ctrl-C or an error."""

    pool: RayPool

    def make(self, lane: int) -> tuple[FuturesExecutor, Callable[[], None]]:
        """The launch's one pool (Ray places each task on a node and its GPUs: one lane)."""
        return self.pool, lambda: None

    def kill(self, pool: FuturesExecutor) -> None:
        pool.shutdown(wait=False, cancel_futures=True)

    def stop(self, pool: FuturesExecutor, job: Future[JobReturn], pid: int) -> None:
        """A job past its time limit: its task cancelled (its worker killed on its node;
        ``pid``, read on this machine, may be another node's)."""
        self.pool.cancel(job)
