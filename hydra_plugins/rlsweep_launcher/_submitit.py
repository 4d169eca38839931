"""The submitit executors: SLURM job arrays (``launcher=slurm``) and submitit's local executor."""

from __future__ import annotations

from hydra.core.utils import JobReturn

from rlsweep.errors import ConfigError
from rlsweep.progress import Progress

from ._core import Job
from .rlsweep_launcher import RLSweepLauncher


def run_submitit(launcher: RLSweepLauncher, jobs: list[Job], progress: Progress) -> list[JobReturn]:
    raise ConfigError(
        f"executor={launcher.options.executor} is not available yet: use launcher=joblib or "
        "launcher=serial."
    )
