"""The submitit executors: SLURM job arrays (``launcher=slurm``) and submitit's local executor.

- One SLURM job array per batch (``array_parallelism`` bounds how many run at once), or
  several when the batch has more jobs than the cluster's ``MaxArraySize``.
  Under ``submitit_local`` the parent starts at most that many jobs at a time itself
  (submitit's local executor would start them all at once).
- Each job runs :func:`rlsweep.launch.worker.worker_entry` (see ``submitit_job``), the
  function joblib's workers run, so it seeds itself the same way and gives the same
  result bit for bit.
- A job whose task raised ends FAILED in SLURM (``sacct`` shows FAILED, not COMPLETED):
  the callable raises after writing ``error.txt``; the parent rebuilds the failed
  ``JobReturn`` from ``error.txt`` and submitit's record of the error.
- A job SLURM kills (time limit, ``scancel``, out of memory) leaves no result: the parent
  sees its state in ``sacct`` and reports it failed with that cause; it never waits for it.
- While waiting, the progress line shows queued / running / done / failed from submitit's
  result files and ``sacct``'s job states; Ctrl-C (or SIGTERM) cancels the array.
- With ``gpus_per_job`` (or ``slurm.gpus_per_node``), every job gets its GPU(s): a SLURM
  array task is its own allocation (whole GPUs); under ``submitit_local`` the parent hands
  each job a slot of a device group (:class:`rlsweep.gpus.Lanes`, shares of a GPU too)
  and the job sets its CUDA_VISIBLE_DEVICES before anything runs.
- Every submitted task is recorded in the sweep directory (:mod:`.slurm_tasks`): a run
  after the sweep's process was killed adopts its jobs' tasks still queued or running
  (follows them as its own) instead of submitting those jobs a second time.
- A streaming launch (``more``): the jobs a finished job releases are submitted while the
  parent polls, as further arrays (chunked by ``MaxArraySize`` too; with
  ``array_parallelism`` set, only while fewer jobs than that are queued or running), or
  under ``submitit_local`` as processes free up. Ctrl-C cancels them with the rest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cloudpickle
from hydra.core.utils import JobReturn, JobStatus

from rlsweep.errors import ConfigError
from rlsweep.executors.base import More
from rlsweep.executors.slurm_states import QUEUED_STATES, States, Tracked, first_word
from rlsweep.executors.slurm_tasks import Task, job_key, live_tasks, record_tasks, recorded_tasks
from rlsweep.executors.submitit_job import SubmititJob
from rlsweep.executors.submitit_setup import (
    cpus_per_task,
    max_array_size,
    sbatch_reason,
    slurm_parameters,
    submitit_folder,
)
from rlsweep.gpus import Lanes
from rlsweep.launch.jobs import LaunchContext, Returned, SweepJob, finished_return
from rlsweep.launch.options import LauncherOptions, available_cores
from rlsweep.launch.worker import process_env, shared_blob
from rlsweep.progress import Progress
from rlsweep.slurm_options import SlurmOptions
from rlsweep.threads import environment

log = logging.getLogger(__name__)

# How often the parent looks for finished jobs (result files), in seconds.
POLL_S = 1.0

# ---------------------------------------------------------------- the run


@dataclass
class SubmititRun:
    """One batch through submitit: submitted, watched until every job has a JobReturn,
    and cancelled on Ctrl-C, SIGTERM or an error; with ``more``, the jobs each finished
    job releases join it."""

    context: LaunchContext
    options: LauncherOptions
    jobs: list[SweepJob]
    progress: Progress
    more: More | None = None
    kind: str = field(init=False)
    opts: SlurmOptions = field(init=False)
    threads: int = field(init=False)
    states: States = field(init=False)
    folder: Path = field(init=False)
    tracked: list[Tracked] = field(default_factory=list)
    executor: Any = None
    lanes: Lanes = field(init=False)  # submitit_local's slots (see rlsweep.gpus)
    shared: bytes = b""  # Hydra's state, pickled once for every job of the launch
    array_limit: int = 0  # the cluster's MaxArraySize, read at the first submission
    job_name: str = ""  # the SLURM job name of its tasks

    def __post_init__(self) -> None:
        self.kind = self.options.executor
        self.opts = self.context.slurm
        self.threads = cpus_per_task(self.opts, self.jobs)
        self.states = States(self.kind)

    # ------------------------------------------------------------ set-up

    def check(self) -> None:
        self.opts.check(self.kind)

    def make_executor(self) -> Any:
        import submitit

        config = self.context.config
        name = self.job_name = f"{config.hydra.job.name}-{self.context.sweep_dir.name}"
        self.folder = submitit_folder(self.context)
        if self.kind == "slurm":
            ex = submitit.SlurmExecutor(
                folder=self.folder, max_num_timeout=self.opts.max_num_requeue
            )
            ex.update_parameters(
                **slurm_parameters(
                    self.opts,
                    threads=self.threads,
                    job_name=name,
                    n_jobs=len(self.jobs),
                    gpus=int(self.options.gpu_share),
                    numerics=self.options.numerics,
                )
            )
            return ex
        local = submitit.LocalExecutor(
            folder=self.folder, max_num_timeout=self.opts.max_num_requeue
        )
        local.update_parameters(
            timeout_min=self.opts.timeout_min,
            signal_delay_s=min(90, self.opts.timeout_min * 15),
            tasks_per_node=1,
            # The thread caps go through the environment (see _submit_local): a setup line
            # would put a shell between the job and the parent's cancel.
            setup=list(self.opts.setup),
        )
        by_cpu = max(1, available_cores() // self.threads)
        parallel = self.opts.array_parallelism or by_cpu  # and no more than the GPUs allow
        self.lanes = Lanes.create(self.options.devices, self.options.gpu_share, parallel)
        return local

    # ------------------------------------------------------------ main

    def run(self) -> list[JobReturn]:
        self.check()
        self.shared = shared_blob(self.context.hydra_context, self.context.task_function)
        self.executor = self.make_executor()
        self._track(self.jobs)
        try:
            if self.kind == "slurm":
                self._adopt()
            self._submit()
            while any(t.result is None for t in self.tracked):
                self._poll()
                self._submit()  # into the places freed, and the jobs the ended ones released
                self._show()
                if any(t.result is None for t in self.tracked):
                    time.sleep(POLL_S)
        except BaseException:  # Ctrl-C, SIGTERM (the sweeper's Terminated), errors
            self._cancel()
            raise
        self._show()
        return [t.result for t in self.tracked if t.result is not None]

    def _track(self, jobs: list[SweepJob]) -> None:
        """Follow these jobs from now on (the batch's, or jobs a finished one released)."""
        cwd = os.getcwd()
        for job in jobs:
            fn = SubmititJob(
                self.shared, cloudpickle.dumps(job), self.threads, cwd, self.options.gpu_share
            )
            self.tracked.append(Tracked(job, fn))
            job.directory.mkdir(parents=True, exist_ok=True)

    def _adopt(self) -> None:
        """Follow, as this run's, the tasks an earlier run of the sweep submitted for these
        jobs that SLURM still has queued or running (that run's process was killed): they
        are not submitted again. A job such a task completed since this run was planned is
        done."""
        import submitit

        sweep_dir = self.context.sweep_dir
        tasks = recorded_tasks(sweep_dir)
        if not tasks:
            return
        recorded, live = {task.job for task in tasks}, live_tasks(tasks)
        adopted: list[str] = []
        finished: list[tuple[SweepJob, Returned]] = []
        now = time.monotonic()
        for t in list(self.tracked):
            key = job_key(sweep_dir, t.job.directory)
            task = live.get(key)
            if task is not None and task.name == self.job_name:
                t.sub, t.submitted_at = submitit.SlurmJob(task.folder, task.task_id), now
                adopted.append(task.task_id)
            elif key in recorded and (done := finished_return(t.job)) is not None:
                t.result = Returned(done, t.job)
                finished.append((t.job, t.result))
        _say_adopted(adopted, len(finished))
        if self.more is not None:  # the jobs they release
            for job, ret in finished:
                self._track(self.more(job, ret))

    def _submit(self) -> None:
        """Submit what may start now: under SLURM, every job not yet submitted (jobs a
        streaming launch released: while fewer than array_parallelism are live, if set)."""
        if self.kind == "submitit_local":
            self._submit_local()
            return
        waiting = [t for t in self.tracked if t.sub is None]
        if waiting and self.array_limit and self.opts.array_parallelism:
            live = sum(t.sub is not None and t.result is None for t in self.tracked)
            waiting = waiting[: max(0, self.opts.array_parallelism - live)]
        if waiting:
            self._submit_arrays(waiting)

    def _submit_arrays(self, waiting: list[Tracked]) -> None:
        """Submit jobs as job arrays of at most the cluster's MaxArraySize tasks each."""
        first = not self.array_limit
        self.array_limit = self.array_limit or max_array_size()
        limit = self.array_limit
        for start in range(0, len(waiting), limit):
            self._submit_chunk(waiting[start : start + limit], first=first and start == 0)
        arrays = list(dict.fromkeys(str(t.sub.job_id).split("_")[0] for t in waiting))
        jobs = f"{len(waiting)} {'' if first else 'released '}job{'s' if len(waiting) > 1 else ''}"
        (log.info if first else log.debug)(
            f"rlsweep: submitted {jobs} as SLURM job array{'s' if len(arrays) > 1 else ''} "
            f"{', '.join(arrays)} ({self.threads} cpus per task; at most {limit} tasks an "
            f"array, the cluster's MaxArraySize); submitit folder: {self.folder.parent}"
        )

    def _submit_chunk(self, chunk: list[Tracked], *, first: bool) -> None:
        from submitit.core.utils import FailedJobError

        sink = io.StringIO()  # submitit prints sbatch's stderr; the error below says it once
        self.executor.update_parameters(array_parallelism=self.opts.array_parallelism or len(chunk))
        try:
            with contextlib.redirect_stderr(sink):
                subs = self.executor.submit_array([t.fn for t in chunk])
        except FailedJobError as exc:
            done = (
                "Nothing was submitted" if first else "The arrays submitted before it are cancelled"
            )
            raise ConfigError(
                f"SLURM refused the job array: {sbatch_reason(exc)}. {done}. "
                "Check hydra.launcher.slurm.partition / account / qos / constraint and the "
                "other options (`sinfo -s` lists the partitions, `sacctmgr show assoc "
                "user=$USER` your accounts)."
            ) from None
        now = time.monotonic()
        for t, sub in zip(chunk, subs, strict=True):
            t.sub, t.submitted_at = sub, now
        sweep_dir = self.context.sweep_dir
        folder = str(self.folder)
        record_tasks(
            sweep_dir,
            [
                Task(str(t.sub.job_id), job_key(sweep_dir, t.job.directory), folder, self.job_name)
                for t in chunk
            ],
        )

    def _submit_local(self) -> None:
        for t in self.tracked:
            if t.sub is not None:
                continue
            lane = self.lanes.take()
            if lane is None:  # every slot (of the cores, or of the GPUs) is held
                return
            t.lane = lane
            if self.options.devices:  # the job sets them before anything runs
                t.fn = dataclasses.replace(t.fn, devices=self.lanes.devices[lane])
            with environment(process_env(self.threads, self.options.numerics)):
                t.sub, t.submitted_at = self.executor.submit(t.fn), time.monotonic()

    def _array_ids(self) -> list[str]:
        return list(dict.fromkeys(str(t.sub.job_id).split("_")[0] for t in self.tracked if t.sub))

    # ------------------------------------------------------------ waiting

    def _poll(self) -> None:
        if self.kind == "slurm":
            self.states.refresh(self.tracked, self._array_ids())
        now = time.monotonic()
        for t in list(self.tracked):  # a streaming launch appends the jobs it releases
            if t.sub is None or t.result is not None:
                continue
            outcome = self.states.outcome(t, now, self.opts.timeout_min)
            t.result = None if outcome is None else Returned(outcome, t.job)
            if t.result is not None and t.lane is not None:  # its slot goes to the next job
                self.lanes.give(t.lane)
                t.lane = None
            if t.result is not None and self.more is not None:
                self._track(self.more(t.job, t.result))

    def _show(self) -> None:
        done = failed = running = queued = 0
        for t in self.tracked:
            if t.result is not None:
                if t.result.status == JobStatus.COMPLETED:
                    done += 1
                else:
                    failed += 1
            elif first_word(self.states.state(t)) in QUEUED_STATES:
                queued += 1
            else:
                running += 1
        self.progress.update(done=done, failed=failed, running=running, queued=queued)

    # ------------------------------------------------------------ interrupts

    def _cancel(self) -> None:
        """Stop every job of this batch still queued or running (Ctrl-C, SIGTERM, errors),
        and say what was done; what could not be cancelled is said with the command to do it."""
        live = [t for t in self.tracked if t.sub is not None and t.result is None]
        if not live:
            return
        if self.kind == "slurm":
            _scancel(self._array_ids())
            return
        from joblib.externals.loky.backend.utils import kill_process_tree

        left = []
        for t in live:
            process = getattr(t.sub, "_process", None)
            try:
                if process is not None:
                    kill_process_tree(process)  # the controller (or its shell), and the job
                    process.wait(timeout=10)
                else:
                    t.sub.cancel(check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                left.append(f"{t.sub.job_id} ({exc})")
        print(
            f"\n[rlsweep] cancelled {len(live) - len(left)} submitit_local job(s)"
            + (f"; could not stop: {', '.join(left)}." if left else "."),
            file=sys.stderr,
            flush=True,
        )


def _say_adopted(adopted: list[str], finished: int) -> None:
    """Say which jobs an earlier run's SLURM tasks are running, or completed meanwhile."""
    if adopted:
        arrays = ", ".join(dict.fromkeys(a.split("_")[0] for a in adopted))
        n = len(adopted)
        log.info(
            f"rlsweep: {n} job{'s' if n > 1 else ''} of this sweep still queued or running in "
            f"SLURM (job array {arrays}, submitted by an earlier run of this sweep whose "
            "process ended): following them instead of submitting them again"
        )
    if finished:
        log.info(
            f"rlsweep: {finished} job{'s' if finished > 1 else ''} completed by an earlier "
            "run's SLURM tasks while this run started: not submitted again"
        )


def _scancel(ids: list[str]) -> None:
    """Cancel SLURM jobs, and say whether it worked."""
    command = ["scancel", *ids]
    try:
        out = subprocess.run(command, check=False, timeout=30, capture_output=True, text=True)
        problem = out.stderr.strip() if out.returncode != 0 else ""
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    if problem:
        message = (
            f"could not cancel SLURM job array {', '.join(ids)}: {problem}. Its jobs may still "
            f"run: check with `squeue -j {','.join(ids)}` and run `{' '.join(command)}`."
        )
    else:
        message = f"cancelled SLURM job array {', '.join(ids)} ({' '.join(command)})."
    print(f"\n[rlsweep] {message}", file=sys.stderr, flush=True)


def run_submitit(
    context: LaunchContext,
    options: LauncherOptions,
    jobs: list[SweepJob],
    progress: Progress,
    more: More | None = None,
) -> list[JobReturn]:
    """Run a batch with submitit: one JobReturn per job, in input order (then the jobs
    ``more`` released, in release order)."""
    run = SubmititRun(context, options, jobs, progress, more)
    # Heartbeat lines name the jobs submitted and not yet ended.
    progress.follow(
        lambda: [
            t.job.directory.name for t in run.tracked if t.sub is not None and t.result is None
        ]
    )
    return run.run()
