"""The submitit executors: SLURM job arrays (``launcher=slurm``) and submitit's local executor.

- One SLURM job array per batch (``array_parallelism`` bounds how many run at once).
  Under ``submitit_local`` the parent starts at most that many jobs at a time itself
  (submitit's local executor would start them all at once).
- Each job runs ``_core.worker_entry``, the function joblib's workers run, so it seeds
  itself the same way and gives the same result bit for bit.
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
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cloudpickle
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus

from rlsweep import checkpoint
from rlsweep.errors import ConfigError, Preempted
from rlsweep.progress import Progress
from rlsweep.slurm_options import SlurmOptions
from rlsweep.store import ERROR_FILE
from rlsweep.task import environment

from . import _core
from ._core import Job
from .rlsweep_launcher import LauncherOptions, RLSweepLauncher, available_cores

log = logging.getLogger(__name__)

# How often the parent looks for finished jobs (result files), in seconds.
POLL_S = 1.0
# squeue (live states) and sacct (how jobs ended) are asked at most this often; the
# interval grows from 2 s with the batch's age (submitit's own backs off to 10 min).
SACCT_MAX_INTERVAL_S = 20.0
# A job SLURM reports finished may take this long to show its result file (shared file systems).
RESULT_GRACE_S = 10.0
# How long a job gone from the queue may wait for sacct to record how it ended.
ACCOUNTING_GRACE_S = 60.0
# SLURM states of a job that may still produce a result.
_ACTIVE_STATES = (
    "PENDING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESIZING",
    "RUNNING",
    "COMPLETING",
    "CONFIGURING",
    "SUSPENDED",
    "STAGE_OUT",
    "SIGNALING",
)
_QUEUED_STATES = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "UNKNOWN", "")


class TaskFailed(RuntimeError):
    """Raised in the SLURM job after its task failed, so that SLURM marks the job FAILED."""


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
    job_blob: bytes  # cloudpickle of the composed _core.Job
    threads: int  # thread cap (torch, BLAS): the job's cpus per task
    cwd: str  # the sweep's working directory (job directories may be relative to it)

    def __call__(self) -> JobReturn:
        os.chdir(self.cwd)
        os.environ.update({k: str(self.threads) for k in _core.THREAD_ENV_VARS})
        gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
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
        try:
            ret = _core.worker_entry(self.shared_blob, self.job_blob)
        finally:
            signal.signal(signal.SIGUSR2, submitit_handler)
        if ret.status != JobStatus.COMPLETED:
            message = str(ret._return_value).splitlines()[0]
            if message.startswith(f"{Preempted.__name__}:") and callable(submitit_handler):
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
            # The traceback is in error.txt already; this makes SLURM's state FAILED.
            raise TaskFailed(message)
        return ret

    def checkpoint(self) -> Any:
        """The submission to requeue after a stop: this job, which resumes from its checkpoint."""
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self)


def _request_checkpoint(signum: int, frame: Any) -> None:
    checkpoint.request_stop(f"{signal.Signals(signum).name}: SLURM time limit or preemption")


# ---------------------------------------------------------------- options -> submitit


def job_threads(opts: SlurmOptions, jobs: Sequence[Job]) -> int:
    """CPUs per task: the option, or the jobs' own thread count (their largest)."""
    if opts.cpus_per_task is not None:
        return opts.cpus_per_task
    return max((job.identity.threads for job in jobs), default=1)


def setup_lines(opts: SlurmOptions, threads: int) -> list[str]:
    """Shell lines run before each job: thread caps first, then the user's own lines."""
    return [f"export {k}={threads}" for k in _core.THREAD_ENV_VARS] + list(opts.setup)


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


def sbatch_script(opts: SlurmOptions, *, threads: int, job_name: str, n_jobs: int) -> str:
    """The sbatch script a batch of ``n_jobs`` is submitted with (for tests and debugging)."""
    from submitit.slurm.slurm import _make_sbatch_string

    params = slurm_parameters(opts, threads=threads, job_name=job_name, n_jobs=n_jobs)
    return _make_sbatch_string(
        command="python -u -m submitit.core._submit FOLDER",
        folder="FOLDER/%j",
        map_count=n_jobs if n_jobs > 1 else None,
        **params,
    )


def local_gpus() -> list[int]:
    """GPU indices this machine shows (CUDA_VISIBLE_DEVICES, else torch's count)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [int(x) for x in visible.split(",") if x.strip().isdigit()]
    try:
        import torch

        return list(range(torch.cuda.device_count()))
    except Exception:
        return []


def submitit_folder(launcher: RLSweepLauncher) -> Path:
    """A fresh folder for this batch (job ids restart when a cluster's state is wiped)."""
    base = launcher.slurm.submitit_folder
    root = Path(base) if base else Path(str(launcher.context.config.hydra.sweep.dir)) / ".submitit"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = root / stamp
    n = 1
    while folder.exists():
        n += 1
        folder = root / f"{stamp}-{n}"
    return folder.absolute() / "%j"


def sbatch_reason(exc: BaseException) -> str:
    """SLURM's one-line reason from a failed sbatch (``sbatch: error: ...`` lines)."""
    text = str(exc)
    reasons = [line.split("error:", 1)[1].strip() for line in text.splitlines() if "error:" in line]
    return "; ".join(dict.fromkeys(r for r in reasons if r)) or text.strip().splitlines()[-1]


# ---------------------------------------------------------------- the run


@dataclass
class _Tracked:
    job: Job
    fn: SubmititJob
    sub: Any = None  # the submitit Job once submitted
    gpus: tuple[int, ...] = ()
    ended_at: float | None = None  # when SLURM (or the local process) said it ended
    result: JobReturn | None = None


@dataclass
class SubmititRun:
    launcher: RLSweepLauncher
    jobs: list[Job]
    progress: Progress
    kind: str = field(init=False)
    opts: SlurmOptions = field(init=False)
    threads: int = field(init=False)
    folder: Path = field(init=False)
    tracked: list[_Tracked] = field(init=False)
    executor: Any = field(init=False)
    free_gpus: list[int] = field(default_factory=list)
    parallel: int = 1
    last_refresh: float = -1e9
    live: dict[str, str] | None = None  # squeue's states by job id (None: squeue failed)
    start: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.kind = self.launcher.options.executor
        self.opts = self.launcher.slurm
        self.threads = job_threads(self.opts, self.jobs)

    # ------------------------------------------------------------ set-up

    def check(self) -> None:
        options = self.launcher.options
        self.opts.check(self.kind)
        if options.job_timeout_s is not None:
            raise ConfigError(
                f"hydra.launcher.job_timeout_s does not apply to executor={self.kind}: set the "
                "time limit in minutes with hydra.launcher.slurm.timeout_min."
            )
        if options.retries:
            raise ConfigError(
                f"hydra.launcher.retries is not supported with executor={self.kind} yet: set "
                "it to 0 and rerun the sweep (rerun=failed) to run failed jobs again."
            )
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

        ctx = self.launcher.context
        name = f"{ctx.config.hydra.job.name}-{Path(str(ctx.config.hydra.sweep.dir)).name}"
        self.folder = submitit_folder(self.launcher)
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
        ctx = self.launcher.context
        shared = cloudpickle.dumps((ctx.hydra_context, ctx.task_function, Singleton.get_state()))
        cwd = os.getcwd()
        self.tracked = [
            _Tracked(job, SubmititJob(shared, cloudpickle.dumps(job), self.threads, cwd))
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
        from submitit.core.utils import FailedJobError

        sink = io.StringIO()  # submitit prints sbatch's stderr; the error below says it once
        try:
            with contextlib.redirect_stderr(sink):
                subs = self.executor.submit_array([t.fn for t in self.tracked])
        except FailedJobError as exc:
            raise ConfigError(
                f"SLURM refused the job array: {sbatch_reason(exc)}. Nothing was submitted. "
                "Check hydra.launcher.slurm.partition / account / qos / constraint and the "
                "other options (`sinfo -s` lists the partitions, `sacctmgr show assoc "
                "user=$USER` your accounts)."
            ) from None
        for t, sub in zip(self.tracked, subs, strict=True):
            t.sub = sub
        array = self._array_ids()
        log.info(
            f"rlsweep: submitted {len(subs)} jobs as SLURM job array {', '.join(array)} "
            f"({self.threads} cpus per task); submitit folder: {self.folder.parent}"
        )

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
            with environment({k: str(self.threads) for k in _core.THREAD_ENV_VARS}):
                t.sub = self.executor.submit(t.fn)
            running += 1

    def _array_ids(self) -> list[str]:
        return list(dict.fromkeys(str(t.sub.job_id).split("_")[0] for t in self.tracked if t.sub))

    # ------------------------------------------------------------ waiting

    def _state(self, t: _Tracked) -> str:
        """The job's live state: squeue's (sacct lags seconds behind), else sacct's; under
        submitit_local, RUNNING or ENDED from its process."""
        if t.sub is None:
            return "PENDING"
        if self.kind == "slurm":
            if self.live is not None:
                return self.live.get(str(t.sub.job_id), "ENDED")
            return self._final_state(t)
        return "RUNNING" if t.sub.get_info()["jobState"] == "RUNNING" else "ENDED"

    def _final_state(self, t: _Tracked) -> str:
        """sacct's state of the job (e.g. ``CANCELLED by 0``, ``TIMEOUT``; UNKNOWN at first)."""
        return str(t.sub.watcher.get_state(t.sub.job_id, mode="cache"))

    def _refresh(self) -> None:
        """Ask squeue for live states and sacct for final ones (not too often)."""
        now = time.monotonic()
        interval = min(SACCT_MAX_INTERVAL_S, max(2.0, (now - self.start) / 4))
        if now - self.last_refresh < interval:
            return
        self.last_refresh = now
        ids = self._array_ids()
        try:
            out = subprocess.run(
                ["squeue", "-h", "-r", "-o", "%i %T", "-j", ",".join(ids)],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            self.live = None
        else:
            if out.returncode == 0:
                pairs = (line.split(None, 1) for line in out.stdout.splitlines())
                self.live = {p[0]: p[1].strip() for p in pairs if len(p) == 2}
            elif "invalid job id" in out.stderr.lower():  # every job has left the queue
                self.live = {}
            else:
                self.live = None
        with contextlib.suppress(Exception):
            self.tracked[0].sub.watcher.update()

    def _poll(self) -> None:
        if self.kind == "slurm":
            self._refresh()
        now = time.monotonic()
        for t in self.tracked:
            if t.sub is None or t.result is not None:
                continue
            if t.sub.paths.result_pickle.exists():
                t.result = self._collect(t)
                continue
            state = self._state(t)
            word = state.split()[0] if state else "UNKNOWN"
            if word in _ACTIVE_STATES or (self.live is None and word == "UNKNOWN"):
                t.ended_at = None
                continue
            if t.ended_at is None:
                t.ended_at = now
                continue
            waited = now - t.ended_at
            if waited < RESULT_GRACE_S:
                continue
            final = self._final_state(t) if self.kind == "slurm" else state
            known = final.split()[0] not in (*_ACTIVE_STATES, "UNKNOWN") if final else False
            if self.kind == "slurm" and not known and waited < ACCOUNTING_GRACE_S:
                continue  # sacct has not recorded the end yet
            t.result = self._lost(t, final)

    def _release_gpus(self, t: _Tracked) -> None:
        if t.gpus:
            self.free_gpus.extend(t.gpus)
            t.gpus = ()

    def _collect(self, t: _Tracked) -> JobReturn:
        """The JobReturn of a job that wrote its result file."""
        from submitit.core.utils import pickle_load

        self._release_gpus(t)
        try:
            outcome, value = pickle_load(t.sub.paths.result_pickle)
        except Exception as exc:  # a truncated or unreadable result
            return self._failed(t, f"could not read the job's result: {exc}", "")
        if outcome == "success" and isinstance(value, JobReturn):
            return value
        trace = str(value)
        found = re.findall(r"TaskFailed: (.*)$", trace, flags=re.MULTILINE)
        if found:  # the task raised: error.txt holds its traceback
            error_file = t.job.directory / ERROR_FILE
            tb = error_file.read_text() if error_file.is_file() else trace
            return self._failed(t, found[-1], tb)
        last = [line for line in trace.splitlines() if line.strip()]
        message = last[-1].strip() if last else "the job failed outside its task"
        return self._failed(t, message, trace)

    def _lost(self, t: _Tracked, state: str) -> JobReturn:
        """A job that ended without a result: SLURM (or the OS) killed it."""
        self._release_gpus(t)
        word = state.split()[0] if state else "UNKNOWN"
        causes = {
            "TIMEOUT": f"killed by SLURM: time limit of {self.opts.timeout_min} min reached "
            "(raise hydra.launcher.slurm.timeout_min)",
            "CANCELLED": f"cancelled in SLURM ({state}: scancel or an administrator)",
            "OUT_OF_MEMORY": "killed by SLURM: out of memory (raise hydra.launcher.slurm.mem_gb)",
            "NODE_FAIL": "killed by SLURM: its node failed",
            "PREEMPTED": "preempted by SLURM and not requeued",
            "DEADLINE": "killed by SLURM: deadline reached",
            "BOOT_FAIL": "SLURM could not boot its node",
            "FAILED": "its process died without a result (killed by a signal? out of memory?)",
        }
        if self.kind == "slurm":
            cause = causes.get(word, f"ended in SLURM state {state} without a result")
            where = f"SLURM job {t.sub.job_id}"
        else:
            cause = "its process ended without a result (killed by a signal? out of memory?)"
            where = f"local job {t.sub.job_id}"
        log_tail = ""
        with contextlib.suppress(OSError):
            lines = t.sub.paths.stderr.read_text(errors="replace").splitlines()
            log_tail = "\n".join(lines[-30:])
        tb = f"{where} {cause}.\nLogs: {t.sub.paths.stdout}\n      {t.sub.paths.stderr}\n" + (
            f"\n--- end of its stderr ---\n{log_tail}\n" if log_tail else ""
        )
        return self._failed(t, cause, tb)

    def _failed(self, t: _Tracked, message: str, tb: str) -> JobReturn:
        ret = _core.failed_return(t.job, RuntimeError(message), tb)
        ret.return_value = _core.JobError(message, tb)
        return ret

    def _show(self) -> None:
        done = failed = running = queued = 0
        for t in self.tracked:
            if t.result is not None:
                if t.result.status == JobStatus.COMPLETED:
                    done += 1
                else:
                    failed += 1
            elif self._state(t).split(" ")[0] in _QUEUED_STATES:
                queued += 1
            else:
                running += 1
        self.progress.update(done=done, failed=failed, running=running, queued=queued)

    # ------------------------------------------------------------ interrupts

    def _cancel(self) -> None:
        """Stop every job of this batch still queued or running (Ctrl-C, SIGTERM, errors)."""
        live = [t for t in getattr(self, "tracked", []) if t.sub is not None and t.result is None]
        if not live:
            return
        if self.kind == "slurm":
            ids = self._array_ids()
            with contextlib.suppress(Exception):
                subprocess.run(["scancel", *ids], check=False, timeout=30, capture_output=True)
            print(
                f"\n[rlsweep] cancelled SLURM job array {', '.join(ids)} (scancel {' '.join(ids)}).",
                file=sys.stderr,
                flush=True,
            )
            return
        from joblib.externals.loky.backend.utils import kill_process_tree

        for t in live:
            process = getattr(t.sub, "_process", None)
            with contextlib.suppress(Exception):
                if process is not None:
                    kill_process_tree(process)  # the controller (or its shell), and the job
                    process.wait(timeout=10)
                else:
                    t.sub.cancel(check=False)
        print(
            f"\n[rlsweep] cancelled {len(live)} submitit_local job(s).", file=sys.stderr, flush=True
        )


def run_submitit(
    launcher: RLSweepLauncher, options: LauncherOptions, jobs: list[Job], progress: Progress
) -> list[JobReturn]:
    """Run a batch with submitit: one JobReturn per job, in input order."""
    return SubmititRun(launcher, jobs, progress).run()
