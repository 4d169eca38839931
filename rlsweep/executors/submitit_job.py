"""What submitit pickles and runs on a SLURM node (or under submitit's local executor):
one rlsweep job, through the same :func:`~rlsweep.launch.worker.worker_entry` joblib's
workers run, so it gives the same result bit for bit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

from rlsweep import checkpoint
from rlsweep.errors import JobError, TaskFailed
from rlsweep.executors.attempts import log_attempt
from rlsweep.gpus import CUDA_ENV, gpu_env
from rlsweep.launch.worker import THREAD_ENV_VARS, worker_entry


@dataclass
class SubmititJob:
    """What submitit pickles and runs on the node: one rlsweep job.

    Preemption and time limits: SLURM sends USR2 (``signal_delay_s`` before the limit, or
    on preemption). Submitit's own handler would requeue at once, from the middle of an
    iteration; instead the signal asks the job to checkpoint at its next iteration
    boundary and stop (:mod:`rlsweep.checkpoint`), and only then is submitit's handler
    called: it asks :meth:`checkpoint` for the submission to requeue (this same job,
    which resumes from its checkpoint), requeues it with ``scontrol requeue`` and exits.
    """

    shared_blob: bytes  # cloudpickle of (hydra_context, task_function, Singleton state)
    job_blob: bytes  # cloudpickle of the rlsweep.launch.jobs.SweepJob
    threads: int  # thread cap (torch, BLAS): the job's cpus per task
    cwd: str  # the sweep's working directory (job directories may be relative to it)
    gpus_per_job: float = 0.0  # GPUs asked per job (0: none; see rlsweep.gpus)
    # Its devices under submitit_local, chosen by the parent; None: SLURM's allocation.
    devices: tuple[str, ...] | None = None

    def __call__(self) -> JobReturn:
        os.chdir(self.cwd)
        os.environ.update({k: str(self.threads) for k in THREAD_ENV_VARS})
        if self.gpus_per_job:  # before anything here can initialise CUDA
            given = self.devices
            if given is None:  # SLURM's allocation
                given = tuple(d for d in os.environ.get(CUDA_ENV, "").split(",") if d)
            os.environ.update(gpu_env(given, self.gpus_per_job))
        gpus = os.environ.get(CUDA_ENV, "")
        env = os.environ
        where = (
            f"{env['SLURM_ARRAY_JOB_ID']}_{env.get('SLURM_ARRAY_TASK_ID')}"
            if "SLURM_ARRAY_JOB_ID" in env
            else env.get("SLURM_JOB_ID") or env.get("SUBMITIT_LOCAL_JOB_ID", "?")
        )
        print(
            f"[rlsweep] job {where} on {os.uname().nodename}: threads={self.threads} "
            f"CUDA_VISIBLE_DEVICES={gpus}",
            file=sys.stderr,
            flush=True,
        )
        submitit_handler = signal.getsignal(signal.SIGUSR2)
        checkpoint.clear_stop()
        signal.signal(signal.SIGUSR2, _request_checkpoint)
        started = time.monotonic()
        try:
            ret = worker_entry(self.shared_blob, self.job_blob)
        finally:
            signal.signal(signal.SIGUSR2, submitit_handler)
        _log_attempt(self._job_dir(), ret, time.monotonic() - started)
        if ret.status != JobStatus.COMPLETED:
            error = ret._return_value
            message = str(error).splitlines()[0]
            preempted = isinstance(error, JobError) and error.preempted
            if preempted and callable(submitit_handler):
                print(f"[rlsweep] {message}", file=sys.stderr, flush=True)
                from submitit.core.utils import UncompletedJobError

                try:  # submitit's handler: checkpoint() -> scontrol requeue -> exit
                    submitit_handler(signal.SIGUSR2, None)
                except UncompletedJobError as exc:  # out of requeues
                    raise TaskFailed(
                        f"{exc} The job reached its SLURM time limit more often than "
                        "hydra.launcher.slurm.max_num_requeue allows; its checkpoint is kept: "
                        "raise hydra.launcher.slurm.timeout_min (or max_num_requeue) and run "
                        "the same command again to resume it."
                    ) from None
                except subprocess.CalledProcessError as exc:
                    if exc.returncode >= 0:
                        raise
                    _requeue_killed(exc)
            # The traceback is in error.txt already; this makes SLURM's state FAILED.
            raise TaskFailed(message)
        return ret

    def _job_dir(self) -> Path:
        """The job's directory (its run may have changed the working directory: resolved
        against the sweep's)."""
        import cloudpickle

        return Path(self.cwd, cloudpickle.loads(self.job_blob).directory)

    def checkpoint(self) -> Any:
        """The submission to requeue after a stop: this job, which resumes from its checkpoint."""
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self)


def _log_attempt(job_dir: Path, ret: JobReturn, seconds: float) -> None:
    """This attempt in the job's ``attempts.jsonl``, as the pool and the serial executor log
    theirs (numbered across runs): completed, preempted (requeued to resume), or failed."""
    error = ret._return_value if ret.status != JobStatus.COMPLETED else None
    if error is None:
        outcome, first = "completed", None
    elif isinstance(error, JobError) and error.preempted:
        outcome, first = "preempted: checkpointed, requeued to resume", None
    else:
        outcome, first = "failed", (str(error).splitlines() or [type(error).__name__])[0]
    log_attempt(job_dir, attempt=1, outcome=outcome, seconds=seconds, error=first)


def _requeue_killed(exc: subprocess.CalledProcessError) -> None:
    """``scontrol requeue`` killed by a signal: SLURM terminating this job's processes, the
    requeue's own doing (it can signal them before scontrol returns; seen on a busy
    machine). Exit as submitit does after a requeue, without a result: written, it would
    report as failed a job that is queued to resume. Should SLURM have ended the job
    instead, the sweep learns that from SLURM's state, as for any job ending without one."""
    print(
        f"[rlsweep] {' '.join(map(str, exc.cmd))} was killed by {_signal_name(-exc.returncode)} "
        "(SLURM ending this job for its requeue): exiting without a result, as after a requeue",
        file=sys.stderr,
        flush=True,
    )
    sys.exit(-1)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _request_checkpoint(signum: int, frame: Any) -> None:
    checkpoint.request_stop(f"{signal.Signals(signum).name}: SLURM time limit or preemption")
