"""The SLURM array tasks a sweep submitted, recorded in its directory (``.rlsweep.slurm.jsonl``).

A sweep's process can die while its arrays run on (``kill -9``, a login node's session
dropped): SLURM keeps running them. Run again, the same command finds the tasks of its
jobs still queued or running, and adopts them: it follows them as its own (their states,
their results, Ctrl-C cancels them) instead of submitting the jobs a second time. A task
is adopted only while ``squeue`` lists it under the job name it was submitted with, so a
job id a purged cluster gives out again is never mistaken for the sweep's.

One line per submitted task: its SLURM id (``<array>_<index>``), the job's directory
relative to the sweep directory, submitit's folder of the batch, and the SLURM job name.
The file is appended to with single writes, never through a link; a damaged line (a killed
writer's) is skipped.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from rlsweep.executors.slurm_states import squeue
from rlsweep.store import SLURM_TASKS_FILE, LinkRefused, append_whole, open_no_follow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Task:
    """One submitted array task, as recorded."""

    task_id: str  # SLURM's id of the task: <array>_<index>
    job: str  # the job's directory, relative to the sweep directory
    folder: str  # submitit's folder of its batch (with submitit's %j in it)
    name: str  # the SLURM job name it was submitted with


def job_key(sweep_dir: Path, job_dir: Path) -> str:
    """How a job is named in the record: its directory relative to the sweep directory."""
    return os.path.relpath(job_dir.absolute(), sweep_dir.absolute())


def record_tasks(sweep_dir: Path, tasks: list[Task]) -> None:
    """Append submitted tasks to the sweep's record. A record that cannot be written is
    said (a later run could not adopt these tasks; their jobs' claims still keep a second
    run of each from running beside them)."""
    if not tasks:
        return
    lines = "".join(json.dumps(t.__dict__) + "\n" for t in tasks)
    path = sweep_dir / SLURM_TASKS_FILE
    try:
        fd = open_no_follow(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            append_whole(fd, lines)
        finally:
            os.close(fd)
    except (OSError, LinkRefused) as exc:
        log.warning(f"could not record the submitted SLURM tasks in {path}: {exc}")


def recorded_tasks(sweep_dir: Path) -> list[Task]:
    """Every task the sweep's runs recorded, oldest first (a damaged line skipped; none
    without the file; a link at the file is not read)."""
    try:
        fd = open_no_follow(sweep_dir / SLURM_TASKS_FILE, os.O_RDONLY)
    except (OSError, LinkRefused):
        return []
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    tasks = []
    for raw in data.splitlines():
        try:
            entry = json.loads(raw)
            tasks.append(Task(**{k: str(entry[k]) for k in Task.__dataclass_fields__}))
        except (ValueError, TypeError, KeyError):
            continue
    return tasks


def live_tasks(tasks: list[Task]) -> dict[str, Task]:
    """Of these recorded tasks, those SLURM still has queued or running under the job name
    they were submitted with, by job (a job's newest, if several are)."""
    if not tasks:
        return {}
    problems: list[str] = []
    queued = squeue(sorted({t.task_id.split("_")[0] for t in tasks}), "%j", problems)
    if queued is None:  # nothing adopted: the jobs go again, their claims keep runs apart
        log.warning(f"could not ask squeue for this sweep's earlier SLURM tasks: {problems[0]}")
        return {}
    live: dict[str, Task] = {}
    for task in tasks:
        if queued.get(task.task_id) == task.name:
            live[task.job] = task
    return live
