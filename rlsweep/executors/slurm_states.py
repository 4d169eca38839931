"""Watching submitted jobs: their live states (squeue, sacct, or submitit's local process)
and the JobReturn each ends with, including jobs SLURM killed without a result."""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from hydra.core.utils import JobReturn

from rlsweep.errors import JobError
from rlsweep.launch.jobs import SweepJob, failed_return
from rlsweep.store import ERROR_FILE

# squeue (live states) and sacct (how jobs ended) are asked at most this often; the
# interval grows from 2 s with the batch's age (submitit's own backs off to 10 min).
SACCT_MAX_INTERVAL_S = 20.0
# A job SLURM reports finished may take this long to show its result file (shared file systems).
RESULT_GRACE_S = 10.0
# How long a job gone from the queue may wait for sacct to record how it ended.
ACCOUNTING_GRACE_S = 60.0
# SLURM states of a job that may still produce a result.
ACTIVE_STATES = (
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
QUEUED_STATES = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "UNKNOWN", "")
# Why a job ended without a result, by its final SLURM state.
CAUSES = {
    "TIMEOUT": "killed by SLURM: time limit of {timeout_min} min reached "
    "(raise hydra.launcher.slurm.timeout_min)",
    "CANCELLED": "cancelled in SLURM ({state}: scancel or an administrator)",
    "OUT_OF_MEMORY": "killed by SLURM: out of memory (raise hydra.launcher.slurm.mem_gb)",
    "NODE_FAIL": "killed by SLURM: its node failed",
    "PREEMPTED": "preempted by SLURM and not requeued",
    "DEADLINE": "killed by SLURM: deadline reached",
    "BOOT_FAIL": "SLURM could not boot its node",
    "FAILED": "its process died without a result (killed by a signal? out of memory?)",
}


@dataclass
class Tracked:
    """One job of the batch, from submission to its JobReturn."""

    job: SweepJob
    fn: Any  # the callable submitit pickles and runs (a SubmititJob)
    sub: Any = None  # the submitit Job once submitted
    submitted_at: float = 0.0  # when (time.monotonic())
    lane: int | None = None  # submitit_local: the slot it holds (see rlsweep.gpus.Lanes)
    ended_at: float | None = None  # when SLURM (or the local process) said it ended
    result: JobReturn | None = None


def first_word(state: str) -> str:
    return state.split()[0] if state else "UNKNOWN"


@dataclass
class States:
    """The jobs' states: squeue's live ones (sacct lags seconds behind), sacct's final ones;
    under submitit_local, RUNNING or ENDED from the job's process."""

    kind: str  # slurm or submitit_local
    live: dict[str, str] | None = None  # squeue's states by job id (None: squeue failed)
    last_refresh: float = -1e9
    start: float = field(default_factory=time.monotonic)

    def state(self, t: Tracked) -> str:
        if t.sub is None:
            return "PENDING"
        if self.kind == "slurm":
            if self.live is not None:  # a job submitted since squeue last answered waits
                gone = "ENDED" if t.submitted_at < self.last_refresh else "PENDING"
                return self.live.get(str(t.sub.job_id), gone)
            return self.final_state(t)
        return "RUNNING" if t.sub.get_info()["jobState"] == "RUNNING" else "ENDED"

    def final_state(self, t: Tracked) -> str:
        """sacct's state of the job (e.g. ``CANCELLED by 0``, ``TIMEOUT``; UNKNOWN at first)."""
        return str(t.sub.watcher.get_state(t.sub.job_id, mode="cache"))

    def refresh(self, tracked: list[Tracked], ids: list[str]) -> None:
        """Ask squeue for live states and sacct for final ones (not too often)."""
        now = time.monotonic()
        interval = min(SACCT_MAX_INTERVAL_S, max(2.0, (now - self.start) / 4))
        if now - self.last_refresh < interval:
            return
        self.last_refresh = now
        self.live = squeue(ids, "%T")
        # sacct, through submitit's watcher (which logs and bypasses sacct's own errors).
        tracked[0].sub.watcher.update()

    def outcome(self, t: Tracked, now: float, timeout_min: int) -> JobReturn | None:
        """The job's JobReturn if it has ended (None while it may still produce a result)."""
        if t.sub.paths.result_pickle.exists():
            return collect(t)
        word = first_word(self.state(t))
        if word in ACTIVE_STATES or (self.live is None and word == "UNKNOWN"):
            t.ended_at = None
            return None
        if t.ended_at is None:
            t.ended_at = now
            return None
        waited = now - t.ended_at
        if waited < RESULT_GRACE_S:
            return None
        final = self.final_state(t) if self.kind == "slurm" else self.state(t)
        known = first_word(final) not in (*ACTIVE_STATES, "UNKNOWN")
        if self.kind == "slurm" and not known and waited < ACCOUNTING_GRACE_S:
            return None  # sacct has not recorded the end yet
        return lost(t, final, self.kind, timeout_min)


def squeue(ids: list[str], column: str, problems: list[str] | None = None) -> dict[str, str] | None:
    """One squeue column (``%T``: the state, ``%j``: the job name) of each of the given
    jobs still in the queue, array tasks one by one, by job id; None if squeue could not
    say (why appended to ``problems``)."""
    command = ["squeue", "-h", "-r", "-o", f"%i|{column}", "-j", ",".join(ids)]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        if problems is not None:
            problems.append(str(exc))
        return None
    if out.returncode == 0:
        pairs = (line.split("|", 1) for line in out.stdout.splitlines())
        return {p[0].strip(): p[1].strip() for p in pairs if len(p) == 2}
    if "invalid job id" in out.stderr.lower():  # every job has left the queue
        return {}
    if problems is not None:
        problems.append(out.stderr.strip())
    return None


def collect(t: Tracked) -> JobReturn:
    """The JobReturn of a job that wrote its result file."""
    from submitit.core.utils import pickle_load

    try:
        outcome, value = pickle_load(t.sub.paths.result_pickle)
    except Exception as exc:  # a truncated or unreadable result: the job failed, say why
        return failed(t, f"could not read the job's result: {exc!r}", "")
    if outcome == "success" and isinstance(value, JobReturn):
        return value
    trace = str(value)
    found = re.findall(r"TaskFailed: (.*)$", trace, flags=re.MULTILINE)
    if found:  # the task raised: error.txt holds its traceback
        error_file = t.job.directory / ERROR_FILE
        tb = error_file.read_text() if error_file.is_file() else trace
        return failed(t, found[-1], tb)
    last = [line for line in trace.splitlines() if line.strip()]
    message = last[-1].strip() if last else "the job failed outside its task"
    return failed(t, message, trace)


def lost(t: Tracked, state: str, kind: str, timeout_min: int) -> JobReturn:
    """A job that ended without a result: SLURM (or the OS) killed it."""
    word = first_word(state)
    if kind == "slurm":
        cause = CAUSES.get(word, "ended in SLURM state {state} without a result")
        cause = cause.format(state=state, timeout_min=timeout_min)
        where = f"SLURM job {t.sub.job_id}"
    else:
        cause = "its process ended without a result (killed by a signal? out of memory?)"
        where = f"local job {t.sub.job_id}"
    try:
        lines = t.sub.paths.stderr.read_text(errors="replace").splitlines()
        log_tail = "\n".join(lines[-30:])
    except OSError:  # no log file: the job never started
        log_tail = ""
    tb = f"{where} {cause}.\nLogs: {t.sub.paths.stdout}\n      {t.sub.paths.stderr}\n" + (
        f"\n--- end of its stderr ---\n{log_tail}\n" if log_tail else ""
    )
    return failed(t, cause, tb)


def failed(t: Tracked, message: str, tb: str) -> JobReturn:
    return failed_return(t.job, JobError(message, tb), tb)
