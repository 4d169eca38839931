"""Weights & Biases: one run per job, grouped by sweep (``group``) and agent
(``job_type``), tagged with the replicate and the root of its seeds, the job's config and
seeds as the run's config. Offline by default (``wandb sync <job dir>/wandb/offline-run-*``
uploads it later); ``logger.wandb.mode=online`` logs live.

A resumed job continues its run (the same id); steps an earlier attempt already logged
are not sent again (W&B keeps a run's steps increasing).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlsweep.trackers.base import JobInfo, Resume

MODES = ("offline", "online", "disabled")


@dataclass
class Settings:
    """``hydra.launcher.trackers.wandb`` (the built-in app: ``logger.wandb``)."""

    # W&B project (created on first upload).
    project: str = "rlsweep"
    # W&B entity (user or team); null: your default entity.
    entity: str | None = None
    # offline (files in the job's directory, uploaded with wandb sync), online or disabled.
    mode: str = "offline"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")


class WandbTracker:
    def __init__(self, settings: Settings, info: JobInfo, resume: Resume) -> None:
        import wandb

        # A new id for each fresh start of the job, the same id across its resumed attempts.
        self.run_id = resume.run_id or _new_id(info)
        self._resume = resume
        self._run = wandb.init(
            project=settings.project,
            entity=settings.entity,
            mode=settings.mode,  # type: ignore[arg-type]
            dir=str(info.directory),
            id=self.run_id,
            resume="allow",
            name=info.name,
            group=info.sweep,
            job_type=info.agent,
            tags=_tags(info),
            config={**info.config, "rlsweep": {"digest": info.digest, "seeds": dict(info.seeds)}},
            reinit="create_new",
            settings=wandb.Settings(console="off", silent=True, x_disable_stats=True),
        )

    def log(self, step: int, values: Mapping[str, float]) -> None:
        if not self._resume.already_sent(step):
            self._run.log(dict(values), step=step)

    def close(self, failed: bool) -> None:
        self._run.finish(exit_code=1 if failed else 0)


def _tags(info: JobInfo) -> list[str]:
    """``replicate=<i>``, ``root=<r>``, and ``seed.<name>=<seed>`` for each of the job's
    named seeds that is one number (per-sub-env lists are in the run's config)."""
    seeds = [f"seed.{k}={v}" for k, v in info.seeds.items() if "." not in k]
    return [f"replicate={info.replicate}", f"root={info.root}", *seeds][:64]


def _new_id(info: JobInfo) -> str:
    """A run id unique to this job and this fresh start (W&B ids: 8+ lowercase chars)."""
    import os
    import time

    text = f"{info.digest}:{time.time_ns()}:{os.getpid()}"
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def start(settings: Settings, info: JobInfo, resume: Resume) -> Any:
    return WandbTracker(settings, info, resume)
