"""MLflow: one run per job, nested under one parent run per sweep, in the sweep's own
local store by default (``<sweep dir>/mlruns``; ``mlflow ui --backend-store-uri
file:multirun/<name>/mlruns``).

The default store is MLflow's file store: every run is its own directory, so parallel jobs
(and SLURM nodes on a shared file system) write side by side without a database lock.
MLflow 3 keeps that store in maintenance mode and asks for ``MLFLOW_ALLOW_FILE_STORE=true``,
which rlsweep sets for it. ``logger.mlflow.tracking_uri`` selects any other store or server.

A resumed job continues its run; each step is logged once: the rows after the last step
the run holds (read from MLflow) are sent, those it holds are not sent again.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlsweep.store import open_no_follow, write_no_follow
from rlsweep.trackers.base import JobInfo, Resume

log = logging.getLogger(__name__)

PARENT_FILE = ".mlflow_sweep.json"  # in the sweep directory: its experiment and parent run


@dataclass
class Settings:
    """``hydra.launcher.trackers.mlflow`` (the built-in app: ``logger.mlflow``)."""

    # Tracking store or server; null: file:<sweep dir>/mlruns.
    tracking_uri: str | None = None
    # Experiment name; null: the sweep's name.
    experiment: str | None = None


class MLflowTracker:
    def __init__(self, settings: Settings, info: JobInfo, resume: Resume) -> None:
        uri = settings.tracking_uri or (info.sweep_dir / "mlruns").resolve().as_uri()
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.tracking import MlflowClient

        self._client = MlflowClient(tracking_uri=uri)
        self._resume = resume
        if resume.replaced_run is not None:  # the job started over: so does its run
            _delete(self._client, resume.replaced_run)
        self.run_id = resume.run_id or self._new_run(uri, settings.experiment or info.sweep, info)

    def _new_run(self, uri: str, experiment_name: str, info: JobInfo) -> str:
        """The job's run, under the sweep's parent run, with its tags and params."""
        experiment, parent = _sweep_runs(self._client, uri, experiment_name, info)
        tags = {
            "mlflow.parentRunId": parent,
            "rlsweep.agent": info.agent,
            "rlsweep.replicate": str(info.replicate),
            "rlsweep.root": str(info.root),
            "rlsweep.digest": info.digest,
            **{f"rlsweep.seed.{k}": str(v) for k, v in info.seeds.items()},
        }
        run_id = str(self._client.create_run(experiment, run_name=info.name, tags=tags).info.run_id)
        self._client.log_batch(run_id, params=_params(info.config))
        return run_id

    def held_until(self) -> int | None:
        if self._resume.run_id is None:
            return None
        metrics = self._client.get_run(self.run_id).data.metrics
        history = (self._client.get_metric_history(self.run_id, key) for key in metrics)
        return max((int(m.step) for entries in history for m in entries), default=None)

    def log(self, step: int, values: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, value, now, step) for key, value in values.items()]
        self._client.log_batch(self.run_id, metrics=metrics)

    def close(self, failed: bool) -> None:
        self._client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")


def _delete(client: Any, run_id: str) -> None:
    """Delete an earlier attempt's run (one already gone is said in the job's log)."""
    from mlflow.exceptions import MlflowException

    try:
        client.delete_run(run_id)
    except MlflowException as exc:
        log.info(f"an earlier attempt's MLflow run {run_id} was not deleted: {exc}")


def _sweep_runs(client: Any, uri: str, name: str, info: JobInfo) -> tuple[str, str]:
    """The sweep's experiment and parent run, ``(experiment id, run id)``: made by the first
    job under a lock in the sweep's directory (MLflow's file store does not stop two jobs
    from each making an experiment of the same name), found by the others and by later
    runs of the same sweep."""
    path = info.sweep_dir / PARENT_FILE
    lock_fd = open_no_follow(info.sweep_dir / f"{PARENT_FILE}.lock", os.O_RDWR | os.O_CREAT)
    with os.fdopen(lock_fd, "r+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            known = json.loads(path.read_text()) if path.exists() else {}
        except ValueError:
            known = {}
        if known.get("uri") == uri and known.get("experiment") == name:
            return str(known["experiment_id"]), str(known["parent"])
        found = client.get_experiment_by_name(name)
        experiment = str(found.experiment_id if found else client.create_experiment(name))
        run = client.create_run(experiment, run_name=info.sweep, tags={"rlsweep.sweep": "true"})
        client.set_terminated(run.info.run_id, "FINISHED")
        record = {"uri": uri, "experiment": name, "experiment_id": experiment}
        write_no_follow(path, json.dumps({**record, "parent": run.info.run_id}) + "\n")
        return experiment, str(run.info.run_id)


def _params(config: Mapping[str, Any], prefix: str = "") -> list[Any]:
    """The job's config as MLflow params, flattened (``agent.learning_rate``)."""
    from mlflow.entities import Param

    out: list[Any] = []
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out += _params(value, f"{name}.")
        else:
            out.append(Param(name, str(value)[:6000]))
    return out


def start(settings: Settings, info: JobInfo, resume: Resume) -> Any:
    return MLflowTracker(settings, info, resume)
