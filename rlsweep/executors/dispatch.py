"""Fault-tolerant dispatch of jobs to a pool of workers.

What a sweep of hundreds of jobs needs, and joblib's ``Parallel`` does not do:

- A worker that dies (SIGKILL, the OOM killer, ``os._exit``) breaks a loky or
  multiprocessing pool, and every job in flight fails with it. The dispatcher starts a
  fresh pool and runs the jobs that were in flight again; when it cannot tell which job
  killed the worker, it runs those suspects one at a time, so the culprit is found and
  the others complete.
- ``job_timeout_s`` kills a job that runs too long (its worker process: a pool's, or its Ray
  task's) and marks it timed out. A job's clock starts when this process first sees its
  worker's pid file (written as the worker starts the job): no other machine's clock counts.
- ``retries`` runs a failed or crashed job again, up to N more times; every attempt is
  appended to ``attempts.jsonl`` in the job's directory.
- A job whose worker alone was lost (:class:`~rlsweep.errors.JobLost`: a Ray worker or
  node died) crashed, unless it recorded its result first: then it is done, never run again.
- At most ``n_jobs`` jobs are handed to the pool at once, so the progress line's
  running / queued counts are exact and a job's wall time starts when it starts.
- With GPUs (``gpus_per_job``), jobs run in lanes (:class:`rlsweep.gpus.Lanes`): one pool
  per device group, whose workers see only its devices, each running at most its slots. A
  job goes to the lane with the most free slots; a worker that dies breaks its lane's pool
  only, and only that lane's jobs in flight are run again (or are suspects).
- With ``more`` (a streaming launch), each job's final outcome is handed to it as soon as
  it is known, and the jobs it releases join the queue: they start when a worker frees,
  with every rule above (suspects, time limits, retries) applying to them too.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures import Executor as FuturesExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Protocol

from hydra.core.utils import JobReturn, JobStatus

from rlsweep.errors import JobLost
from rlsweep.executors.attempts import log_attempt
from rlsweep.executors.base import More
from rlsweep.gpus import Lanes
from rlsweep.launch.jobs import Returned, SweepJob, error_line, failed_return, finished_return
from rlsweep.launch.options import LauncherOptions
from rlsweep.launch.worker import worker_pid
from rlsweep.progress import Progress
from rlsweep.store import ERROR_FILE, WORKER_PID_FILE

log = logging.getLogger(__name__)

# How a job is handed to a pool.
Submit = Callable[[FuturesExecutor, SweepJob], "Future[JobReturn]"]


class Pools(Protocol):
    """Makes the pool a lane's jobs run on (and how to shut it down), and kills one at once."""

    def make(self, lane: int) -> tuple[FuturesExecutor, Callable[[], None]]: ...

    def kill(self, pool: FuturesExecutor) -> None: ...

    def stop(self, pool: FuturesExecutor, job: Future[JobReturn], pid: int) -> None:
        """Kill the worker running ``job`` now (past its time limit); ``pid`` is the one
        its pid file names."""
        ...


def _broken(exc: BaseException) -> bool:
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    return isinstance(exc, TerminatedWorkerError | BrokenProcessPool)


def _exit_codes(exc: BaseException) -> str:
    """What loky says of the dead worker's exit code, e.g. ``{SIGKILL(-9)}``."""
    text = str(exc)
    marker = "exit codes of the workers are "
    return text.split(marker, 1)[1].split("\n", 1)[0].strip() if marker in text else "unknown"


def _died(codes: str) -> str:
    """Why a job crashed, from its dead worker's exit codes (:func:`_exit_codes`). (The job's
    own os._exit or sys.exit fails it instead: rlsweep.launch.exits.)"""
    said = f"worker process died while running this job (exit code {codes})"
    itself = "os._exit from a thread other than the job's, or exit() in native code"
    if "EXIT(" in codes and "SIG" not in codes:  # it ended itself: no signal killed it
        return f"{said}: the process ended itself with that status, no signal killed it ({itself})"
    oom = "a signal such as SIGKILL usually means the OS killed it (out of memory?)"
    if "SIG" in codes:
        return f"{said}; {oom}"
    return f"{said}; {oom}, unless it ended itself ({itself})"


@dataclass
class Dispatcher:
    """Runs ``jobs`` on a process (or thread) pool; see the module docstring."""

    options: LauncherOptions
    submit_job: Submit
    jobs: list[SweepJob]
    progress: Progress
    pools: Pools
    # A streaming launch's callback (see rlsweep.executors.base.Runner); None: a batch.
    more: More | None = None
    results: list[JobReturn | None] = field(init=False)
    failures: list[int] = field(init=False)  # failed attempts so far, per job (for retries)
    tries: list[int] = field(init=False)  # attempts started, per job (for the log)
    pending: deque[int] = field(init=False)
    suspects: deque[int] = field(default_factory=deque)  # run alone after a pool broke
    in_flight: dict[Future[JobReturn], int] = field(default_factory=dict)
    lanes: Lanes = field(init=False)  # the slots jobs run in (see rlsweep.gpus)
    lane_of: dict[int, int] = field(default_factory=dict)  # each job's lane, last attempt
    pools_made: dict[int, tuple[FuturesExecutor, Callable[[], None]]] = field(
        default_factory=dict
    )  # each lane's pool and its shutdown, made at the lane's first job
    started: dict[int, float] = field(default_factory=dict)
    # When this process first saw each running job's worker start it (its time limit's clock).
    running_since: dict[int, float] = field(default_factory=dict)
    timed_out: set[int] = field(default_factory=set)
    done: int = 0  # jobs completed (final outcomes only, for the progress line)
    failed: int = 0  # jobs failed for good

    def __post_init__(self) -> None:
        self.jobs = list(self.jobs)  # released jobs are appended: never the caller's list
        n = len(self.jobs)
        self.results = [None] * n
        self.failures = [0] * n
        self.tries = [0] * n
        self.pending = deque(range(n))
        self.lanes = self.options.lanes()

    def _add(self, jobs: list[SweepJob]) -> None:
        """Queue jobs a streaming launch released (after those already waiting)."""
        for job in jobs:
            self.jobs.append(job)
            self.results.append(None)
            self.failures.append(0)
            self.tries.append(0)
            self.pending.append(len(self.jobs) - 1)

    # ------------------------------------------------------------ main loop

    def run(self) -> list[JobReturn]:
        try:
            while self.pending or self.suspects or self.in_flight:
                self._fill()
                self._show()
                done, _ = wait(list(self.in_flight), timeout=0.25, return_when=FIRST_COMPLETED)
                broken: list[tuple[int, BaseException]] = []
                for fut in done:
                    self._collect(fut, broken)
                if broken:
                    self._recover(broken)
                self._enforce_timeouts()
        except BaseException:
            for pool, _ in self.pools_made.values():
                self.pools.kill(pool)
            raise
        for _, shutdown in self.pools_made.values():
            shutdown()
        self._show()
        return [r for r in self.results if r is not None]

    def _fill(self) -> None:
        if self.suspects:  # a suspect runs alone, so that a crash names its culprit
            if not self.in_flight and (lane := self.lanes.take()) is not None:
                self._submit(self.suspects.popleft(), lane)
            return
        while self.pending and (lane := self.lanes.take()) is not None:
            self._submit(self.pending.popleft(), lane)

    def _submit(self, i: int, lane: int) -> None:
        self.tries[i] += 1
        if self.tries[i] > 1:
            (self.jobs[i].directory / ERROR_FILE).unlink(missing_ok=True)
        if self.options.job_timeout_s is not None:  # a killed worker's file is not the job's
            (self.jobs[i].directory / WORKER_PID_FILE).unlink(missing_ok=True)
        self.started[i] = time.monotonic()
        self.running_since.pop(i, None)
        self.lane_of[i] = lane
        if lane not in self.pools_made:
            self.pools_made[lane] = self.pools.make(lane)
        self.in_flight[self.submit_job(self.pools_made[lane][0], self.jobs[i])] = i

    def _pop(self, fut: Future[JobReturn]) -> int:
        """The job of a future that ended: its slot is free."""
        i = self.in_flight.pop(fut)
        self.lanes.give(self.lane_of[i])
        return i

    def _show(self) -> None:
        self.progress.update(
            done=self.done,
            failed=self.failed,
            running=len(self.in_flight),
            queued=len(self.pending) + len(self.suspects),
        )

    # ------------------------------------------------------------ outcomes

    def _collect(self, fut: Future[JobReturn], broken: list[tuple[int, BaseException]]) -> None:
        i = self._pop(fut)
        try:
            ret = fut.result()
        except JobLost as exc:  # its worker alone died (a Ray node): the others run on
            done = finished_return(self.jobs[i])  # it recorded its result first: done
            if done is not None:
                self.timed_out.discard(i)
                self._finish(i, done, "completed")
            elif i in self.timed_out:  # its task was cancelled at its time limit
                self._time_up(i)
            else:
                self._finish(i, self._failure(i, exc), "crashed")
            return
        except Exception as exc:
            if _broken(exc):
                broken.append((i, exc))
                return
            ret = failed_return(self.jobs[i], exc, "".join(traceback.format_exception(exc)))
        self._finish(i, ret, "completed" if ret.status == JobStatus.COMPLETED else "failed")

    def _finish(self, i: int, ret: JobReturn, outcome: str) -> None:
        """Record one attempt; retry a failure while retries are left."""
        job = self.jobs[i]
        error = error_line(ret)
        self._log_attempt(i, outcome, error)
        retry = (
            ret.status != JobStatus.COMPLETED
            and outcome != "timed_out"
            and self.failures[i] < self.options.retries
        )
        if ret.status != JobStatus.COMPLETED:
            self.failures[i] += 1
        if retry:
            log.warning(
                f"job {job.label} {outcome} on attempt "
                f"{self.tries[i]}: {error}; retrying ({self.failures[i]} of "
                f"{self.options.retries} retries used)"
            )
            self.pending.append(i)
        else:
            self.results[i] = ret = Returned(ret, job)
            if ret.status == JobStatus.COMPLETED:
                self.done += 1
            else:
                self.failed += 1
            if self.more is not None:
                self._add(self.more(job, ret))

    def _recover(self, broken: list[tuple[int, BaseException]]) -> None:
        """A worker died and took its lane's pool down: find the culprit, rerun the others."""
        # Every other job in flight in that pool fails with it (or had just finished).
        lanes_broken = {self.lane_of[i] for i, _ in broken}
        sharing = [f for f, i in self.in_flight.items() if self.lane_of[i] in lanes_broken]
        wait(sharing, timeout=30)
        for fut in sharing:
            if fut.done() and fut.exception() is None:
                self._collect(fut, broken)
                continue
            i = self._pop(fut)
            exc = fut.exception() if fut.done() else None
            broken.append((i, exc or RuntimeError("the worker pool broke")))
        for lane in lanes_broken:  # made again at the lane's next job
            self.pools.kill(self.pools_made.pop(lane)[0])
        broken = self._finished_anyway(broken)
        victims = [i for i, _ in broken]
        timed_out = [i for i in victims if i in self.timed_out]
        for i in timed_out:
            self._time_up(i)
        others = [(i, exc) for i, exc in broken if i not in timed_out]
        if timed_out or len(others) > 1:
            for i, _ in others:
                self._log_attempt(i, "interrupted: a worker died; runs again", None)
            # Jobs killed along with the culprit (or whose culprit is unknown) run again,
            # one at a time when it is unknown which of them killed the worker.
            for i, _ in others:
                (self.suspects if not timed_out else self.pending).appendleft(i)
            if others:
                log.warning(
                    f"a worker died; running {len(others)} interrupted job(s) again"
                    + (" one at a time to find which one killed it" if not timed_out else "")
                )
            return
        if others:
            i, exc = others[0]
            self._finish(i, self._failure(i, RuntimeError(_died(_exit_codes(exc)))), "crashed")

    def _finished_anyway(
        self, broken: list[tuple[int, BaseException]]
    ) -> list[tuple[int, BaseException]]:
        """Jobs whose worker recorded their result before the pool broke are done (their
        futures failed with the pool): never run again. Returns the others."""
        left = []
        for i, exc in broken:
            done = finished_return(self.jobs[i])
            if done is None:
                left.append((i, exc))
            else:
                self.timed_out.discard(i)
                self._finish(i, done, "completed")
        return left

    def _time_up(self, i: int) -> None:
        """A job whose worker was killed at its time limit: failed, never retried."""
        self.timed_out.discard(i)
        message = (
            f"timed out: still running after hydra.launcher.job_timeout_s="
            f"{self.options.job_timeout_s:g} s, so its worker was killed"
        )
        self._finish(i, self._failure(i, TimeoutError(message)), "timed_out")

    def _failure(self, i: int, exc: BaseException) -> JobReturn:
        return failed_return(self.jobs[i], exc, f"{type(exc).__name__}: {exc}\n")

    def _enforce_timeouts(self) -> None:
        limit = self.options.job_timeout_s
        if limit is None:
            return
        now = time.monotonic()
        for fut, i in list(self.in_flight.items()):
            if i in self.timed_out:
                continue
            # The job's clock starts when a worker starts it (not at a pool's spawn).
            pid = worker_pid(self.jobs[i].directory)
            if pid is None:
                continue
            if now - self.running_since.setdefault(i, now) <= limit:
                continue
            log.warning(f"job #{self.jobs[i].idx} exceeded {limit:g} s: killing worker {pid}")
            self.timed_out.add(i)
            self.pools.stop(self.pools_made[self.lane_of[i]][0], fut, pid)

    def _log_attempt(self, i: int, outcome: str, error: str | None) -> None:
        log_attempt(
            self.jobs[i].directory,
            attempt=self.tries[i],
            outcome=outcome,
            seconds=time.monotonic() - self.started[i],
            error=error,
        )
