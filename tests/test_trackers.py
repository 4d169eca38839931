"""Trackers (logger=tensorboard / wandb / mlflow) read back with the real libraries: what
each holds equals the job's metrics.csv; a job that resumed logs no step twice; a tracker
that fails is reported once and the job goes on; trackers never change what a job is."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import TINY, run_cli

from rlsweep.errors import ConfigError
from rlsweep.trackers.base import STATE_FILE, JobInfo
from rlsweep.trackers.feed import Feed
from rlsweep.trackers.settings import chosen
from rlsweep.trackers.wandb import run_file_parsed

ALL = "logger=[tensorboard,wandb,mlflow]"
METRICS = ("eval_return_mean", "eval_return_std", "train_return_mean", "train_episodes")

# ----------------------------------------------------------------- reading the trackers


def tensorboard_scalars(job_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the job's event files, by TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(job_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def wandb_records(job_dir: Path) -> list[Any]:
    """The records of the job's offline W&B run(s), parsed with W&B's own protobufs."""
    paths = sorted(job_dir.glob("wandb/offline-run-*/run-*.wandb"))
    return [record for path in paths for record in run_file_parsed(path)]


def recorded(job: Path) -> dict[str, Any]:
    """The job's tracker state file (written atomically), or {} before it is."""
    path = job / STATE_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def wandb_history(job_dir: Path) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for record in wandb_records(job_dir):
        if record.WhichOneof("record_type") != "history":
            continue
        row = {
            item.key or ".".join(item.nested_key): json.loads(item.value_json)
            for item in record.history.item
        }
        for key, value in row.items():
            if not key.startswith("_"):
                out.setdefault(key, []).append((int(row["_step"]), float(value)))
    return out


def wandb_run(job_dir: Path) -> Any:
    (run,) = {r.run.run_id: r.run for r in wandb_records(job_dir) if r.HasField("run")}.values()
    return run


def mlflow_client(sweep: Path) -> Any:
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=(sweep / "mlruns").resolve().as_uri())


def mlflow_history(client: Any, run_id: str) -> dict[str, list[tuple[int, float]]]:
    run = client.get_run(run_id)
    return {
        key: sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
        for key in run.data.metrics
    }


def expected(job_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """metrics.csv, column by column (empty cells left out), as (step, value)."""
    with (job_dir / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    return {
        key: [(int(r["step"]), float(r[key])) for r in rows if r[key] != ""]
        for key in rows[0]
        if key != "step"
    }


# ------------------------------------------------------------------------------ a sweep


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A 2x2 sweep with all three trackers."""
    cwd = tmp_path_factory.mktemp("trackers")
    args = ["-m", "agent=a2c,ppo", "seed=range(2)", *TINY, "name=t", "n_jobs=2"]
    proc = run_cli([*args, ALL], cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "tracker" not in proc.stderr  # no tracker failed
    return cwd / "multirun" / "t", (args, cwd)


def test_every_tracker_holds_the_jobs_metrics(sweep: tuple[Path, Any]) -> None:
    sweep_dir, _ = sweep
    jobs = sorted(p for p in sweep_dir.iterdir() if (p / "result.json").exists())
    assert [j.name for j in jobs] == [  # trackers stay out of job directory names
        f"agent={a},seed={s}" for a in ("a2c", "ppo") for s in (0, 1)
    ]
    client = mlflow_client(sweep_dir)
    parents = set()
    for job in jobs:
        want = expected(job)
        assert set(METRICS) <= set(want)
        # TensorBoard keeps float32; W&B and MLflow the float64 itself.
        # TensorBoard: the wall time is each event's own timestamp, not a scalar.
        tb = tensorboard_scalars(job)
        assert "wall_time" not in tb
        assert {
            k: [(s, np.float32(v)) for s, v in rows] for k, rows in want.items() if k != "wall_time"
        } == {k: [(s, np.float32(v)) for s, v in rows] for k, rows in tb.items()}
        assert wandb_history(job) == want
        state = recorded(job)
        assert mlflow_history(client, state["mlflow"]["run_id"]) == want
        run = client.get_run(state["mlflow"]["run_id"])
        parents.add(run.data.tags["mlflow.parentRunId"])
        replicate = json.loads((job / "result.json").read_text())["replicate"]
        assert run.data.tags["rlsweep.replicate"] == str(replicate)
        seeds = json.loads((job / "seeds.json").read_text())
        assert run.data.tags["rlsweep.seed.agent"] == str(seeds["seeds"]["agent"])
        wb = wandb_run(job)
        assert (wb.run_group, wb.job_type, wb.display_name) == ("t", job.name[6:9], job.name)
        assert f"replicate={replicate}" in list(wb.tags)
        assert f"seed.agent={seeds['seeds']['agent']}" in list(wb.tags)
    assert len(parents) == 1  # one parent run for the sweep
    (parent,) = parents
    assert client.get_run(parent).info.run_name == "t"


def test_trackers_do_not_change_what_a_job_is(sweep: tuple[Path, Any]) -> None:
    """The same sweep without trackers finds every job done: same directories, same
    identities (so the same seeds and numbers)."""
    _, (args, cwd) = sweep
    proc = run_cli(args, cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "4 of 4 jobs already complete (skipped), 0 to run" in proc.stderr


# ------------------------------------------------------------------------ resume, failure


def info(directory: Path) -> JobInfo:
    return JobInfo(directory, directory.name, directory.parent, "s", "agent", 0, "d" * 16, 0)


def feed(directory: Path, names: tuple[str, ...]) -> Feed:
    settings = chosen({"logger": {name: {} for name in names}})
    return Feed(settings, directory, lambda: info(directory))


def resumed_attempt(job: Path, names: tuple[str, ...]) -> dict[str, list[tuple[int, float]]]:
    """A job's attempt resumed from its checkpoint at step 10 (rows 0 and 10 restored): it
    computes 20 and 30 again, then 40. Returns every row of the job, as (step, value)."""
    second = feed(job, names)
    second.restored([{"step": s * 10, "r": s + 0.5, "n": s} for s in range(2)])
    for step in range(2, 5):
        second.send(step * 10, {"r": step + 0.5, "n": step})
    second.close(failed=False)
    return {"r": [(s * 10, s + 0.5) for s in range(5)], "n": [(s * 10, s) for s in range(5)]}


def test_a_resumed_job_logs_each_step_once_in_every_tracker(tmp_path: Path) -> None:
    job = tmp_path / "sweep" / "job"
    job.mkdir(parents=True)
    names = ("tensorboard", "wandb", "mlflow")
    first = feed(job, names)  # killed after step 3; its checkpoint was at step 1
    first.send(0, {"r": 0.5})  # two rows at one step: both sent
    first.send(0, {"n": 0})
    # Live: the row is in the trackers while the job runs (before it ends).
    deadline = time.monotonic() + 60
    while not (
        tensorboard_scalars(job).get("r") == [(0, 0.5)]
        and recorded(job).get("mlflow", {}).get("last_step") == 0
    ):
        assert time.monotonic() < deadline, "the first row never reached the trackers"
        time.sleep(0.2)
    run_id = recorded(job)["mlflow"]["run_id"]
    assert mlflow_history(mlflow_client(job.parent), run_id)["r"] == [(0, 0.5)]
    for step in range(1, 4):
        first.send(step * 10, {"r": step + 0.5, "n": step})
    first.close(failed=True)
    want = resumed_attempt(job, names)
    assert tensorboard_scalars(job) == want
    assert wandb_history(job) == want
    state = recorded(job)
    assert mlflow_history(mlflow_client(job.parent), state["mlflow"]["run_id"]) == want
    assert state["wandb"]["last_step"] == 40
    assert len({r.run.run_id for r in wandb_records(job) if r.HasField("run")}) == 1


def test_a_job_started_over_sends_every_row_of_its_new_run(tmp_path: Path) -> None:
    """No checkpoint to resume (a new run replaces the earlier attempt's): each row is sent,
    whatever its step, also below the first row's."""
    job = tmp_path / "sweep" / "job"
    job.mkdir(parents=True)
    first = feed(job, ("tensorboard",))
    first.send(0, {"r": 0.5})
    first.close(failed=True)
    again = feed(job, ("tensorboard",))
    again.send(10, {"r": 1.5})
    again.send(5, {"n": 1})  # an app's rows need not come in step order
    again.close(failed=False)
    assert tensorboard_scalars(job) == {"r": [(10, 1.5)], "n": [(5, 1.0)]}


# A job's first attempt, in a process of its own: logs steps 0-30 to W&B and MLflow, then
# waits to be killed with its session (W&B's service process with it: a machine lost).
KILLED_ATTEMPT = """
import sys, time
from pathlib import Path
from rlsweep.trackers.base import JobInfo
from rlsweep.trackers.feed import Feed
from rlsweep.trackers.settings import chosen
job = Path(sys.argv[1])
info = JobInfo(job, job.name, job.parent, "s", "agent", 0, "d" * 16, 0)
feed = Feed(chosen({"logger": {"wandb": {}, "mlflow": {}}}), job, lambda: info)
for step in range(4):
    feed.send(step * 10, {"r": step + 0.5, "n": step})
time.sleep(600)
"""


def test_a_job_resumed_after_its_machine_was_lost_logs_each_step_once(tmp_path: Path) -> None:
    """The first attempt recorded steps 0-30 as sent; W&B's service, killed with it, had
    written none of them. The resumed attempt (from a checkpoint at step 10) sends the
    restored rows each run lacks, then its own: every step once in each run, also when
    the attempt was killed after sending a row to MLflow and before recording it."""
    job = tmp_path / "sweep" / "job"
    job.mkdir(parents=True)
    command = [sys.executable, "-c", KILLED_ATTEMPT, str(job)]
    # Its own W&B service, lost with it (a child would share this process's, if it has one).
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}
    first = subprocess.Popen(command, env=env, start_new_session=True, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while any(recorded(job).get(n, {}).get("last_step") != 30 for n in ("wandb", "mlflow")):
            assert first.poll() is None, first.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the first attempt never sent its rows"
            time.sleep(0.05)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate()
    state = recorded(job)
    # Killed between sending step 30 to MLflow and recording it.
    state["mlflow"]["last_step"] = 20
    (job / STATE_FILE).write_text(json.dumps(state))
    want = resumed_attempt(job, ("wandb", "mlflow"))
    assert wandb_history(job) == want
    assert mlflow_history(mlflow_client(job.parent), state["mlflow"]["run_id"]) == want


@pytest.fixture
def late_wandb_service(monkeypatch: pytest.MonkeyPatch) -> Any:
    """W&B's service as a busy machine runs it: ``run.finish()`` returns once the service has
    the run's end, and then tells it (without waiting) to close the run's stream, which is
    when it writes the run file's buffered tail (wandb 0.31). Here that message leaves
    ``delay[0]`` seconds late, from a thread, which makes certain the race a loaded machine
    loses now and then (beside 5 busy processes, 26 of 100 jobs' run files read at once after
    their end lacked their rows, before the tracker waited for them)."""
    import threading

    from wandb.sdk.lib.service.service_connection import ServiceConnection

    delay, timers = [2.0], []
    inform_finish = ServiceConnection.inform_finish

    def late(self: Any, run_id: str) -> None:
        timers.append(threading.Timer(delay[0], inform_finish, (self, run_id)))
        timers[-1].start()

    monkeypatch.setattr(ServiceConnection, "inform_finish", late)
    yield delay
    for timer in timers:  # every stream closed before the job's directory goes
        timer.join()


def test_a_jobs_end_waits_until_wandb_has_written_its_last_row(
    tmp_path: Path, late_wandb_service: list[float]
) -> None:
    for failed in (True, False):
        job = tmp_path / str(failed)
        job.mkdir()
        jobs_feed = feed(job, ("wandb",))
        for step in range(3):
            jobs_feed.send(step * 10, {"r": step + 0.5})
        jobs_feed.close(failed=failed)
        assert wandb_history(job) == {"r": [(0, 0.5), (10, 1.5), (20, 2.5)]}
        (end,) = [r.exit for r in wandb_records(job) if r.HasField("exit")]
        assert end.exit_code == (1 if failed else 0)


def test_a_wandb_run_not_written_in_time_is_reported(
    tmp_path: Path,
    late_wandb_service: list[float],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import rlsweep.trackers.wandb

    monkeypatch.setattr(rlsweep.trackers.wandb, "WRITTEN_TIMEOUT_S", 0.5)
    late_wandb_service[0] = 5.0
    jobs_feed = feed(tmp_path, ("wandb",))
    jobs_feed.send(0, {"r": 0.5})
    jobs_feed.close(failed=False)  # the service writes the run 5 s later, past the wait
    err = capsys.readouterr().err
    assert (
        f"[rlsweep] job {tmp_path.name}: tracker wandb failed and is dropped (TimeoutError: "
        "W&B's service had not written the run's end to "
    ) in err
    assert "s after the run finished: the file may lack the job's last rows)" in err


def test_a_failing_tracker_is_reported_once_and_the_job_goes_on(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    (broken / "mlflow").mkdir(parents=True)
    (broken / "mlflow" / "__init__.py").write_text("raise ImportError('no mlflow here')\n")
    path = os.pathsep.join(p for p in (str(broken), os.environ.get("PYTHONPATH")) if p)
    proc = run_cli(
        ["agent=ppo", *TINY, "logger=[tensorboard,mlflow]", f"hydra.run.dir={tmp_path}/run"],
        tmp_path,
        env={"PYTHONPATH": path},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("tracker mlflow failed and is dropped") == 1
    assert "ImportError: no mlflow here" in proc.stderr
    assert tensorboard_scalars(tmp_path / "run")["eval_return_mean"]  # the other one logged
    assert json.loads((tmp_path / "run" / "result.json").read_text())["steps"] == 1024


@pytest.mark.parametrize(
    ("node", "needle"),
    [
        ({"tensorbord": {}}, "Unknown tracker 'logger.tensorbord': rlsweep's trackers are"),
        ({"wandb": {"projet": "x"}}, "Unknown config key 'logger.wandb.projet'. Allowed keys"),
        ({"wandb": {"mode": "live"}}, "mode must be one of offline, online, disabled"),
        ("tensorboard", "'logger' must hold tracker settings"),
    ],
)
def test_tracker_settings_are_checked_with_what_is_allowed(node: Any, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        chosen({"logger": node})


def test_any_apps_tracker_settings_are_refused_before_anything_runs(tmp_path: Path) -> None:
    from test_any_app import run_app

    proc = run_app(
        ["x=1,2", "rlsweep/trackers=[wandb]", "hydra.launcher.trackers.wandb.mode=live"], tmp_path
    )
    assert proc.returncode != 0
    assert (
        "Invalid hydra.launcher.trackers.wandb: mode must be one of offline, online, disabled"
    ) in proc.stderr
    assert not (tmp_path / "multirun").exists()
