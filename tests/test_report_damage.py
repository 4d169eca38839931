"""The report trusts only what it verified (issue 57, item 4): damage on disk never becomes
numbers.

One real sweep of tests/apps/plain (``x=1,2,3`` x ``seed=0,1``, run once per module in a
subprocess, each job given a real TensorBoard event file by torch's ``SummaryWriter``) is
copied per test, damaged as a tester did, and reported: a result.json that is not rlsweep's
record of its job is flagged and not counted, a deleted job directory is missing from the
grid sweep.json recorded, a damaged result.json is named and skipped, a damaged or cut event
file is named with the last step read; and a config interpolation planted in a job's files
is never resolved into the report.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import NO_REPORT, run_python

from rlsweep.identity import Keys, identity_of
from rlsweep.report.build import Report, write_report
from rlsweep.report.cli import main
from rlsweep.report.html import markdown_tables
from rlsweep.series.event_proto import decode_event
from rlsweep.series.tfrecord import framed
from rlsweep.store import write_record
from rlsweep.summary import summarize

APP = Path(__file__).parent / "apps" / "plain" / "app.py"
REPS = 50  # bootstrap resamples: the tests read counts and means, not intervals
STEPS = (0, 100, 200, 300, 400, 500)  # the steps each job's event file logs
JOBS = [f"x={x},seed={s}" for x in (1, 2, 3) for s in (0, 1)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sweep, run once: six completed jobs, each with an event file of ``eval/reward``
    (x * step) at STEPS."""
    root = tmp_path_factory.mktemp("sweep")
    done = run_python([str(APP), "-m", "x=1,2,3", "seed=0,1", "rlsweep=serial", NO_REPORT], root)
    assert done.returncode == 0, done.stderr[-3000:]
    sweep = root / "multirun" / "app"
    from torch.utils.tensorboard import SummaryWriter

    for name in JOBS:
        x = int(name.split(",")[0].split("=")[1])
        writer = SummaryWriter(str(sweep / name / "tb"))
        for step in STEPS:
            writer.add_scalar("eval/reward", float(x * step), step)
        writer.close()
    return sweep


@pytest.fixture
def sweep(built: Path, tmp_path: Path) -> Path:
    """A fresh copy of the sweep, to damage."""
    return Path(shutil.copytree(built, tmp_path / "sweep"))


def report(sweep: Path, metric: str = "score") -> Report:
    return write_report([sweep], reps=REPS, metric=metric)


def scores(sweep: Path) -> dict[str, float]:
    return {n: json.loads((sweep / n / "result.json").read_text())["score"] for n in JOBS}


def group_row(text: str, group: str) -> list[str]:
    """The row of ``group`` in report.md's table of groups."""
    (table,) = [t for t in markdown_tables(text) if t[0][:2] == ["group", "n"]]
    (row,) = [r for r in table[1:] if r[0] == group]
    return row


def test_a_result_that_is_not_the_jobs_record_is_flagged_and_not_counted(sweep: Path) -> None:
    """``{"score": 1e9}`` (no record), another job's valid record copied over, and a record
    whose identity no longer matches its SHA-256: each listed as unverified, none counted."""
    true = scores(sweep)
    (sweep / "x=1,seed=0" / "result.json").write_text(json.dumps({"score": 1e9}))
    shutil.copy(sweep / "x=2,seed=0" / "result.json", sweep / "x=3,seed=0" / "result.json")
    path = sweep / "x=2,seed=1" / "result.json"
    record = json.loads(path.read_text())
    record["rlsweep"]["job"]["config"]["lr"] = 0.5  # its digest still says 0.1
    path.write_text(json.dumps(record))

    rep = report(sweep)
    assert (
        rep.text.count(
            "6 jobs: 3 completed, 0 failed, 0 incomplete, 3 whose result.json is "
            "not counted (0 damaged, 3 unverified"
        )
        == 1
    )
    assert "1e+09" not in rep.text and "1000000000" not in rep.text
    # x=1: its replicate 1 alone; x=3: replicate 1 alone (x=2,seed=0's numbers not taken).
    assert float(group_row(rep.text, "x=1")[5]) == pytest.approx(true["x=1,seed=1"], rel=1e-3)
    assert group_row(rep.text, "x=1")[1] == "1"
    assert float(group_row(rep.text, "x=3")[5]) == pytest.approx(true["x=3,seed=1"], rel=1e-3)
    assert "- `x=1,seed=0/result.json`: unverified: no rlsweep record" in rep.text
    assert (
        "- `x=3,seed=0/result.json`: unverified: its recorded identity is another job's "
        "(x: 2 recorded, 3 in .hydra/config.yaml)\n" in rep.text
    )
    assert (
        "- `x=2,seed=1/result.json`: unverified: its recorded identity does not match its "
        "SHA-256" in rep.text
    )
    summarize(sweep, echo=False)
    summary = (sweep / "summary.md").read_text()
    assert "3 not counted, their result.json damaged or unverified" in summary
    assert f"x=1,seed=0 (unverified: {sweep.resolve() / 'x=1,seed=0' / 'result.json'}" in summary
    assert "1000000000" not in summary and "1e+09" not in summary


def test_a_deleted_job_directory_is_missing_from_the_grid(sweep: Path) -> None:
    """sweep.json records the grid: a deleted job, and a whole deleted group (which no
    inference from the directories left could see), are missing."""
    assert json.loads((sweep / "sweep.json").read_text())["jobs"] == sorted(JOBS)
    shutil.rmtree(sweep / "x=1,seed=1")
    rep = report(sweep)
    assert "5 jobs: 5 completed, 0 failed, 0 incomplete; 1 missing from the grid" in rep.text
    assert "no job directory: deleted, or never started):\n\n- `x=1,seed=1`\n" in rep.text
    assert group_row(rep.text, "x=1")[4] == "1"  # its group's missing count

    shutil.rmtree(sweep / "x=3,seed=0")
    shutil.rmtree(sweep / "x=3,seed=1")
    rep = report(sweep)
    assert "3 jobs: 3 completed, 0 failed, 0 incomplete; 3 missing from the grid" in rep.text
    assert "- `x=1,seed=1`\n- `x=3,seed=0`\n- `x=3,seed=1`\n" in rep.text
    summarize(sweep, echo=False)
    assert (
        "3 of the grid recorded in sweep.json have no job directory: x=1,seed=1; x=3,seed=0; "
        "x=3,seed=1." in (sweep / "summary.md").read_text()
    )


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (b'{"score": 1.0, "rlsw', "not readable as JSON (JSONDecodeError: Unterminated string"),
        (b'{"score": 1.0, "\xff\xfe": 2}', "not readable as JSON (UnicodeDecodeError: 'utf-8'"),
        (b"[1, 2, 3]", "JSON, but a list, not an object"),
    ],
    ids=["cut", "not-utf-8", "a-list"],
)
def test_a_damaged_result_json_is_named_and_skipped(
    sweep: Path, damage: bytes, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    true = scores(sweep)
    (sweep / "x=2,seed=0" / "result.json").write_bytes(damage)
    assert main([str(sweep), "--metric", "score"]) == 0  # the report never stops on it
    text = (sweep / "report.md").read_text()
    assert (
        "6 jobs: 5 completed, 0 failed, 0 incomplete, 1 whose result.json is not counted "
        "(1 damaged, 0 unverified" in text
    )
    assert f"- `x=2,seed=0/result.json`: damaged: {said}" in text
    assert group_row(text, "x=2")[1] == "1"
    assert float(group_row(text, "x=2")[5]) == pytest.approx(true["x=2,seed=1"], rel=1e-3)
    summarize(sweep, echo=False)
    assert "x=2,seed=0 (damaged: " in (sweep / "summary.md").read_text()


def event_file(job: Path) -> Path:
    (path,) = (job / "tb").glob("events.out.tfevents.*")
    return path


def record_of_step(data: bytes, step: int) -> tuple[int, int]:
    """The (start, stop) of the data of the event file's record logged at ``step``."""
    for start, stop in framed(data):
        event = decode_event(data, start, stop)
        if event.scalars and event.step == step:
            return start, stop
    raise AssertionError(f"no record at step {step}")


def test_flipped_bytes_in_an_event_file_are_reported_with_the_file_and_step(
    sweep: Path,
) -> None:
    """Twenty bytes flipped in the record of step 400: its series ends at 300, and the
    report says which file, after which step, and what it kept."""
    path = event_file(sweep / "x=2,seed=1")
    data = bytearray(path.read_bytes())
    start, stop = record_of_step(bytes(data), 400)
    for i in range(start, min(stop, start + 20)):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    rep = report(sweep, metric="eval/reward")
    source = path.relative_to(sweep / "x=2,seed=1").as_posix()
    (run,) = [r for r in rep.runs if r.job == "x=2,seed=1"]
    assert run.series["eval/reward"].last == 600.0  # x * 300
    assert (
        f"- `x=2,seed=1`: `{source}`: damaged (a record fails its checksum) after step 300: "
        "read up to step 300 (" in rep.text
    )
    assert "records kept), the rest of the file not read" in rep.text
    summarize(sweep, echo=False, metric="eval/reward")
    summary = (sweep / "summary.md").read_text()
    assert (
        f"1 log file(s) cut or damaged, read up to their last whole record: x=2,seed=1: `{source}`"
        in summary
    )


def test_an_event_file_cut_mid_record_is_reported(sweep: Path) -> None:
    path = event_file(sweep / "x=3,seed=0")
    data = path.read_bytes()
    _, stop = record_of_step(data, 500)
    path.write_bytes(data[: stop - 3])  # the last record cut three bytes short of its data
    rep = report(sweep, metric="eval/reward")
    (run,) = [r for r in rep.runs if r.job == "x=3,seed=0"]
    assert run.series["eval/reward"].last == 1200.0  # x * 400
    source = path.relative_to(sweep / "x=3,seed=0").as_posix()
    assert (
        f"- `x=3,seed=0`: `{source}`: cut mid-record (a write cut short) after step 400: read "
        "up to step 400 (" in rep.text
    )


SECRET = "s3cr3t-token-of-the-reader"


def built_in_job(sweep: Path, agent: str, replicate: int, *, completed: bool = True) -> Path:
    """A job of rlsweep's own agents as rlsweep.job leaves it, its result a real record."""
    config: dict[str, Any] = {
        "agent": {"name": agent, "learning_rate": 0.001},
        "env": {"id": "E", "random_score": 0.0, "reference_score": 100.0},
        "seed": replicate,
        "train": {"total_steps": 1000},
    }
    d = sweep / f"agent={agent},seed={replicate}"
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
    if completed:
        values = {
            "agent": agent,
            "env": "E",
            "replicate": replicate,
            "final_return": 10.0 + replicate,
            "config": config,
        }
        write_record(d, values, identity_of(config, Keys()))
    else:
        (d / "error.txt").write_text("Traceback (most recent call last):\nRuntimeError: x\n")
    return d


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MY_SECRET_TOKEN", SECRET)
    yield


def plant(job: Path, old: str, new: str) -> None:
    path = job / ".hydra" / "config.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def written(sweep: Path) -> list[tuple[str, str]]:
    """Every file the report and the summary wrote, as text (the Parquet file's values)."""
    out = []
    for name in (
        "report.md",
        "report.html",
        "evaluations.csv",
        "summary.md",
        "summary.csv",
        "summary.json",
    ):
        out.append((name, (sweep / name).read_text()))
    table = pq.read_table(sweep / "evaluations.parquet")
    out.append(("evaluations.parquet", json.dumps(table.to_pylist(), default=str)))
    return out


def test_an_interpolation_planted_in_a_jobs_config_never_reaches_the_report(
    tmp_path: Path, planted: None
) -> None:
    """``${oc.env:MY_SECRET_TOKEN}`` in a completed job's agent settings and in a failed
    job's agent name: read as written (unknown), never resolved with the reader's env."""
    for replicate in range(3):
        built_in_job(tmp_path, "ppo", replicate)
    plant(
        built_in_job(tmp_path, "dqn", 0),
        '"learning_rate": 0.001',
        '"learning_rate": "${oc.env:MY_SECRET_TOKEN}"',
    )
    built_in_job(tmp_path, "dqn", 1)
    plant(
        built_in_job(tmp_path, "a2c", 0, completed=False),
        '"name": "a2c"',
        '"name": "${oc.env:MY_SECRET_TOKEN}"',
    )
    rep = write_report([tmp_path], reps=REPS)
    summarize(tmp_path, echo=False)
    assert rep.sweep.built_in
    for name, text in written(tmp_path):
        assert SECRET not in text, name
    assert "${oc.env:MY_SECRET_TOKEN}" in rep.text  # shown as written: unknown
    # The completed job counts: its result is its record (the interpolation not compared).
    assert [(g.group, g.completed) for g in rep.groups if g.group.startswith("dqn")] == [
        ('dqn[learning_rate="${oc.env:MY_SECRET_TOKEN}"]', 1),
        ("dqn[learning_rate=0.001]", 1),
    ]


def test_a_value_with_a_newline_or_a_bar_keeps_the_tables_whole(tmp_path: Path) -> None:
    for algo, name in (("a\nb", "ab"), ("c|d", "cd")):
        for seed in range(2):
            config = {"algo": algo, "seed": seed}
            d = tmp_path / f"algo={name},seed={seed}"
            (d / ".hydra").mkdir(parents=True)
            (d / ".hydra" / "config.yaml").write_text(json.dumps(config))
            write_record(d, {"score": float(seed)}, identity_of(config, Keys()))
    rep = report(tmp_path)
    lines = rep.text.splitlines()
    # Every line of a table is a whole row: no line starts inside one.
    assert not [line for line in lines if line.startswith(("b,", "b ", "d,", "d "))]
    (table,) = [t for t in markdown_tables(rep.text) if t[0][:2] == ["group", "n"]]
    # Escaped in report.md (`\\|`); the cell, as the page reads it, holds the bar.
    assert [row[0] for row in table[1:]] == ["algo=a\\nb", "algo=c|d"]
    assert "| algo=c\\|d " in rep.text
    assert all(len(row) == len(table[0]) for row in table)


def test_a_valid_sweep_says_nothing_new(sweep: Path) -> None:
    """Every record verified, every event file whole: nothing flagged."""
    rep = report(sweep)
    assert "6 jobs: 6 completed, 0 failed, 0 incomplete; 0 missing from the grid" in rep.text
    assert "None: every job of the grid completed." in rep.text
    assert "not counted" not in rep.text and "cut or damaged" not in rep.text
