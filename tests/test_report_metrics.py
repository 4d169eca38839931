"""What an app's report and summary are on, for apps as they are (issue 30): the metric from a
returned number or a logged series, one refusal of a metric no job has, the replicate key the
jobs or the sweep recorded, and the summary's words for a task that returns nothing, for
replicates that all gave one value and for the opt-in ``rlsweep=...``.

Job directories are written by hand as rlsweep leaves them (tests/test_report_any_app.py).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_python
from test_report_any_app import APPS, table_row, write_app_job

from rlsweep.identity import canonical_json
from rlsweep.report import files
from rlsweep.report.build import write_report
from rlsweep.report.cli import main
from rlsweep.summary import summarize

REPS = 200


def record_keys(job: Path, keys: dict[str, Any], replicate: int) -> None:
    """Add ``rlsweep.keys`` (the replicate and root keys the job ran with) to its result,
    and the replicate index its identity recorded."""
    path = job / "result.json"
    record = json.loads(path.read_text())
    record["rlsweep"]["keys"] = keys
    record["rlsweep"]["job"]["replicate"] = replicate
    digest = hashlib.sha256(canonical_json(record["rlsweep"]["job"]).encode("ascii"))
    record["rlsweep"]["identity"] = digest.hexdigest()  # the record of the identity now
    path.write_text(json.dumps(record))


def logged_only(sweep: Path, *, same: bool = False) -> None:
    """Two learning rates x three seeds; the app returns nothing and logs `eval/reward` and
    `train/loss` (the last reward: lr * 10 + seed, or lr * 10 for every seed if ``same``)."""
    for lr in (0.1, 0.2):
        for seed in range(3):
            last = lr * 10 + (0 if same else seed)
            rows = [{"step": s, "eval/reward": last * s / 3, "train/loss": 1.0 / s}
                    for s in (1, 2, 3)]  # fmt: skip
            write_app_job(sweep, {"lr": lr, "seed": seed}, None, metrics=rows)


def test_a_task_that_returns_nothing_is_reported_on_what_it_logged(tmp_path: Path) -> None:
    logged_only(tmp_path)
    out = io.StringIO()
    summarize(tmp_path, stream=out)
    text = (tmp_path / "report.md").read_text()
    assert (
        "Metric: `eval/reward`, the last value of a series the jobs logged, ranked first by "
        "the default rule for a task that returns no number: a return or reward, of an "
        "evaluation; 1 other name the jobs returned or logged, listed under Metrics."
    ) in text
    assert "`hydra.sweeper.metric=NAME`" in text
    assert (
        "- logged (2, a series: a job's value is its last): `eval/reward` (the metric), "
        "`train/loss`\n" in text
    )  # every name once, under Metrics
    assert table_row(text, "lr=0.1")[:5] == ["3", "0", "0", "0", "2"]  # 1, 2, 3
    assert table_row(text, "lr=0.2")[4] == "3"  # 2, 3, 4
    assert "![learning curves](report_learning_curves.png)" in text
    assert "IQM of `eval/reward` over completed runs" in text
    printed = out.getvalue()
    assert "Metric: eval/reward, the last value of a series the jobs logged" in printed
    assert "; 1 other name the jobs returned or logged, listed in report.md\n" in printed
    assert "| lr=0.1 | 3    | 0      | 2    |" in printed
    # Another logged series by name, from the command line as at the sweep's end.
    assert main([str(tmp_path), "--metric", "train/loss", "--out", str(tmp_path / "loss")]) == 0
    loss = (tmp_path / "loss" / "report.md").read_text()
    assert table_row(loss, "lr=0.1")[4] == "0.3333"  # the last value: 1 / 3


def test_curves_never_depend_on_a_series_named_like_the_returned_value(tmp_path: Path) -> None:
    for seed in range(2):
        rows = [{"step": s, "eval/return": s * (seed + 1)} for s in (10, 20)]
        write_app_job(tmp_path, {"seed": seed}, {"score": float(seed)}, metrics=rows)
    rep = write_report([tmp_path], reps=REPS)
    assert rep.metric.name == "score"
    assert tmp_path / files.CURVES_PNG in rep.plots
    assert "The jobs logged no series named `score`: these are the curves of `eval/return`" in (
        rep.text
    )


@pytest.mark.parametrize("returned", [True, False])
def test_a_metric_no_job_has_is_refused_the_same_way(
    tmp_path: Path, returned: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2, listing what the jobs returned and logged (a sweep that returned nothing
    exited 0 with an empty report before)."""
    for seed in range(2):
        rows = [{"step": 1, "eval/reward": 1.0}]
        write_app_job(tmp_path, {"seed": seed}, {"score": 1.0} if returned else None, metrics=rows)
    assert main([str(tmp_path), "--metric", "acc"]) == 2
    err = capsys.readouterr().err
    assert "--metric acc: no job returned or logged a number by that name" in err
    assert ("returned: score" if returned else "no number returned") in err
    assert "logged: eval/reward" in err
    assert not (tmp_path / "report.md").exists()


def test_a_task_that_returns_and_logs_nothing_is_completed_returned_nothing(
    tmp_path: Path,
) -> None:
    for seed in range(2):
        write_app_job(tmp_path, {"x": 1, "seed": seed}, None)
    out = io.StringIO()
    summarize(tmp_path, stream=out)
    printed, summary = out.getvalue(), (tmp_path / "summary.md").read_text()
    for text in (printed, summary):
        assert "2 completed, returned nothing" in text
        assert "done" not in text and "`None`" not in text
    assert 'return {"score": score}' in summary  # a hint that is valid Python
    record = json.loads((tmp_path / "summary.json").read_text())
    assert record["metric"] is None and record["groups"] == []


def test_replicates_that_all_gave_one_value_are_flagged(tmp_path: Path) -> None:
    logged_only(tmp_path, same=True)
    out = io.StringIO()
    summarize(tmp_path, stream=out)
    warning = "every replicate of 2 group(s) gave the same `eval/reward`"
    assert warning in out.getvalue() and warning in (tmp_path / "summary.md").read_text()
    assert "lr=0.1: 3 x 1" in out.getvalue() and "does the app ignore `seed`?" in out.getvalue()
    record = json.loads((tmp_path / "summary.json").read_text())
    assert record["identical_replicates"] == ["lr=0.1", "lr=0.2"]


def test_the_replicate_key_the_jobs_recorded_is_used(tmp_path: Path) -> None:
    """env.seed, recorded in each result.json; the sweep's seed is a hyperparameter here."""
    for opt in ("adam", "sgd"):
        for r in range(2):
            config = {"opt": opt, "env": {"seed": r}}
            job = write_app_job(
                tmp_path, config, {"acc": r + (opt == "sgd")}, overrides={"opt": opt, "r": r}
            )
            record_keys(job, {"replicate": "env.seed", "root": None}, r)
    rep = write_report([tmp_path], reps=REPS)
    assert rep.sweep.replicate_key == "env.seed" and rep.sweep.group_keys == ("opt",)
    assert [(g.group, g.completed) for g in rep.groups] == [("opt=adam", 2), ("opt=sgd", 2)]
    assert "Replicates: the values of `env.seed` (the replicate key the sweep recorded)." in (
        rep.text
    )


def test_the_sweeps_record_names_its_replicate_key_or_none(tmp_path: Path) -> None:
    for seed in range(3):
        write_app_job(tmp_path, {"lr": 0.1, "seed": seed}, {"acc": float(seed)})
    (tmp_path / "sweep.json").write_text(json.dumps({"replicate_key": None, "root_key": None}))
    rep = write_report([tmp_path], reps=REPS)
    assert rep.sweep.replicate_key is None and rep.sweep.group_keys == ("seed",)
    assert [g.group for g in rep.groups] == ["seed=0", "seed=1", "seed=2"]
    assert "Replicates: none (the sweep has no replicate key): every job is a group" in rep.text
    assert rep.comparisons == () and rep.improvements == ()  # nothing pairwise of single runs
    record = {"replicate_key": "seed", "constant": {"lr": "0.1", "rlsweep": "joblib"}}
    (tmp_path / "sweep.json").write_text(json.dumps(record))
    rep = write_report([tmp_path], reps=REPS)
    assert [g.group for g in rep.groups] == ["all"]
    assert "Every job was run with `lr=0.1` (the sweep's sweep.json)." in rep.text


def test_the_opt_in_is_never_a_setting_of_a_job(tmp_path: Path) -> None:
    for x in (2, 10):
        for seed in range(2):
            overrides = {"+rlsweep": "joblib", "x": x, "seed": seed}
            write_app_job(tmp_path, {"x": x, "seed": seed}, {"score": x + seed},
                          overrides=overrides, hydra_config=False)  # fmt: skip
    summarize(tmp_path, echo=False)
    with (tmp_path / "summary.csv").open() as f:
        header = next(csv.reader(f))
    assert header == ["job", "status", "x", "seed", "score"]
    rep = write_report([tmp_path], reps=REPS)
    assert rep.sweep.group_keys == ("x",)
    assert [g.group for g in rep.groups] == ["x=2", "x=10"]  # numbers sort as numbers


def test_a_grid_of_many_groups_prints_its_best(tmp_path: Path) -> None:
    for x in range(60):
        write_app_job(tmp_path, {"x": x, "seed": 0}, {"score": float(x % 17)})
    out = io.StringIO()
    summarize(tmp_path, stream=out)
    printed = out.getvalue()
    assert (
        f"(The 10 groups of highest IQM, of 60: every group is in {tmp_path / 'summary.md'}.)"
        in (printed)
    )
    assert printed.count("| x=") == 10 and "| x=16 " in printed and "| x=0 " not in printed
    summary = (tmp_path / "summary.md").read_text()
    assert summary.count("| x=") == 60 and summary.count("| seed=0,x=") == 60  # groups, jobs


def test_the_sweepers_metric_setting_chooses_the_reports_metric(tmp_path: Path) -> None:
    """hydra.sweeper.metric at the sweep's end; a name no job has is refused by name."""
    command = [str(APPS / "loop" / "app.py"), "-m", "seed=range(2)", "steps=3", "sleep_s=0",
               "hydra.launcher.executor=serial"]  # fmt: skip
    chosen = run_python([*command, "hydra.sweeper.metric=total"], tmp_path)
    assert chosen.returncode == 0, chosen.stderr[-3000:]
    assert "Metric: total, chosen with hydra.sweeper.metric" in chosen.stdout
    text = (tmp_path / "multirun" / "app" / "report.md").read_text()
    assert (
        "Metric: `total`, chosen with hydra.sweeper.metric; 1 other name the jobs returned or "
        "logged, listed under Metrics."
    ) in text
    assert (
        "- returned (2, a number in `result.json`): `resumed`, `total` (the metric; also "
        "logged)\n\n## Data"  # every name once: `total` both returned and logged
    ) in text
    refused = run_python([*command, "hydra.sweeper.metric=nope"], tmp_path)
    assert (
        "The report could not be written (ValueError: hydra.sweeper.metric nope: no job "
        "returned or logged a number by that name (returned: resumed, total; logged: total))"
    ) in refused.stdout


def write_app_logs(job: Path, writer: str, rewards: list[float]) -> None:
    """The app's own logs of ``eval/reward`` (steps 100, 200, ...) and ``train/loss``, as
    torch's SummaryWriter or TorchRL's CSVLogger write them."""
    if writer == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter

        with SummaryWriter(log_dir=str(job / "logs")) as w:
            for i, reward in enumerate(rewards, start=1):
                w.add_scalar("eval/reward", reward, 100 * i)
                w.add_scalar("train/loss", 1.0 / i, 100 * i)
    else:
        from torchrl.record.loggers.csv import CSVLogger

        logger = CSVLogger(exp_name="run", log_dir=str(job / "csv"))
        for i, reward in enumerate(rewards, start=1):
            logger.log_scalar("eval/reward", reward, step=100 * i)
            logger.log_scalar("train/loss", 1.0 / i, step=100 * i)


@pytest.mark.parametrize("writer", ["tensorboard", "torchrl_csv"])
def test_an_apps_own_logs_give_the_metric_and_the_curves(tmp_path: Path, writer: str) -> None:
    """A task that returns nothing and never calls rlsweep: the report is on the evaluation
    reward it logged itself, its curves those logs."""
    import pandas as pd

    for lr in (0.1, 0.2):
        for seed in range(2):
            job = write_app_job(tmp_path, {"lr": lr, "seed": seed}, None)
            write_app_logs(job, writer, [lr * 10 * k + seed for k in (1, 2, 3)])
    rep = write_report([tmp_path], reps=REPS)
    assert rep.metric.name == "eval/reward" and "train/loss" in rep.metric.logged
    assert [(g.group, g.completed, g.mean) for g in rep.groups] == [
        ("lr=0.1", 2, pytest.approx(3.5)),  # last rewards 3 and 4
        ("lr=0.2", 2, pytest.approx(6.5)),
    ]
    assert tmp_path / files.CURVES_PNG in rep.plots
    assert "IQM of `eval/reward` over completed runs against the step it was logged at" in (
        rep.text
    )
    frame = pd.read_parquet(rep.parquet)
    assert list(frame.columns)[-3:] == ["step", "eval/reward", "train/loss"]
    assert len(frame) == 4 * 3 and sorted(set(frame["step"])) == [100, 200, 300]
