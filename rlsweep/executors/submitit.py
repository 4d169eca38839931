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
- With ``gpus_per_node``, every job gets its own GPU(s): a SLURM array task is its own
  allocation; under ``submitit_local`` the parent hands each job distinct devices.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cloudpickle
from hydra.core.utils import JobReturn, JobStatus

from rlsweep.errors import ConfigError
from rlsweep.executors.slurm_states import QUEUED_STATES, States, Tracked, first_word
from rlsweep.executors.submitit_job import SubmititJob
from rlsweep.launch.jobs import Job, LaunchContext
from rlsweep.launch.options import LauncherOptions, available_cores
from rlsweep.launch.worker import THREAD_ENV_VARS, shared_blob
from rlsweep.progress import Progress
from rlsweep.slurm_options import SlurmOptions
from rlsweep.threads import environment

log = logging.getLogger(__name__)

# How often the parent looks for finished jobs (result files), in seconds.
POLL_S = 1.0
# SLURM's default MaxArraySize (array indices 0..1000).
DEFAULT_MAX_ARRAY_SIZE = 1001

# ---------------------------------------------------------------- options -> submitit


def job_threads(opts: SlurmOptions, jobs: Sequence[Job]) -> int:
    """CPUs per task: the option, or the jobs' own thread count (their largest)."""
    if opts.cpus_per_task is not None:
        return opts.cpus_per_task
    return max((job.identity.threads for job in jobs), default=1)


def setup_lines(opts: SlurmOptions, threads: int) -> list[str]:
    """Shell lines run before each job: thread caps first, then the user's own lines."""
    return [f"export {k}={threads}" for k in THREAD_ENV_VARS] + list(opts.setup)


def slurm_parameters(
    opts: SlurmOptions, *, threads: int, job_name: str, n_jobs: int
) -> dict[str, Any]:
    """``SlurmExecutor.update_parameters`` keywords (submitit's names for sbatch options)."""
    params: dict[str, Any] = {
        "job_name": job_name,
        "time": opts.timeout_min,
        "nodes": 1,
        "ntasks_per_node": 1,
        "cpus_per_task": threads,
        "array_parallelism": opts.array_parallelism or max(1, n_jobs),
        "setup": setup_lines(opts, threads),
        # USR2 (time-out warning) 90 s before the limit, less for short limits: with the
        # default 90 s, a limit of 1 min would signal every job as it starts.
        "signal_delay_s": min(90, opts.timeout_min * 15),
    }
    optional = {
        "partition": opts.partition,
        "account": opts.account,
        "qos": opts.qos,
        "constraint": opts.constraint,
        "exclude": opts.exclude,
        "mem": None if opts.mem_gb is None else f"{opts.mem_gb}GB",
        "gpus_per_node": opts.gpus_per_node or None,
    }
    params.update({k: v for k, v in optional.items() if v is not None})
    if opts.additional_parameters:
        params["additional_parameters"] = dict(opts.additional_parameters)
    return params


def local_gpus() -> list[int]:
    """GPU indices this machine shows (CUDA_VISIBLE_DEVICES, else torch's count)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [int(x) for x in visible.split(",") if x.strip().isdigit()]
    try:
        import torch
    except ImportError:  # no torch: no GPU it could use
        return []
    return list(range(torch.cuda.device_count()))


def submitit_folder(context: LaunchContext) -> Path:
    """A fresh folder for this batch (job ids restart when a cluster's state is wiped)."""
    base = context.slurm.submitit_folder
    root = Path(base) if base else context.sweep_dir / ".submitit"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = root / stamp
    n = 1
    while folder.exists():
        n += 1
        folder = root / f"{stamp}-{n}"
    return folder.absolute() / "%j"


def max_array_size() -> int:
    """Tasks one job array may hold on this cluster (``MaxArraySize`` in ``scontrol show
    config``; SLURM's default, 1001, if it cannot be read)."""
    try:
        out = subprocess.run(
            ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning(f"could not read MaxArraySize from scontrol ({exc}): assuming 1001")
        return DEFAULT_MAX_ARRAY_SIZE
    found = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, flags=re.MULTILINE)
    return max(1, int(found.group(1))) if found else DEFAULT_MAX_ARRAY_SIZE


def sbatch_reason(exc: BaseException) -> str:
    """SLURM's one-line reason from a failed sbatch (``sbatch: error: ...`` lines)."""
    text = str(exc)
    reasons = [line.split("error:", 1)[1].strip() for line in text.splitlines() if "error:" in line]
    return "; ".join(dict.fromkeys(r for r in reasons if r)) or text.strip().splitlines()[-1]


# ---------------------------------------------------------------- the run


@dataclass
class SubmititRun:
    """One batch through submitit: submitted, watched until every job has a JobReturn,
    and cancelled on Ctrl-C, SIGTERM or an error."""

    context: LaunchContext
    options: LauncherOptions
    jobs: list[Job]
    progress: Progress
    kind: str = field(init=False)
    opts: SlurmOptions = field(init=False)
    threads: int = field(init=False)
    states: States = field(init=False)
    folder: Path = field(init=False)
    tracked: list[Tracked] = field(default_factory=list)
    executor: Any = None
    free_gpus: list[int] = field(default_factory=list)
    parallel: int = 1

    def __post_init__(self) -> None:
        self.kind = self.options.executor
        self.opts = self.context.slurm
        self.threads = job_threads(self.opts, self.jobs)
        self.states = States(self.kind)

    # ------------------------------------------------------------ set-up

    def check(self) -> None:
        self.opts.check(self.kind)
        if self.kind == "submitit_local" and self.opts.gpus_per_node:
            self.free_gpus = local_gpus()
            if len(self.free_gpus) < self.opts.gpus_per_node:
                raise ConfigError(
                    f"hydra.launcher.slurm.gpus_per_node={self.opts.gpus_per_node} but this "
                    f"machine shows {len(self.free_gpus)} GPU(s) (CUDA_VISIBLE_DEVICES / "
                    "torch.cuda): set gpus_per_node=0 or run where the GPUs are."
                )

    def make_executor(self) -> Any:
        import submitit

        config = self.context.config
        name = f"{config.hydra.job.name}-{self.context.sweep_dir.name}"
        self.folder = submitit_folder(self.context)
        if self.kind == "slurm":
            ex = submitit.SlurmExecutor(
                folder=self.folder, max_num_timeout=self.opts.max_num_requeue
            )
            ex.update_parameters(
                **slurm_parameters(
                    self.opts, threads=self.threads, job_name=name, n_jobs=len(self.jobs)
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
        self.parallel = self.opts.array_parallelism or by_cpu
        if self.opts.gpus_per_node:
            self.parallel = min(self.parallel, len(self.free_gpus) // self.opts.gpus_per_node)
        return local

    # ------------------------------------------------------------ main

    def run(self) -> list[JobReturn]:
        self.check()
        shared = shared_blob(self.context.hydra_context, self.context.task_function)
        cwd = os.getcwd()
        self.tracked = [
            Tracked(job, SubmititJob(shared, cloudpickle.dumps(job), self.threads, cwd))
            for job in self.jobs
        ]
        self.executor = self.make_executor()
        for t in self.tracked:
            t.job.directory.mkdir(parents=True, exist_ok=True)
        try:
            if self.kind == "slurm":
                self._submit_array()
            while any(t.result is None for t in self.tracked):
                if self.kind == "submitit_local":
                    self._submit_local()
                self._poll()
                self._show()
                if any(t.result is None for t in self.tracked):
                    time.sleep(POLL_S)
        except BaseException:  # Ctrl-C, SIGTERM (the sweeper's Terminated), errors
            self._cancel()
            raise
        self._show()
        return [t.result for t in self.tracked if t.result is not None]

    def _submit_array(self) -> None:
        """Submit the batch as job arrays of at most the cluster's MaxArraySize tasks each."""
        limit = max_array_size()
        for start in range(0, len(self.tracked), limit):
            self._submit_chunk(self.tracked[start : start + limit], first=start == 0)
        arrays = self._array_ids()
        log.info(
            f"rlsweep: submitted {len(self.tracked)} jobs as SLURM job array"
            f"{'s' if len(arrays) > 1 else ''} {', '.join(arrays)} ({self.threads} cpus per "
            f"task; at most {limit} tasks an array, the cluster's MaxArraySize); submitit "
            f"folder: {self.folder.parent}"
        )

    def _submit_chunk(self, chunk: list[Tracked], *, first: bool) -> None:
        from submitit.core.utils import FailedJobError

        sink = io.StringIO()  # submitit prints sbatch's stderr; the error below says it once
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
        for t, sub in zip(chunk, subs, strict=True):
            t.sub = sub

    def _submit_local(self) -> None:
        running = sum(t.sub is not None and t.result is None for t in self.tracked)
        for t in self.tracked:
            if running >= self.parallel:
                return
            if t.sub is not None:
                continue
            if self.opts.gpus_per_node:
                g = self.opts.gpus_per_node
                t.gpus, self.free_gpus = tuple(self.free_gpus[:g]), self.free_gpus[g:]
                self.executor.update_parameters(gpus_per_node=g, visible_gpus=t.gpus)
            with environment({k: str(self.threads) for k in THREAD_ENV_VARS}):
                t.sub = self.executor.submit(t.fn)
            running += 1

    def _array_ids(self) -> list[str]:
        return list(dict.fromkeys(str(t.sub.job_id).split("_")[0] for t in self.tracked if t.sub))

    # ------------------------------------------------------------ waiting

    def _poll(self) -> None:
        if self.kind == "slurm":
            self.states.refresh(self.tracked, self._array_ids())
        now = time.monotonic()
        for t in self.tracked:
            if t.sub is None or t.result is not None:
                continue
            t.result = self.states.outcome(t, now, self.opts.timeout_min)
            if t.result is not None and t.gpus:  # its GPUs go to the next job
                self.free_gpus.extend(t.gpus)
                t.gpus = ()

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
    context: LaunchContext, options: LauncherOptions, jobs: list[Job], progress: Progress
) -> list[JobReturn]:
    """Run a batch with submitit: one JobReturn per job, in input order."""
    return SubmititRun(context, options, jobs, progress).run()
