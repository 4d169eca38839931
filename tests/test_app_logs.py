"""An app's own TensorBoard logs are whole on disk when its job ends, although the app never
closes its writer (rlsweep.app_logs): real sweeps of tests/apps/tb_unclosed, whose events
are all still queued when its task function returns, written by torch's SummaryWriter or
tensorboardX's."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
from conftest import NO_REPORT, run_python

from rlsweep.app_logs import flush_event_writers
from rlsweep.series import job_series

APP = Path(__file__).parent / "apps" / "tb_unclosed" / "app.py"


def test_every_event_an_app_queued_is_on_disk_failed_jobs_too(tmp_path: Path) -> None:
    """A serial sweep: its process exits right after the last job, whose writer's thread
    never ran (without the flush at the job's end, 4 runs left 39, 55, 74 and 99 of its 100
    events on disk).
    The first job fails after logging: its events are whole too."""
    command = [str(APP), "-m", "+rlsweep=serial", "x=1,2", "fail_x=1", NO_REPORT]
    proc = run_python(command, tmp_path)
    assert proc.returncode == 1 and "planned failure at x=1" in proc.stderr, proc.stderr[-3000:]
    for x in (1, 2):
        series = job_series(tmp_path / "multirun" / "app" / f"x={x}")
        assert series["eval/reward"].steps.tolist() == list(range(100))
        assert series["eval/reward"].values.tolist() == [float(x * s) for s in range(100)]


def test_logs_an_app_writes_outside_its_job_are_linked_into_it(tmp_path: Path) -> None:
    """Like sheeprl, the app writes below the directory the command ran in (``logs/x<x>``),
    under joblib, by torch's writer (a bytes path, opened in the writer's own thread):
    each job's directory links the event file it wrote (relative links), the failed job's
    too, and the report reads them (each job's last value)."""
    command = [str(APP), "-m", "+rlsweep=joblib", "x=1,2,3", "fail_x=1", "log_dir=logs"]
    proc = run_python(command, tmp_path)
    assert proc.returncode == 1 and "planned failure at x=1" in proc.stderr, proc.stderr[-3000:]
    sweep = tmp_path / "multirun" / "app"
    for x in (1, 2, 3):
        (event_file,) = (tmp_path / "logs" / f"x{x}").glob("events.out.tfevents.*")
        (link,) = (sweep / f"x={x}" / "outside_logs").glob("*/events.out.tfevents.*")
        assert link.is_symlink() and not Path(os.readlink(link)).is_absolute()
        assert link.resolve() == event_file.resolve() and link.parent.name == "0"
        series = job_series(sweep / f"x={x}")
        assert series["eval/reward"].steps.tolist() == list(range(100))
        assert series["eval/reward"].values.tolist() == [float(x * s) for s in range(100)]
    summary = json.loads((sweep / "summary.json").read_text())
    assert summary["metric"] == "eval/reward"
    assert {g["group"]: g["mean"] for g in summary["groups"]} == {
        "x=1": None,  # failed: no result
        "x=2": 198.0,
        "x=3": 297.0,
    }


def test_a_tensorboardx_writer_left_open_in_a_worker_is_whole_in_the_report(
    tmp_path: Path,
) -> None:
    """tensorboardX's writer (the apps built on rl_games use it) flushes its file every 120 s
    and its queue cannot be joined: under joblib, whose workers stay up after their jobs,
    the report written at the sweep's end read each job's events only up to step 81 of 99
    (measured 2026-11-27, before the flush at the job's end knew tensorboardX). Each job's
    last value is now its step 99's, in the report and on disk. And the workers exit
    quietly: each writer's thread printed ``OSError: handle is closed`` when its queue's
    pipe closed under it at the worker's exit."""
    command = [str(APP), "-m", "+rlsweep=joblib", "x=1,2,3", "writer=tensorboardx"]
    proc = run_python(command, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    sweep = tmp_path / "multirun" / "app"
    summary = json.loads((sweep / "summary.json").read_text())
    assert {g["group"]: g["mean"] for g in summary["groups"]} == {
        f"x={x}": 99.0 * x for x in (1, 2, 3)
    }
    for x in (1, 2, 3):
        series = job_series(sweep / f"x={x}")
        assert series["eval/reward"].steps.tolist() == list(range(100))


def test_tensorboardx_writers_flushed_by_jobs_ending_together_lose_no_event(
    tmp_path: Path,
) -> None:
    """Jobs ending at once in threads (backend=threading) each flush every open writer of
    the process: 3 threads flushing the same 4 tensorboardX writers after each round of 10
    events, 4 rounds. Each writer's file holds every event after each round, and each
    writer still has one live thread (a thread stopped twice would have left its second
    shutdown signal to its successor, which stopped: round 1 lost 10 events, before the
    flush took one writer restart at a time)."""
    from tensorboardX import SummaryWriter

    writers = [SummaryWriter(str(tmp_path / f"j{j}" / "tb"), max_queue=1000) for j in range(4)]
    try:
        for done in range(10, 50, 10):
            for w in writers:
                for step in range(done - 10, done):
                    w.add_scalar("eval/reward", float(step), step)
            flushing = [threading.Thread(target=flush_event_writers) for _ in range(3)]
            for t in flushing:
                t.start()
            for t in flushing:
                t.join()
            for j in range(4):
                steps = job_series(tmp_path / f"j{j}")["eval/reward"].steps.tolist()
                assert steps == list(range(done)), (done, j)
        alive = [t for t in threading.enumerate() if type(t).__name__ == "_EventLoggerThread"]
        assert len(alive) == 4
    finally:
        for w in writers:
            w.close()


def test_a_fresh_rerun_reads_only_its_own_logs(tmp_path: Path) -> None:
    """rerun=all after a config change: the app's earlier logs move to .previous/1 (kept,
    never read), so a run that logs less is not completed by its predecessor's steps."""
    app = tmp_path / "app"
    shutil.copytree(APP.parent, app)
    command = [str(app / "app.py"), "-m", "+rlsweep=serial", "x=3", "busy=false", NO_REPORT]
    first = run_python(command, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    config = app / "config.yaml"
    config.write_text(config.read_text().replace("points: 100", "points: 40"))
    refused = run_python(command, tmp_path)
    assert refused.returncode != 0 and "points: 100 then, 40 now" in refused.stderr, refused.stderr
    again = run_python([*command, "hydra.sweeper.rerun=all"], tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    job = tmp_path / "multirun" / "app" / "defaults"  # nothing swept
    assert job_series(job)["eval/reward"].steps.tolist() == list(range(40))
    assert job_series(job / ".previous" / "1")["eval/reward"].steps.tolist() == list(range(100))
    assert (job / "result.json").is_file() and not (
        job / ".previous" / "1" / "result.json"
    ).exists()


def test_which_files_a_job_opens_are_linked_and_where(tmp_path: Path) -> None:
    """In this process (the audit hook is real): files opened for writing outside the job's
    directory are linked, a per-metric CSV file with its path below ``scalars/`` (the
    reader finds it there), an event file opened by a bytes path or by a thread of no job;
    a file read, a file that is not a log, or a log inside the job's directory is not. A
    second attempt's links go to the next free directory; none is made outside a job."""
    from rlsweep.outside_logs import linking_outside_logs

    job, logs = tmp_path / "job", tmp_path / "logs"
    (logs / "run" / "scalars" / "eval").mkdir(parents=True)
    (job / "tb").mkdir(parents=True)
    csv_file = logs / "run" / "scalars" / "eval" / "reward.csv"
    with linking_outside_logs(job):
        with csv_file.open("w") as f:
            f.write("0,1.5\n1,2.5\n")
        with csv_file.open("a") as f:  # opened again: one link
            f.write("2,3.5\n")
        (logs / "notes.txt").write_text("not a log")
        (job / "tb" / "events.out.tfevents.1.inside").write_bytes(b"")
        csv_file.read_text()
        other = threading.Thread(
            target=lambda: open(os.fsencode(logs / "events.out.tfevents.2.thread"), "wb").close()
        )
        other.start()
        other.join()
    (logs / "events.out.tfevents.3.after").write_bytes(b"")  # no job running
    with linking_outside_logs(job):
        (logs / "run" / "scalars" / "loss.csv").write_text("0,9\n")

    links = sorted(
        str(p.relative_to(job / "outside_logs")) for p in job.rglob("*") if p.is_symlink()
    )
    assert links == [
        "0/scalars/eval/reward.csv",
        "1/events.out.tfevents.2.thread",
        "2/scalars/loss.csv",
    ]
    series = job_series(job)
    assert series["eval/reward"].values.tolist() == [1.5, 2.5, 3.5]
    assert series["loss"].values.tolist() == [9.0]


def test_lightnings_and_sb3s_csv_logs_written_outside_the_job_are_linked(tmp_path: Path) -> None:
    """Real Lightning and Stable-Baselines3 CSV loggers pointed outside the job's directory,
    in this process: each wide CSV file (opened through fsspec by Lightning) gets a link in
    its own directory, a rewrite with a wider header is the same link, and the reader finds
    both files' series there."""
    from lightning.pytorch.loggers import CSVLogger
    from stable_baselines3.common.logger import configure

    from rlsweep.outside_logs import linking_outside_logs

    job, logs = tmp_path / "job", tmp_path / "logs"
    job.mkdir()
    with linking_outside_logs(job):
        lightning = CSVLogger(str(logs))
        lightning.log_metrics({"train/loss": 0.5}, step=3)
        lightning.save()
        lightning.log_metrics({"val/acc": 0.75}, step=4)  # a new column: the file rewritten
        lightning.save()
        sb3 = configure(str(logs / "sb3"), ["csv"])
        sb3.record("time/total_timesteps", 64)
        sb3.record("rollout/ep_rew_mean", 9.5)
        sb3.dump(step=1)
        sb3.close()
    links = sorted(
        str(p.relative_to(job / "outside_logs")) for p in job.rglob("*") if p.is_symlink()
    )
    assert links == ["0/metrics.csv", "1/progress.csv"]
    assert os.readlink(job / "outside_logs" / "0" / "metrics.csv") == (
        "../../../logs/lightning_logs/version_0/metrics.csv"
    )
    series = job_series(job)
    assert series["train/loss"].values.tolist() == [0.5]
    assert series["val/acc"].steps.tolist() == [4.0]
    assert series["rollout/ep_rew_mean"].steps.tolist() == [64.0]
    assert series["rollout/ep_rew_mean"].source == "outside_logs/1/progress.csv"


def test_a_link_that_cannot_be_made_never_fails_the_apps_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The job's ``outside_logs`` is a file (a link cannot be made there): the app's file is
    written all the same, and the sweep's log says what was not linked."""
    from rlsweep.outside_logs import linking_outside_logs

    job = tmp_path / "job"
    job.mkdir()
    (job / "outside_logs").write_text("in the way")
    event_file = tmp_path / "logs" / "events.out.tfevents.1.x"
    event_file.parent.mkdir()
    with linking_outside_logs(job):
        event_file.write_bytes(b"data")
    assert event_file.read_bytes() == b"data"
    assert f"could not link {event_file} into {job}/outside_logs: NotADirectoryError" in (
        capsys.readouterr().err
    )
