"""The result store: job directory names, atomic files, job status, the sweep lock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsweep.errors import SweepLocked
from rlsweep.store import (
    atomic_write_json,
    clear_for_rerun,
    job_dir_name,
    job_name,
    job_status,
    should_run,
    sweep_lock,
)


def test_the_opt_in_stays_out_of_names_and_an_apps_logger_stays_in() -> None:
    assert job_dir_name("+rlsweep=joblib,x=1") == "x=1"
    assert job_dir_name("rlsweep=slurm") == "defaults"
    # An app's own logger settings are part of what its job is (and of its identity).
    assert (
        job_dir_name("logger=wandb,logger.level=2,seed=4") == "logger=wandb,logger.level=2,seed=4"
    )
    assert job_dir_name("blogger=2,seed=0") == "blogger=2,seed=0"


def test_a_job_is_named_by_the_swept_keys_in_full() -> None:
    """Sorted by key, no ``+``, and every key in the name however long its values: a long
    value is shortened to its start and a hash of it, distinct values stay distinct."""
    assert job_name([("seed", "3"), ("+optim.lr", "0.001")]) == "optim.lr=0.001,seed=3"
    assert job_name([]) == "defaults"
    keys = [(f"section{i}.a_long_key_name", "v" * 60 + str(i)) for i in range(6)]
    name = job_name(keys)
    assert len(name) <= 250  # a file name has at most 255 bytes
    assert all(f"section{i}.a_long_key_name=" in name for i in range(6))
    other = job_name([*keys[:-1], (keys[-1][0], "v" * 60 + "x")])
    assert other != name
    assert job_name([("env.id", "a/b")]) != job_name([("env.id", "a_b")])


def test_job_dir_names_are_readable_safe_and_distinct() -> None:
    assert job_dir_name("agent=a2c,seed=3") == "agent=a2c,seed=3"
    assert job_dir_name("") == "defaults"
    escaping = job_dir_name("env.id=../../x")
    assert "/" not in escaping and not escaping.startswith(".")
    assert escaping.startswith("env.id=.._.._x-")  # readable, with a hash of the original
    assert job_dir_name("a/b") != job_dir_name("a_b")  # replaced characters never collide
    assert job_dir_name("..") not in (".", "..")
    long = job_dir_name("x=" + "y" * 500)
    assert len(long) <= 200
    assert long != job_dir_name("x=" + "y" * 499)


def test_atomic_json_leaves_no_temporary_files(tmp_path: Path) -> None:
    atomic_write_json(tmp_path / "result.json", {"a": 1})
    atomic_write_json(tmp_path / "result.json", {"a": 2})
    assert json.loads((tmp_path / "result.json").read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_status_and_which_jobs_a_rerun_runs(tmp_path: Path) -> None:
    job = tmp_path / "job"
    assert job_status(job) == "missing"
    job.mkdir()
    assert job_status(job) == "incomplete"
    (job / "error.txt").write_text("Traceback")
    assert job_status(job) == "failed"
    (job / "result.json").write_text("{}")
    assert job_status(job) == "completed"
    table = {
        (status, rerun): should_run(status, rerun)
        for status in ("missing", "incomplete", "failed", "completed")
        for rerun in ("missing", "failed", "all")
    }
    assert [k for k, v in table.items() if not v] == [
        ("missing", "failed"),
        ("incomplete", "failed"),
        ("completed", "missing"),
        ("completed", "failed"),
    ]
    clear_for_rerun(job, fresh=False)
    assert not (job / "error.txt").exists() and (job / "result.json").exists()
    clear_for_rerun(job, fresh=True)
    assert not (job / "result.json").exists()


def test_the_sweep_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    with (
        sweep_lock(tmp_path),
        pytest.raises(SweepLocked, match="Another sweep is already running"),
        sweep_lock(tmp_path),
    ):
        pass
    with sweep_lock(tmp_path):  # released after the first sweep ended
        pass


def test_a_rerun_keeps_the_earlier_runs_links_pointing_where_they_did(tmp_path: Path) -> None:
    """rerun=all moves a job's files into .previous/<n>/: its relative links to files that
    stay (an app's logs outside the job, Hydra's files) are pointed again from their new
    place, links within what moved and absolute links are left as they are."""
    logs = tmp_path / "logs" / "run"
    logs.mkdir(parents=True)
    (logs / "events.out.tfevents.1").write_bytes(b"event")
    (logs / "latest").symlink_to("events.out.tfevents.1")  # the app's own: never touched
    job = tmp_path / "sweep" / "x=1"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "config.yaml").write_text("x: 1")
    (job / "outside_logs" / "0").mkdir(parents=True)
    (job / "data.txt").write_text("data")
    links = {
        "outside_logs/0/run": "../../../../logs/run",  # a directory outside the sweep
        "outside_logs/0/file": "../../../../logs/run/events.out.tfevents.1",
        "outside_logs/config": "../.hydra/config.yaml",  # stays in the job directory
        "outside_logs/data": "../data.txt",  # moves with it
        "outside_logs/absolute": str(logs),
    }
    for name, target in links.items():
        (job / name).symlink_to(target)
    before = {name: (job / name).resolve() for name in links}
    assert all(path.exists() for path in before.values())
    clear_for_rerun(job, fresh=True)
    moved = job / ".previous" / "1"
    assert sorted(p.name for p in job.iterdir()) == [".hydra", ".previous"]
    after = {name: (moved / name).resolve() for name in links}
    assert after == {**before, "outside_logs/data": (moved / "data.txt").resolve()}
    assert (moved / "outside_logs/0/file").read_bytes() == b"event"
    assert (moved / "outside_logs/0/run").readlink() == Path("../../../../../../logs/run")
    assert (moved / "outside_logs/data").readlink() == Path("../data.txt")
    assert (moved / "outside_logs/absolute").readlink() == logs
    assert (logs / "latest").readlink() == Path("events.out.tfevents.1")
