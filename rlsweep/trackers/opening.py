"""A running job's trackers: which ones (``hydra.launcher.trackers``) and what they are
told of the job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rlsweep.identity import Identity, task_config
from rlsweep.store import SEEDS_FILE
from rlsweep.trackers.base import JobInfo
from rlsweep.trackers.feed import Feed
from rlsweep.trackers.settings import of_job


def open_trackers(cfg: DictConfig, identity: Identity, directory: Path) -> Feed | None:
    """The job's trackers (None: its config chose none)."""
    settings = of_job()
    if not settings:
        return None
    return Feed(settings, directory, lambda: job_info(cfg, identity, directory))


def job_info(cfg: DictConfig, identity: Identity, directory: Path) -> JobInfo:
    """What the trackers are told of the job (read at its first row: seeds.json exists)."""
    config = task_config(cfg)
    agent = config.get("agent")
    name = agent.get("name") if isinstance(agent, dict) else None
    return JobInfo(
        directory=directory,
        name=directory.name,
        sweep_dir=directory.parent,
        sweep=directory.parent.name,
        agent=str(name if name is not None else _app_name(cfg)),
        replicate=identity.replicate,
        digest=identity.digest,
        root=identity.root,
        config=config,
        seeds=_flat(_read_seeds(directory)),
    )


def _app_name(cfg: DictConfig) -> str:
    from hydra.core.hydra_config import HydraConfig

    return str(HydraConfig.get().job.name) if HydraConfig.initialized() else "app"


def _read_seeds(directory: Path) -> Any:
    """The named seeds of the job's seeds.json (rlsweep's agents write one), or none."""
    try:
        recorded = json.loads((directory / SEEDS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return recorded.get("seeds", {}) if isinstance(recorded, dict) else {}


def _flat(node: Any, prefix: str = "") -> dict[str, int]:
    """Integer leaves of seeds.json, by dotted path (``train_envs.0``)."""
    if isinstance(node, dict):
        items = list(node.items())
    elif isinstance(node, list):
        items = list(enumerate(node))
    else:
        return {prefix[:-1]: node} if isinstance(node, int) and prefix else {}
    out: dict[str, int] = {}
    for key, value in items:
        out.update(_flat(value, f"{prefix}{key}."))
    return out
