"""The serial executor: every job in the sweep's own process, one at a time (a debugger
stops inside the job; exceptions keep their frames)."""

from __future__ import annotations

import logging
import time
from collections import deque

from hydra.core.utils import JobReturn, JobStatus

from rlsweep.executors.attempts import log_attempt
from rlsweep.executors.base import More
from rlsweep.launch.jobs import LaunchContext, Returned, SweepJob, error_line, execute
from rlsweep.launch.options import LauncherOptions
from rlsweep.progress import Progress
from rlsweep.store import ERROR_FILE

log = logging.getLogger(__name__)


def run_serial(
    context: LaunchContext,
    options: LauncherOptions,
    jobs: list[SweepJob],
    progress: Progress,
    more: More | None = None,
) -> list[JobReturn]:
    """Run the jobs one after another; with ``more``, the jobs each one releases run too
    (after the jobs already waiting)."""
    results: list[JobReturn] = []
    waiting = deque(jobs)
    done = failed = 0
    while waiting:
        job = waiting.popleft()
        progress.update(
            running=1,
            queued=len(waiting),
            running_names=[job.directory.name],
            force=not results,
        )
        results.append(Returned(_run_with_retries(context, options, job), job))
        if results[-1].status == JobStatus.COMPLETED:
            done += 1
        else:
            failed += 1
        if more is not None:
            waiting.extend(more(job, results[-1]))
        progress.update(done=done, failed=failed, running=0, queued=len(waiting))
    return results


def _run_with_retries(context: LaunchContext, options: LauncherOptions, job: SweepJob) -> JobReturn:
    """Run ``job`` until it completes or its retries are used up; every attempt logged."""
    attempt = 1
    while True:
        if attempt > 1:  # a retry starts without the last attempt's traceback
            (job.directory / ERROR_FILE).unlink(missing_ok=True)
        start = time.monotonic()
        ret = execute(context.hydra_context, context.task_function, job, keep_exception=True)
        error = error_line(ret)
        outcome = "completed" if error is None else "failed"
        log_attempt(
            job.directory,
            attempt=attempt,
            outcome=outcome,
            seconds=time.monotonic() - start,
            error=error,
        )
        if error is None or attempt > options.retries:
            return ret
        log.warning(
            f"job {job.label} failed on attempt {attempt}: {error}; retrying "
            f"({attempt} of {options.retries} retries used)"
        )
        attempt += 1
