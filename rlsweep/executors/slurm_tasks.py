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
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rlsweep.store import SLURM_TASKS_FILE, LinkRefused, open_no_follow

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
            # A record starts on its own line, after a line a killed writer cut short.
            size = os.fstat(fd).st_size
            lead = "\n" if size and os.pread(fd, 1, size - 1) != b"\n" else ""
            os.write(fd, (lead + lines).encode("utf-8"))  # one write: appended whole
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
    queued = _squeue_names(sorted({t.task_id.split("_")[0] for t in tasks}))
    live: dict[str, Task] = {}
    for task in tasks:
        if queued.get(task.task_id) == task.name:
            live[task.job] = task
    return live


def _squeue_names(array_ids: list[str]) -> dict[str, str]:
    """The job name of each task of these arrays still in SLURM's queue (pending tasks one
    by one), by task id; empty when none is, or when squeue cannot say (then nothing is
    adopted: the jobs are submitted again and their claims keep two runs apart)."""
    command = ["squeue", "-h", "-r", "-o", "%i|%j", "-j", ",".join(array_ids)]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning(f"could not ask squeue for this sweep's earlier SLURM tasks: {exc}")
        return {}
    if out.returncode != 0:
        if "invalid job id" not in out.stderr.lower():  # that one: all have left the queue
            log.warning(
                f"could not ask squeue for this sweep's earlier SLURM tasks: {out.stderr.strip()}"
            )
        return {}
    pairs = (line.split("|", 1) for line in out.stdout.splitlines())
    return {p[0].strip(): p[1].strip() for p in pairs if len(p) == 2}
