"""Errors a user can cause, printed by Hydra as one clean paragraph (no traceback)."""

from __future__ import annotations

from hydra.errors import CompactHydraException


class ConfigError(CompactHydraException):
    """A configuration problem the user can fix: the message names the key and what is allowed."""


class SweepFailed(CompactHydraException):
    """Some jobs of a sweep failed; the message lists them and where their tracebacks are."""


class Preempted(Exception):
    """A job stopped on request (SLURM's time-limit warning, preemption) after writing its
    checkpoint: not a failure; the job resumes from the checkpoint when run again."""
