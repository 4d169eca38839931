"""No write through a link: a sweep directory on a shared, group-writable file system may
hold a symbolic link planted where rlsweep writes (the sweep lock, a job's attempts, its
metrics, the job directory itself). Each is refused, never followed, and what the link
points to is left as it was."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from test_any_app import run_app, run_serially

import rlsweep
from rlsweep.executors.attempts import read_attempts
from rlsweep.identity import identity_of
from rlsweep.store import (
    ATTEMPTS_FILE,
    LOCK_FILE,
    METRICS_FILE,
    LinkRefused,
    clear_for_rerun,
    iter_job_dirs,
    sweep_lock,
)
from rlsweep.task_api import Job

SWEEP = ("x=1,2", "hydra.sweeper.report=false")
REFUSED = "is a symbolic link"


def sweep_once(tmp_path: Path, *more: str) -> Path:
    """A small sweep of the plain app run in the sweep's own process; its directory."""
    proc = run_serially([*SWEEP, *more], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return tmp_path / "multirun" / "app"


def outside_file(tmp_path: Path) -> tuple[Path, bytes]:
    """A file outside the sweep a link will point to, and its bytes."""
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    data = b"a teammate's file\nnot rlsweep's\n"
    target.write_bytes(data)
    return target, data


def tree(directory: Path) -> dict[str, bytes | None]:
    """Every file and directory under ``directory`` (relative path: bytes, None for a
    directory)."""
    return {
        str(p.relative_to(directory)): None if p.is_dir() else p.read_bytes()
        for p in directory.rglob("*")
    }


def test_a_linked_lock_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target, data = outside_file(tmp_path)
    sweep = tmp_path / "multirun" / "app"
    sweep.mkdir(parents=True)
    (sweep / LOCK_FILE).symlink_to(target)
    proc = run_serially(list(SWEEP), tmp_path)
    assert proc.returncode != 0
    assert f"{sweep.relative_to(tmp_path) / LOCK_FILE} {REFUSED}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert target.read_bytes() == data
    assert not [p for p in sweep.iterdir() if p.is_dir()]  # no job ran


def test_the_lock_refuses_a_link_in_process_and_still_locks(tmp_path: Path) -> None:
    target, data = outside_file(tmp_path)
    (tmp_path / LOCK_FILE).symlink_to(target)
    refused = f"{LOCK_FILE} is a symbolic link \\(to {target}\\)"
    with pytest.raises(LinkRefused, match=refused), sweep_lock(tmp_path):
        pass
    assert target.read_bytes() == data
    (tmp_path / LOCK_FILE).unlink()
    with sweep_lock(tmp_path):
        assert (tmp_path / LOCK_FILE).read_text() == f"pid {os.getpid()}"


def test_a_linked_attempts_file_is_not_written_through(tmp_path: Path) -> None:
    sweep = sweep_once(tmp_path)
    target, data = outside_file(tmp_path)
    job = sweep / "x=1"
    (job / ATTEMPTS_FILE).unlink()
    (job / ATTEMPTS_FILE).symlink_to(target)
    proc = run_serially([*SWEEP, "hydra.sweeper.rerun=all"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]  # the job's outcome still counts
    said = proc.stdout + proc.stderr
    assert f"attempt 1 not logged: {job.relative_to(tmp_path) / ATTEMPTS_FILE} {REFUSED}" in said
    assert target.read_bytes() == data
    assert (job / ATTEMPTS_FILE).is_symlink()
    assert (job / "result.json").is_file()


@pytest.mark.parametrize("rerun", ["all", "missing"])
def test_a_linked_job_directory_is_refused_and_its_target_untouched(
    tmp_path: Path, rerun: str
) -> None:
    """rerun=all would have moved the target's files into .previous/1/ and run the job
    there; rerun=missing would have run it there (the target holds no result)."""
    sweep = sweep_once(tmp_path)
    target = tmp_path / "elsewhere"
    (target / ".hydra").mkdir(parents=True)
    (target / ".hydra" / "config.yaml").write_text("x: 1\n")
    (target / "checkpoint.pt").write_bytes(b"someone's run")
    (target / "notes.txt").write_text("keep me\n")
    before = tree(target)
    job = sweep / "x=1"
    for path in sorted(job.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    job.rmdir()
    job.symlink_to(target)
    proc = run_serially([*SWEEP, f"hydra.sweeper.rerun={rerun}"], tmp_path)
    assert proc.returncode != 0
    assert f"{job.relative_to(tmp_path)} {REFUSED}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert tree(target) == before
    assert not (target / ".previous").exists()


def test_a_linked_job_directory_is_refused_under_another_sweeper(tmp_path: Path) -> None:
    """Hydra's own sweepers (basic, Optuna) hand rlsweep's launcher jobs that rlsweep's
    sweeper never planned: the job refuses its linked directory before writing anything
    there (its worker pid, its error.txt, its result)."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "notes.txt").write_text("keep me\n")
    before = tree(target)
    sweep = tmp_path / "multirun" / "app"
    sweep.mkdir(parents=True)
    (sweep / "x=1").symlink_to(target)
    proc = run_app(["x=1,2", "hydra/sweeper=basic"], tmp_path)  # in a worker process
    assert proc.returncode != 0
    assert f"multirun/app/x=1 {REFUSED}" in proc.stderr
    assert tree(target) == before
    assert (sweep / "x=2" / "result.json").is_file()


def test_clearing_a_linked_job_directory_moves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "result.json").write_text("{}")
    (target / "app.log").write_text("log\n")
    before = tree(target)
    (tmp_path / "sweep").mkdir()
    link = tmp_path / "sweep" / "x=1"
    link.symlink_to(target)
    with pytest.raises(LinkRefused, match="x=1 is a symbolic link"):
        clear_for_rerun(link, fresh=True)
    assert tree(target) == before
    assert list(iter_job_dirs(tmp_path / "sweep")) == []  # a link is no job's directory


def test_a_linked_metrics_file_is_replaced_not_written_through(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target, data = outside_file(tmp_path)
    job = Job(identity_of({"lr": 0.1, "seed": 0}, rlsweep.Keys()), tmp_path / "job")
    job.directory.mkdir()
    job.log(1, value=0.5)
    (job.directory / METRICS_FILE).unlink()
    (job.directory / METRICS_FILE).symlink_to(target)
    with caplog.at_level(logging.WARNING):
        job.log(2, value=1.5)
    assert target.read_bytes() == data
    assert f"{job.directory / METRICS_FILE} {REFUSED}" in caplog.text
    metrics = job.directory / METRICS_FILE
    assert not metrics.is_symlink()
    assert metrics.read_text().splitlines() == ["step,value", "1,0.5", "2,1.5"]


def test_attempts_start_on_their_own_line_and_are_numbered_across_runs(tmp_path: Path) -> None:
    """A half line a killed writer left is skipped by readers and never glued to the next
    record; each run of the sweep command numbers on from the last whole record."""
    sweep = sweep_once(tmp_path)
    job = sweep / "x=1"
    sweep_once(tmp_path, "hydra.sweeper.rerun=all")
    assert [a["attempt"] for a in read_attempts(job)] == [1, 2]
    with (job / ATTEMPTS_FILE).open("a") as f:
        f.write('{"attempt": 3, "outc')  # killed mid-write
    sweep_once(tmp_path, "hydra.sweeper.rerun=all")
    lines = (job / ATTEMPTS_FILE).read_text().splitlines()
    assert lines[2] == '{"attempt": 3, "outc'
    assert json.loads(lines[3])["attempt"] == 3 and len(lines) == 4
    assert [(a["attempt"], a["outcome"]) for a in read_attempts(job)] == [
        (1, "completed"),
        (2, "completed"),
        (3, "completed"),
    ]
