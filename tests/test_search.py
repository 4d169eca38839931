"""Search with replicates (``search.trials=N``): the space from Hydra's grammar, proposals
that depend on results and never on the order jobs end in, successive halving, the record,
and the command end to end (same trials on joblib and serially, resumed, interrupted)."""

from __future__ import annotations

import json
import math
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import TINY, run_cli, run_python
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf
from test_slurm import cluster  # noqa: F401  (the fixture)

from rlsweep.errors import ConfigError
from rlsweep.search.objective import aggregate, job_numbers, metric_name
from rlsweep.search.run import Search
from rlsweep.search.samplers import Known, propose
from rlsweep.search.settings import SearchSettings, settings_of
from rlsweep.search.space import dimension, space
from rlsweep.search.trials import earns_replicates
from rlsweep.task_api import TaskHooks

APP = Path(__file__).parent / "apps" / "search" / "app.py"
PARSER = OverridesParser.create()


def parse(*lines: str) -> list[Any]:
    return PARSER.parse_overrides(list(lines))


# ------------------------------------------------------------------ the space


def test_an_interval_spanning_decades_is_log_scale_and_tags_choose() -> None:
    lr = dimension(parse("agent.lr=interval(1e-4,1e-2)")[0])
    assert (lr.log, lr.integer, lr.low, lr.high) == (True, False, 1e-4, 1e-2)
    assert lr.from_unit(0.5) == 1e-3  # the geometric middle, 4 significant digits
    assert lr.override(lr.from_unit(0.5)) == "agent.lr=0.001"
    linear = dimension(parse("x=interval(0.1,0.9)")[0])
    assert not linear.log and linear.from_unit(0.25) == 0.3
    forced = dimension(parse("x=tag(linear, interval(1e-4,1e-2))")[0])
    assert not forced.log and forced.from_unit(0.5) == 0.00505
    n = dimension(parse("n=tag(int, interval(1,10))")[0])
    assert n.integer and n.from_unit(0.0) == 1 and n.from_unit(0.999) == 10
    assert n.override(n.from_unit(0.5)) == "n=6"
    env = dimension(parse("env=cartpole,acrobot")[0])
    assert env.choices == ("cartpole", "acrobot") and env.from_unit(0.7) == "acrobot"
    assert env.override("acrobot") == "env=acrobot"
    assert dimension(parse("k=range(3)")[0]).choices == ("0", "1", "2")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("x=interval(2,1)", "low end below its high end"),
        ("x=tag(log, linear, interval(1,2))", "log or linear"),
        ("x=tag(log, interval(-1,2))", "positive low end"),
        ("x=tag(int, interval(1.2,1.8))", "holds no integer"),
        ("x=glob(*)", "not a glob"),
        ("x=a,a", "distinct values"),
    ],
)
def test_a_space_a_search_cannot_use_is_refused_naming_it(line: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        dimension(parse(line)[0])


def test_a_search_with_nothing_swept_says_how_to_give_the_space() -> None:
    with pytest.raises(ConfigError, match="interval"):
        space([])


# ------------------------------------------------------------------ settings and objective


def test_settings_are_checked_naming_the_key() -> None:
    search, compare = settings_of({"trials": 4, "sampler": "tpe"}, None)
    assert search.on and search.sampler.value == "tpe" and not compare.on
    with pytest.raises(ConfigError, match=r"search\.sampler='grid' is not allowed; choose one of"):
        settings_of({"trials": 4, "sampler": "grid"}, None)
    with pytest.raises(ConfigError, match=r"Unknown config key 'search\.trails'"):
        settings_of({"trails": 4}, None)
    with pytest.raises(ConfigError, match=r"search\.replicates must be an integer >= 1"):
        settings_of({"trials": 4, "replicates": 0}, None)
    with pytest.raises(ConfigError, match="both set"):
        settings_of({"trials": 4}, {"rounds": 2})


def test_a_trials_number_from_its_replicates_by_hand() -> None:
    assert aggregate([1.0, 2.0, 3.0, 4.0, 100.0], "iqm") == 3.0  # drops 1 and 100
    assert aggregate([1.0, 3.0, 8.0], "iqm") == 4.0  # under 4 replicates: the mean
    assert aggregate([1.0, 3.0], "lcb") == 1.0  # 2 - sqrt(2) / sqrt(2)
    assert aggregate([7.0], "lcb") == 7.0
    assert metric_name({"final_return": 1.0, "steps": 3}, None, "search.metric") == "final_return"
    assert metric_name({"x": 1.0, "rlsweep": {}}, None, "search.metric") == "x"
    with pytest.raises(ConfigError, match=r"several numbers .* set search\.metric"):
        metric_name({"a": 1.0, "b": 2.0}, None, "search.metric")
    with pytest.raises(ConfigError, match=r"search\.metric=c: .* \(its numbers: a, b\)"):
        metric_name({"a": 1.0, "b": 2.0}, "c", "search.metric")


def test_a_jobs_logged_series_are_read_only_for_a_metric_it_did_not_return(
    tmp_path: Path,
) -> None:
    """A job's numbers for a search: what it returned; for a metric it did not return, also
    each logged series' last value (a returned number winning), found through the job's
    Hydra config as another launcher's JobReturn gives it."""
    scalars = tmp_path / "logs" / "scalars" / "eval"
    scalars.mkdir(parents=True)
    (scalars / "reward.csv").write_text("0,1.5\n10,2.5\n")
    hydra_cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(tmp_path)}}})

    def ret(value: Any, config: Any = hydra_cfg) -> JobReturn:
        return JobReturn(hydra_cfg=config, status=JobStatus.COMPLETED, _return_value=value)

    assert job_numbers(ret({"score": 3.0}), None) == {"score": 3.0}
    assert job_numbers(ret({"score": 3.0}), "score") == {"score": 3.0}
    assert job_numbers(ret({"score": 3.0}), "eval/reward") == {"eval/reward": 2.5, "score": 3.0}
    assert job_numbers(ret(None), "eval/reward") == {"eval/reward": 2.5, "return": None}
    assert job_numbers(ret({"eval/reward": 9.0}), "eval/reward") == {"eval/reward": 9.0}
    assert job_numbers(ret({"score": 3.0}, None), "eval/reward") == {"score": 3.0}
    with pytest.raises(ConfigError, match=r"no number: set search\.metric=<a number it returns"):
        metric_name(job_numbers(ret(None), None), None, "search.metric")


def test_halving_keeps_a_first_replicate_in_the_best_share_by_hand() -> None:
    assert earns_replicates([5.0], 3, maximize=True)  # the first trial: best of one
    assert earns_replicates([5.0, 3.0, 4.0], 2, maximize=True)  # 2nd best of 3, keep 2
    assert not earns_replicates([5.0, 4.0, 3.0], 2, maximize=True)  # 3rd of 3
    assert earns_replicates([5.0, 4.0, 3.0], 2, maximize=False)
    assert not earns_replicates([5.0, None], 1, maximize=True)  # a failed first replicate


def test_proposals_depend_on_root_trial_and_results_only() -> None:
    dims = space(parse("lr=interval(1e-4,1e-2)", "n=tag(int, interval(1,8))"))
    a = propose("random", dims, 0, 3, [], maximize=True, startup=5)
    assert a == propose("random", dims, 0, 3, [], maximize=True, startup=5)
    assert a != propose("random", dims, 0, 4, [], maximize=True, startup=5)
    assert a != propose("random", dims, 1, 3, [], maximize=True, startup=5)
    known = [
        Known(propose("random", dims, 0, k, [], maximize=True, startup=5), k) for k in range(6)
    ]
    tpe = propose("tpe", dims, 0, 9, known, maximize=True, startup=5)
    assert tpe == propose("tpe", dims, 0, 9, known, maximize=True, startup=5)
    assert 1e-4 <= float(tpe["lr"]) <= 1e-2 and isinstance(tpe["n"], int)
    # Below startup_trials results, TPE proposes as the random sampler does.
    assert propose("tpe", dims, 0, 9, known[:2], maximize=True, startup=5) == propose(
        "random", dims, 0, 9, [], maximize=True, startup=5
    )


# ------------------------------------------------------------------ the driver, in any order


def score(job: list[str]) -> float:
    """A synthetic result: peaks at lr = 10**-2.5, a replicate's own offset."""
    values = dict(item.split("=", 1) for item in job)
    return -((math.log10(float(values["lr"])) + 2.5) ** 2) + 0.1 * int(values["seed"])


def drive(settings: SearchSettings, order_seed: int) -> tuple[dict[str, Any], int]:
    """Run a search's driver on synthetic results, jobs ending in a random order; its
    record, and the most trials that ever had jobs out at once."""
    search = Search.create(
        settings, parse("lr=interval(1e-4,1e-1)", "tag=x"), OmegaConf.create({}), TaskHooks()
    )
    rng = random.Random(order_seed)
    out = list(search.start())
    most = 0
    while out:
        busy = {search.jobs[tuple(job)][0] for _, job in out}
        most = max(most, len(busy))
        _, job = out.pop(rng.randrange(len(out)))
        ret = JobReturn(overrides=job, status=JobStatus.COMPLETED)
        ret.return_value = {"score": score(job)}
        out += search.done(ret)
    return search.record(), most


@pytest.mark.parametrize(
    "settings",
    [
        SearchSettings(trials=10, replicates=3, in_flight=3),
        SearchSettings(trials=10, replicates=3, in_flight=2, halving=2),
        settings_of({"trials": 9, "replicates": 2, "sampler": "tpe", "startup_trials": 3}, None)[0],
    ],
    ids=["random", "halving", "tpe"],
)
def test_the_same_trials_whatever_order_jobs_end_in(settings: SearchSettings) -> None:
    first, most = drive(settings, 0)
    for order in (1, 2, 3):
        record, busy = drive(settings, order)
        assert record == first
        most = max(most, busy)
    assert most <= settings.in_flight  # never more trials out than in_flight
    assert len(first["trials"]) == settings.trials
    best = first["trials"][first["best"]]
    complete = [t for t in first["trials"] if t["status"] == "complete"]
    assert best["objective"] == max(t["objective"] for t in complete)
    if settings.halving:
        stopped = [t for t in first["trials"] if t["status"] == "stopped"]
        assert stopped and all(len(t["values"]) == 1 for t in stopped)
        assert first["jobs_run"] == 3 * len(complete) + len(stopped) < 30


# ------------------------------------------------------------------ end to end


SERIAL = ("hydra.launcher.executor=serial",)


def search_args(*extra: str, sampler: str = "tpe") -> list[str]:
    """The search command; TPE (whose proposals depend on the results) unless a test is
    about something else (``import optuna`` costs a process about 4 CPU-seconds here)."""
    return [
        str(APP),
        "-m",
        "lr=interval(1e-4,1e-1)",
        "hydra.sweeper.search.trials=6",
        "hydra.sweeper.search.replicates=2",
        "hydra.sweeper.search.in_flight=2",
        f"hydra.sweeper.search.sampler={sampler}",
        "hydra.sweeper.search.startup_trials=2",
        "hydra.launcher.n_jobs=2",
        *extra,
    ]


def record(sweep: Path) -> dict[str, Any]:
    data = json.loads((sweep / "search.json").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The search command run once on joblib: its sweep directory and its stderr."""
    workdir = tmp_path_factory.mktemp("joblib")
    proc = run_python(search_args(), workdir, env={"SEARCH_APP_REPORT": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return workdir / "multirun" / "app", proc.stderr


def test_the_search_command_runs_the_same_trials_on_joblib_serially_and_resumed(
    searched: tuple[Path, str], workdir: Path
) -> None:
    sweep, stderr = searched
    reference = record(sweep)
    serial = run_python(search_args(*SERIAL), workdir)
    assert serial.returncode == 0, serial.stderr[-3000:]
    assert record(workdir / "multirun" / "app") == reference
    assert [t["status"] for t in reference["trials"]] == ["complete"] * 6
    assert reference["metric"] == "score" and reference["jobs_run"] == 12
    # Each trial's replicates are the jobs seed=0 and seed=1, their numbers the results.
    for t in reference["trials"]:
        for r, value in enumerate(t["values"]):
            job = sweep / f"lr={t['params']['lr']!r},seed={r}"
            assert json.loads((job / "result.json").read_text())["score"] == value
    assert "<- best" in stderr and "## Search" in (sweep / "report.md").read_text()
    best = next(line for line in stderr.splitlines() if line.endswith("<- best"))
    assert "  replicates: [" in best  # labelled: not read as an interval
    assert (sweep / "report_search_progress.png").stat().st_size > 0
    # Run again: every job is found complete, and the search is the same.
    again = run_python(search_args(), sweep.parent.parent)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "12 job(s) already complete (skipped), 0 run" in again.stderr
    assert record(sweep) == reference


def test_an_interrupted_search_resumes_to_the_uninterrupted_result(
    searched: tuple[Path, str], workdir: Path
) -> None:
    slow = search_args("sleep_s=0.3")  # not part of what a job is: the same jobs, slower
    proc = subprocess.Popen(
        [sys.executable, *slow], cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    sweep = workdir / "multirun" / "app"
    deadline = time.monotonic() + 120
    while len(list(sweep.glob("*/result.json"))) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert not (sweep / "search.json").exists()
    resumed = run_python(slow, workdir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "already complete (skipped)" in resumed.stderr
    assert record(sweep)["trials"] == record(searched[0])["trials"]


def test_a_search_on_a_metric_the_app_only_logs_runs_the_same_trials(
    searched: tuple[Path, str], workdir: Path
) -> None:
    """log_only=true: the app returns nothing and logs its score as TorchRL's CSVLogger does
    (an earlier value first, then the score); search.metric=eval/score reads each job's last
    logged value, so TPE proposes exactly the trials of the search on the returned score."""
    proc = run_python(
        search_args("log_only=true", "hydra.sweeper.search.metric=eval/score", *SERIAL), workdir
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    logged = record(workdir / "multirun" / "app")
    assert logged["metric"] == "eval/score"
    assert logged["trials"] == record(searched[0])["trials"]
    # Run again: every job is found complete, its logged score read from its directory.
    again = run_python(
        search_args("log_only=true", "hydra.sweeper.search.metric=eval/score", *SERIAL), workdir
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "12 job(s) already complete (skipped), 0 run" in again.stderr
    assert record(workdir / "multirun" / "app") == logged


@pytest.mark.slurm
@pytest.mark.usefixtures("cluster")
def test_the_search_on_slurm_runs_the_same_trials(
    searched: tuple[Path, str], workdir: Path
) -> None:
    """Released jobs go to the real test cluster as further arrays, and the search is the
    one joblib ran."""
    proc = run_python(search_args("hydra.launcher.executor=slurm"), workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert record(workdir / "multirun" / "app") == record(searched[0])


def test_failed_replicates_fail_their_trial_and_the_sweep(workdir: Path) -> None:
    proc = run_python(search_args("fail_above=0.01", *SERIAL, sampler="random"), workdir)
    assert proc.returncode == 1
    assert "failed" in proc.stderr and "diverged" in proc.stderr
    searched = record(workdir / "multirun" / "app")
    statuses = {t["status"] for t in searched["trials"]}
    assert statuses == {"complete", "failed"}
    for t in searched["trials"]:
        assert (t["status"] == "failed") == (float(t["params"]["lr"]) > 0.01)
    assert searched["trials"][searched["best"]]["status"] == "complete"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["seed=0,1"], "sets the replicate key 'seed', which a search chooses"),
        (["hydra.sweeper.search.sampler=grid"], "search.sampler='grid' is not allowed"),
        (["two_numbers=true"], "set search.metric"),
        (["log_only=true"], "search.metric is not set and the job returned no number"),
    ],
)
def test_search_mistakes_are_said_naming_the_key(
    workdir: Path, extra: list[str], message: str
) -> None:
    proc = run_python(search_args(*extra, *SERIAL, sampler="random"), workdir)
    assert proc.returncode != 0
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_the_built_in_app_searches_with_search_keys_kept_out_of_its_jobs(workdir: Path) -> None:
    args = ["-m", "agent=a2c", "agent.learning_rate=interval(1e-4,1e-2)", "launcher=serial"]
    proc = run_cli([*args, "search.trials=2", "search.replicates=1", *TINY], workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = workdir / "multirun" / "default"
    searched = record(sweep)
    assert searched["metric"] == "final_return" and len(searched["trials"]) == 2
    names = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    assert len(names) == 2 and not any("search" in n for n in names)
