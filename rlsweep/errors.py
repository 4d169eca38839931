"""rlsweep's exceptions: one hierarchy, recognised by type.

Errors a user can cause (:class:`ConfigError`) are printed by Hydra as one clean paragraph,
without a traceback.
"""

from __future__ import annotations

from typing import Any

from hydra.errors import CompactHydraException


class RLSweepError(Exception):
    """The base of every error rlsweep raises on purpose."""


class ConfigError(RLSweepError, CompactHydraException):
    """A configuration problem the user can fix: the message names the key and what is allowed."""


class SweepLocked(ConfigError):
    """Another live sweep holds the sweep directory's lock."""


class Preempted(RLSweepError):
    """A job stopped on request (SLURM's time-limit warning, preemption) after writing its
    checkpoint: not a failure; the job resumes from the checkpoint when run again."""


class JobError(RLSweepError):
    """A job's exception, carried back from a worker with its full traceback."""

    def __init__(self, message: str, remote_traceback: str, *, preempted: bool = False) -> None:
        super().__init__(message)
        self.remote_traceback = remote_traceback
        # The job stopped on request after its checkpoint (it raised Preempted).
        self.preempted = preempted

    def __reduce__(self) -> tuple[Any, ...]:
        return (_job_error, (self.args[0], self.remote_traceback, self.preempted))

    def __str__(self) -> str:
        return f"{self.args[0]}\n\n--- job traceback ---\n{self.remote_traceback}"


def _job_error(message: str, remote_traceback: str, preempted: bool) -> JobError:
    return JobError(message, remote_traceback, preempted=preempted)


class TaskFailed(RLSweepError):
    """Raised in a SLURM job after its task failed, so that SLURM marks the job FAILED."""


class JobLost(RLSweepError):
    """A job's process was lost under it, not by its own doing (a Ray worker or node died),
    while the executor's other jobs ran on: the job failed and may run again (retries)."""
