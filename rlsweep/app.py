"""The Hydra entry point behind ``python -m rlsweep``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn
from omegaconf import DictConfig

from rlsweep.paths import conf_dir


def task(cfg: DictConfig) -> dict[str, Any]:
    """One job (Hydra calls this once per job, in whatever process the launcher chose)."""
    from rlsweep.job import run

    return run(cfg)


def validate(cfg: DictConfig) -> None:
    """Called by rlsweep's launcher on every job's config before any job starts."""
    from rlsweep.config import load_job_config

    load_job_config(cfg)


def on_sweep_end(sweep_dir: Path, returns: list[JobReturn]) -> None:
    """Called by rlsweep's sweeper after the last batch, whether or not jobs failed."""
    from rlsweep.summary import summarize

    summarize(sweep_dir, echo=True)


setattr(task, "rlsweep_validate", validate)  # noqa: B010
setattr(task, "rlsweep_on_sweep_end", on_sweep_end)  # noqa: B010


def main() -> None:
    """``python -m rlsweep [-m] [overrides...]``: one job, or a sweep with ``-m``."""
    import hydra

    hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")(task)()
