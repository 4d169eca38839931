"""The statistical report of any Hydra app's sweep: grouped by its swept keys.

Hand-checkable sweeps written here (job directories as rlsweep leaves them: result.json with
the job's identity under ``rlsweep``, metrics.csv, .hydra/, error.txt), then the test apps
(tests/apps) swept for real in subprocesses, side by side.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run_python

from rlsweep import stats
from rlsweep.identity import canonical_json
from rlsweep.report import files
from rlsweep.report.analysis import statistic_rng
from rlsweep.report.build import Report, write_report
from rlsweep.report.cli import main
from rlsweep.report.metrics import choose_metric
from rlsweep.report.read import read_runs
from rlsweep.report.runs import Run
from rlsweep.series import Series
from rlsweep.stats import bootstrap
from rlsweep.summary import summarize, summarize_at_end

APPS = Path(__file__).parent / "apps"
REPS = 200  # bootstrap resamples: enough to check, quick


def write_app_job(
    sweep: Path,
    config: dict[str, Any],
    values: dict[str, Any] | None = None,
    *,
    status: str = "completed",
    metrics: list[dict[str, float]] | None = None,
    agent_keys: tuple[str, ...] = (),
    replicate_key: str = "seed",
    overrides: dict[str, Any] | None = None,
    hydra_config: bool = True,
) -> Path:
    """A job directory of any app: its name and overrides from ``overrides`` (default: the
    whole ``config``); result.json (completed: ``values`` and the identity), error.txt
    (failed) or neither (incomplete); metrics.csv from ``metrics``."""
    overrides = dict(config if overrides is None else overrides)
    d = sweep / ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    (d / ".hydra").mkdir(parents=True)
    lines = [f"{k}={v}" for k, v in overrides.items()]
    (d / ".hydra" / "overrides.yaml").write_text(json.dumps(lines))  # JSON is YAML
    if hydra_config:
        (d / ".hydra" / "config.yaml").write_text(json.dumps(config))
    if metrics:
        columns = list(dict.fromkeys(k for row in metrics for k in row))
        text = [",".join(columns)] + [",".join(str(r.get(c, "")) for c in columns) for r in metrics]
        (d / "metrics.csv").write_text("\n".join(text) + "\n")
    if status == "completed":
        replicate = int(config.get(replicate_key, 0))
        identity = {
            "format": 1,
            "config": config,
            "replicate": replicate,
            "root": 0,
            "shared": {k: v for k, v in config.items() if k not in (replicate_key, *agent_keys)},
            "agent": {k: config[k] for k in agent_keys if k in config},
            "crn": True,
            "threads": 1,
        }
        digest = hashlib.sha256(canonical_json(identity).encode("ascii")).hexdigest()
        record = {**(values or {}), "rlsweep": {"identity": digest, "job": identity}}
        (d / "result.json").write_text(json.dumps(record))
    elif status == "failed":
        (d / "error.txt").write_text("Traceback (most recent call last):\nRuntimeError: boom\n")
    return d


# Two groups x three replicates, hand-checkable: a = 1, 2, 6 (mean 3, median 2);
# b = 10, 20, 30 (mean 20, median 20). With three runs the IQM trims nothing: the mean.
A_SCORES = (1.0, 2.0, 6.0)
B_SCORES = (10.0, 20.0, 30.0)


def two_groups(sweep: Path, *, metrics: bool = False) -> None:
    for algo, scores in (("a", A_SCORES), ("b", B_SCORES)):
        for seed, score in enumerate(scores):
            curve = [{"step": s, "score": score * s / 2} for s in (1, 2)] if metrics else None
            write_app_job(
                sweep,
                {"algo": algo, "lr": 0.1, "seed": seed},
                {"score": score, "note": "text is not a number"},
                overrides={"algo": algo, "seed": seed},
                metrics=curve,
                agent_keys=("algo",),
            )


def table_row(text: str, label: str) -> list[str]:
    """The cells after the first of the Markdown table row whose first cell is ``label``."""
    row = next(line for line in text.splitlines() if line.startswith(f"| {label} "))
    return [cell.strip() for cell in row.strip("|").split("|")][1:]


def _group(rep: Report, label: str) -> Any:
    (found,) = [g for g in rep.groups if g.group == label]
    return found


def test_groups_are_the_swept_keys_other_than_the_replicate(tmp_path: Path) -> None:
    two_groups(tmp_path)
    rep = write_report([tmp_path], reps=REPS)
    assert rep.sweep is not None
    assert rep.sweep.group_keys == ("algo",)  # lr is the same in every job: not swept
    assert rep.sweep.replicate_key == "seed"
    assert rep.metric.name == "score"  # the only number returned ("note" is text)
    assert [g.group for g in rep.groups] == ["algo=a", "algo=b"]
    a, b = _group(rep, "algo=a"), _group(rep, "algo=b")
    assert (a.completed, a.failed, a.mean, a.median, a.iqm) == (3, 0, 3.0, 2.0, 3.0)
    assert (b.completed, b.failed, b.mean, b.median, b.iqm) == (3, 0, 20.0, 20.0, 20.0)
    assert a.std == pytest.approx(np.std(A_SCORES, ddof=1))
    for g, scores in ((a, A_SCORES), (b, B_SCORES)):  # CIs within the runs' range
        for point, (low, high) in ((g.mean, g.mean_ci), (g.median, g.median_ci)):
            assert min(scores) <= low <= point <= high <= max(scores)
    # The same numbers, in report.md's table (n, failed, incomplete, missing, mean, ...).
    assert "Metric: `score`, the only number the task function returned." in rep.text
    assert table_row(rep.text, "algo=a")[:8] == ["3", "0", "0", "0", "3", "[1, 6]", "2", "[1, 6]"]
    assert table_row(rep.text, "algo=b")[4:10:2] == ["20", "20", "20"]  # mean, median, IQM
    # The report's data contract: one task for any app, named by the metric in its statistics.
    assert {(g.group, g.task) for g in rep.groups} == {("algo=a", ""), ("algo=b", "")}
    # Replicate r of a pairs with replicate r of b; only agent-side keys differ: shared seeds.
    (ab,) = rep.comparisons
    assert ab.paired and ab.n_pairs == 3
    assert ab.difference == pytest.approx(np.mean(np.subtract(A_SCORES, B_SCORES)))
    assert "| algo=a − algo=b | paired | 3 |" in rep.text and "| shared |" in rep.text
    (p,) = rep.improvements
    assert (p.x, p.y, p.point) == ("algo=a", "algo=b", 0.0)  # every b run beats every a run
    assert p.point == stats.probability_of_improvement(A_SCORES, B_SCORES)
    assert (tmp_path / files.IMPROVEMENT_PNG).is_file()


def test_report_is_byte_identical_and_seeded(tmp_path: Path) -> None:
    two_groups(tmp_path, metrics=True)
    first = write_report([tmp_path], reps=REPS)
    curves = (tmp_path / files.CURVES_PNG).read_bytes()
    second = write_report([tmp_path], reps=REPS)
    assert first.text == second.text == (tmp_path / "report.md").read_text()
    assert (tmp_path / files.CURVES_PNG).read_bytes() == curves
    # The CI is the seeded bootstrap of rlsweep.stats.bootstrap, keyed by the statistic's name.
    rng = statistic_rng(0, "cell", "algo=b", "score", "mean")
    expected = bootstrap.bootstrap_ci(np.array(B_SCORES), stats.mean, reps=REPS, seed=rng)
    assert _group(first, "algo=b").mean_ci == expected[1:]


def runs_with(returned: tuple[str, ...] = (), logged: tuple[str, ...] = ()) -> list[Run]:
    """One completed run that returned 1.0 under each name of ``returned`` and logged a series
    ending at 2.0 under each name of ``logged``."""
    steps = np.array([1.0, 2.0])
    series = {n: Series(n, "metrics.csv", steps, np.array([0.0, 2.0])) for n in logged}
    run = Run(Path("s"), Path("s/job"), "completed", "all", "", 0, 0, None, None,
              values=dict.fromkeys(returned, 1.0), series=series)  # fmt: skip
    return [run]


def test_the_metric_is_chosen_and_stated() -> None:
    assert choose_metric(runs_with(("x", "return"))).name == "return"
    loss = choose_metric(runs_with(("loss",)))
    assert (loss.name, loss.reason) == ("loss", "the only number the task function returned")
    metric = choose_metric(runs_with(("total", "resumed")))
    assert metric.name == "resumed"  # the first in sorted order
    assert metric.reason == "the first in sorted order of the 2 numbers the task function returned"
    assert choose_metric(runs_with(("a", "b")), "b").reason == "chosen with --metric"
    none = choose_metric(runs_with())
    assert (none.name, none.reason) == (None, "no completed job returned or logged a number")
    with pytest.raises(ValueError, match=r"--metric c: no job returned or logged a number by "
                       r"that name \(returned: a, b; no series logged\)"):  # fmt: skip
        choose_metric(runs_with(("a", "b")), "c")
    # Nothing returned: a logged evaluation return or reward, else any return or reward,
    # else the first series; --metric names a logged series as well as a returned number.
    logged = ("charts/loss", "eval/reward", "train/episode_return")
    assert choose_metric(runs_with((), logged)).name == "eval/reward"
    assert choose_metric(runs_with((), logged[::2])).name == "train/episode_return"
    assert choose_metric(runs_with((), ("b", "a"))).name == "a"
    assert choose_metric(runs_with(("score",), logged), "charts/loss").name == "charts/loss"
    assert runs_with(("score",), ("score",))[0].value("score") == 1.0  # returned first
    assert runs_with((), ("score",))[0].value("score") == 2.0  # else the series' last value


def test_metric_option_learning_curves_and_the_tidy_table(tmp_path: Path) -> None:
    import pandas as pd

    for lr, values in ((0.1, (1.0, 3.0)), (0.01, (5.0, 7.0))):
        for seed, value in enumerate(values):
            rows = [{"step": s, "loss": value * s, "acc": s / 10} for s in (10, 20, 30)]
            write_app_job(
                tmp_path,
                {"lr": lr, "seed": seed},
                {"loss": value, "acc": 0.5, "return": value / 10},
                metrics=rows,
            )
    default = write_report([tmp_path], reps=REPS)
    assert default.metric.name == "return"
    # No series named `return`: the curves of a series the jobs logged, and how to log it.
    assert "The jobs logged no series named `return`: these are the curves of `acc`" in (
        default.text
    )
    assert "`rlsweep.current().log(step, **{'return': value})`" in default.text  # valid Python
    assert (tmp_path / files.CURVES_PNG).exists()

    out = tmp_path / "out"
    assert main([str(tmp_path), "--metric", "loss", "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert (
        "Metric: `loss`, chosen with --metric; 2 other names the jobs returned or logged, "
        "listed under Metrics."
    ) in text
    assert "| lr=0.01 | 2 |" in text and "| lr=0.1  | 2 |" in text
    assert "![learning curves](report_learning_curves.png)" in text
    assert (out / files.CURVES_PNG).read_bytes()[:4] == b"\x89PNG"

    frame = pd.read_parquet(out / files.EVALUATIONS_PARQUET)
    assert list(frame.columns) == [
        "sweep", "job", "group", "status", "replicate", "lr", "step", "loss", "acc"
    ]  # fmt: skip
    assert len(frame) == 4 * 3  # one row per (job, metrics row)
    row = frame[(frame["lr"] == 0.01) & (frame["replicate"] == 1) & (frame["step"] == 20)]
    assert row["loss"].item() == 140.0 and row["job"].item() == "lr=0.01,seed=1"
    assert row["group"].item() == "lr=0.01" and row["status"].item() == "completed"
    assert str(frame["step"].dtype) == "int64" and str(frame["lr"].dtype) == "float64"
    from_csv = pd.read_csv(out / files.EVALUATIONS_CSV)
    assert list(from_csv.columns) == list(frame.columns)
    np.testing.assert_array_equal(from_csv["loss"], frame["loss"])


def test_failed_incomplete_and_missing_jobs_are_grouped_and_listed(tmp_path: Path) -> None:
    for x in (1, 2):
        for seed in range(3):
            config = {"x": x, "lr": 0.1, "seed": seed, "tag": "none"}
            if (x, seed) == (2, 0):  # failed, Hydra's composed config says where it belongs
                write_app_job(tmp_path, config, status="failed", overrides={"x": x, "seed": seed})
            elif (x, seed) == (2, 1):  # failed, only its overrides are left
                write_app_job(tmp_path, config, status="failed", hydra_config=False)
            elif (x, seed) == (1, 2):  # never started: missing from the grid
                continue
            elif (x, seed) == (2, 2):  # started, killed
                write_app_job(tmp_path, config, status="incomplete")
            else:  # the identity leaves the ignored key "tag" out
                write_app_job(
                    tmp_path, {k: v for k, v in config.items() if k != "tag"}, {"return": x + seed}
                )
    assert main([str(tmp_path), "--seed", "0"]) == 0  # dispatches to any app's report
    text = (tmp_path / "report.md").read_text()
    assert "5 jobs: 2 completed, 2 failed, 1 incomplete; 1 missing from the grid" in text
    assert "(2 groups x 3 replicates)" in text
    assert "swept keys `x`" in text  # not tag, not seed
    assert table_row(text, "x=1")[:5] == ["2", "0", "0", "1", "1.5"]  # returns 1 and 2
    assert table_row(text, "x=2")[:5] == ["0", "2", "1", "0", "–"]
    assert "- x=2, replicate 0: RuntimeError: boom (`seed=0,x=2`)" in text
    assert "- x=2, replicate 1: RuntimeError: boom (`lr=0.1,seed=1,tag=none,x=2`)" in text
    assert "Incomplete (started, no result.json" in text and "- x=2, replicate 2 (" in text
    assert "- x=1, replicate 2" in text.split("Missing (no job directory")[1]


def test_a_replicate_key_other_than_seed_is_found(tmp_path: Path) -> None:
    for opt in ("adam", "sgd"):
        for r in range(2):
            config = {"opt": opt, "rep": r, "seed": 123}  # seed: a constant, not swept
            write_app_job(tmp_path, config, {"acc": r + (opt == "sgd")}, replicate_key="rep")
    rep = write_report([tmp_path], reps=REPS)
    assert rep.sweep is not None and rep.sweep.replicate_key == "rep"
    assert [(g.group, g.completed, g.mean) for g in rep.groups] == [
        ("opt=adam", 2, 0.5),
        ("opt=sgd", 2, 1.5),
    ]
    explicit = write_report([tmp_path], reps=REPS, replicate_key="rep")
    assert explicit.text == rep.text
    out = tmp_path / "out"
    assert main([str(tmp_path), "--replicate-key", "rep", "--out", str(out)]) == 0
    assert "Replicates: the values of `rep`" in (out / "report.md").read_text()


def test_a_sweep_with_one_group_and_no_numbers(tmp_path: Path) -> None:
    import pandas as pd

    write_app_job(tmp_path, {"seed": 0}, {"message": "done"})
    write_app_job(tmp_path, {"seed": 1}, status="failed")
    rep = write_report([tmp_path], reps=REPS)
    assert rep.metric.name is None
    assert "No statistics: no completed job returned or logged a number." in rep.text
    assert [(g.group, g.completed, g.failed) for g in rep.groups] == [("all", 0, 1)]
    assert pd.read_parquet(rep.parquet).empty


def test_built_in_sweeps_keep_their_own_report(tmp_path: Path) -> None:
    d = tmp_path / "agent=ppo,seed=0"
    d.mkdir()
    (d / "result.json").write_text(
        json.dumps({"agent": "ppo", "env": "E", "replicate": 0, "final_return": 1.0})
    )
    assert read_runs([tmp_path]).built_in
    rep = write_report([tmp_path], reps=REPS)
    assert rep.sweep.built_in
    assert "## Final return per agent and environment" in rep.text
    with pytest.raises(ValueError, match="report of rlsweep's own agents is on their final"):
        write_report([tmp_path], reps=REPS, metric="steps")


def test_the_end_of_a_sweep_keeps_a_summary_whose_inputs_did_not_change(tmp_path: Path) -> None:
    """A resume that ran no job prints the same table and writes nothing; a result, a new
    job or a deleted report file each make the next end of the sweep write them again."""
    two_groups(tmp_path)
    first, again = io.StringIO(), io.StringIO()
    assert summarize_at_end(tmp_path, summarize, stream=first)
    written = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir() if p.is_file()}
    assert not summarize_at_end(tmp_path, summarize, stream=again)
    assert again.getvalue().startswith(first.getvalue())
    assert "| algo=b | 3    | 0      | 20   | 20  |" in again.getvalue()
    assert "No job ran and no result changed" in again.getvalue()
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir() if p.is_file()} == written

    write_app_job(tmp_path, {"algo": "b", "lr": 0.1, "seed": 3}, {"score": 40.0})
    out = io.StringIO()
    assert summarize_at_end(tmp_path, summarize, stream=out)  # a new job
    assert "| algo=b | 4    | 0      | 25   |" in out.getvalue()
    result = next(tmp_path.glob("algo=a,*seed=0")) / "result.json"
    record = json.loads(result.read_text())
    result.write_text(json.dumps({**record, "score": 100.0}))  # a job run again
    assert summarize_at_end(tmp_path, summarize, stream=io.StringIO())
    assert not summarize_at_end(tmp_path, summarize, stream=io.StringIO())
    (tmp_path / "report.md").unlink()
    assert summarize_at_end(tmp_path, summarize, stream=io.StringIO())
    assert (tmp_path / "report.md").is_file()

    # The sweep's own record, which every run of the command writes again: by its contents.
    record = tmp_path / "sweep.json"
    record.write_text(json.dumps({"format": 1, "replicate_key": "seed"}))
    assert summarize_at_end(tmp_path, summarize, stream=io.StringIO())
    written_at = record.stat().st_mtime_ns
    record.write_text(json.dumps({"format": 1, "replicate_key": "seed"}))
    os.utime(record, ns=(written_at, written_at + 10**9))  # the same contents, a second later
    assert not summarize_at_end(tmp_path, summarize, stream=io.StringIO())
    # The app's own log files (here TorchRL's CSVLogger's), which the report reads too.
    scalars = next(tmp_path.glob("algo=a,*seed=1")) / "logs" / "scalars" / "eval"
    scalars.mkdir(parents=True)
    (scalars / "reward.csv").write_text("100,1.5\n")
    assert summarize_at_end(tmp_path, summarize, stream=io.StringIO())
    assert not summarize_at_end(tmp_path, summarize, stream=io.StringIO())
    # A wide CSV log (Lightning's CSVLogger's): one written, then one more row.
    version = next(tmp_path.glob("algo=a,*seed=1")) / "lightning_logs" / "version_0"
    version.mkdir(parents=True)
    (version / "metrics.csv").write_text("epoch,step,val/acc\n0,10,0.5\n")
    assert summarize_at_end(tmp_path, summarize, stream=io.StringIO())
    assert not summarize_at_end(tmp_path, summarize, stream=io.StringIO())
    with (version / "metrics.csv").open("a") as f:
        f.write("1,20,0.75\n")
    assert summarize_at_end(tmp_path, summarize, stream=io.StringIO())
    with (scalars / "reward.csv").open("a") as f:
        f.write("200,2.5\n")  # a row the app flushed late
    assert summarize_at_end(tmp_path, summarize, stream=io.StringIO())


def test_printed_paths_are_relative_to_the_working_directory_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every path the end of a sweep and ``python -m rlsweep.report`` print the same way:
    relative to the working directory when the sweep is under it (as the README shows),
    else absolute; a summary kept from a run in another directory is printed with that
    directory's paths."""
    sweep = tmp_path / "multirun" / "app"
    two_groups(sweep)
    monkeypatch.chdir(tmp_path)
    here = io.StringIO()
    assert summarize_at_end(Path("multirun/app"), summarize, stream=here)
    for line in ("Summary: multirun/app/summary.md", "Report:  multirun/app/report.md"):
        assert line in here.getvalue(), here.getvalue()
    assert "Report page: multirun/app/report.html" in here.getvalue()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    there = io.StringIO()
    summarize_at_end(sweep, summarize, stream=there)
    assert f"Summary: {sweep / 'summary.md'}" in there.getvalue(), there.getvalue()
    assert f"Report:  {sweep / 'report.md'}" in there.getvalue()
    capsys.readouterr()
    assert main([str(sweep)]) == 0  # given absolute, from elsewhere: absolute
    assert f"Report: {sweep / 'report.md'}\n" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert main([str(sweep)]) == 0  # given absolute, under the working directory
    printed = capsys.readouterr().out
    assert "Report: multirun/app/report.md\n" in printed, printed
    assert "Report page: multirun/app/report.html\n" in printed
    assert "Tidy table: multirun/app/evaluations.parquet and evaluations.csv" in printed
    assert "Plot: multirun/app/report_performance_profiles.png" in printed


def test_summarize_writes_the_report_and_a_grouped_table(tmp_path: Path) -> None:
    two_groups(tmp_path)
    write_app_job(tmp_path, {"algo": "b", "lr": 0.1, "seed": 3}, status="failed")
    out = io.StringIO()
    summarize(tmp_path, stream=out)
    printed = out.getvalue()
    assert "| group  | done | failed | mean | IQM | IQM 95% CI |" in printed
    assert "| algo=a | 3    | 0      | 3    | 3   |" in printed
    assert "| algo=b | 3    | 1      | 20   | 20  |" in printed
    assert f"Report:  {tmp_path.resolve() / 'report.md'}" in printed
    assert (tmp_path / "report.md").is_file() and (tmp_path / "evaluations.parquet").is_file()
    with (tmp_path / "summary.csv").open() as f:  # still one row per job
        rows = list(csv.DictReader(f))
    assert len(rows) == 7
    assert list(rows[0])[:2] == ["job", "status"] and "algo" in rows[0] and "score" in rows[0]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["metric"] == "score"
    assert [(g["group"], g["completed"], g["failed"]) for g in summary["groups"]] == [
        ("algo=a", 3, 0),
        ("algo=b", 3, 1),
    ]


# ============================================================================================
# The test apps, swept for real (serially, the three sweeps side by side)


def sweep_app(app: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    cwd.mkdir()
    command = [str(APPS / app / "app.py"), "-m", *args, "hydra.launcher.executor=serial"]
    return run_python(command, cwd)


def test_report_of_the_test_apps_sweeps(tmp_path: Path) -> None:
    import pandas as pd

    sweeps = {
        "plain": ["x=1,2", "seed=range(3)", "fail_x=2"],
        "api": ["algo=a,b", "seed=range(2)"],
        "loop": ["seed=range(2)", "steps=3", "sleep_s=0"],
    }
    with ThreadPoolExecutor(3) as pool:
        futures = {
            name: pool.submit(sweep_app, name, args, tmp_path / name)
            for name, args in sweeps.items()
        }
        done = {name: f.result() for name, f in futures.items()}
    sweep = {name: tmp_path / name / "multirun" / "app" for name in sweeps}

    # The plain app (imports nothing from rlsweep), with failed jobs: the sweep's end wrote
    # the report and printed the grouped table; the summary keeps one row per job.
    plain = done["plain"]
    assert plain.returncode != 0 and "3 of 6 jobs failed" in plain.stderr
    assert (
        "| x=1   | 3    | 0      |" in plain.stdout and "| x=2   | 0    | 3      |" in plain.stdout
    )
    assert "Report:  " in plain.stdout
    text = (sweep["plain"] / "report.md").read_text()
    assert "Metric: `score`, the only number the task function returned." in text
    with (sweep["plain"] / "summary.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 6
    # python -m rlsweep.report no longer crashes on it, and writes the same report.
    assert main([str(sweep["plain"])]) == 0
    assert (sweep["plain"] / "report.md").read_text() == text

    # The API app: groups by algo; only agent-side keys differ, so pairs share their seeds.
    api = done["api"]
    assert api.returncode == 0, api.stderr[-3000:]
    rep = write_report([sweep["api"]], reps=REPS)
    assert not rep.sweep.built_in
    assert [(g.group, g.completed, g.mean) for g in rep.groups] == [
        ("algo=a", 2, pytest.approx(0.15)),  # score = lr * (replicate + 1)
        ("algo=b", 2, pytest.approx(0.15)),
    ]
    assert "| algo=a − algo=b | paired | 2 |" in rep.text and "| shared |" in rep.text
    frame = pd.read_parquet(rep.parquet)
    assert list(frame.columns) == [
        "sweep", "job", "group", "status", "replicate", "algo", "step", "value"
    ]  # fmt: skip
    assert len(frame) == 4 * 2 and set(frame["step"]) == {1, 2}

    # The loop app returns two numbers and logs one per step: --metric picks the logged one.
    loop = done["loop"]
    assert loop.returncode == 0, loop.stderr[-3000:]
    assert "Metric: resumed, the first in sorted order" in loop.stdout
    rep = write_report([sweep["loop"]], reps=REPS, metric="total")
    assert not rep.sweep.built_in
    assert [(g.group, g.completed) for g in rep.groups] == [("all", 2)]
    assert sweep["loop"] / files.CURVES_PNG in rep.plots
    frame = pd.read_parquet(rep.parquet)
    assert len(frame) == 2 * 3 and list(frame.columns)[-2:] == ["step", "total"]
