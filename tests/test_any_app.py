"""Every guarantee for a third-party Hydra app that imports nothing from rlsweep.

The app (tests/apps/plain) draws from Python's and numpy's global RNGs and opts in with one
defaults entry (``rlsweep: joblib``). Each test runs it as a user would, in subprocesses.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import NO_REPORT, run_python

APP_DIR = Path(__file__).parent / "apps" / "plain"
APP = APP_DIR / "app.py"


def run_app(
    args: Sequence[str], cwd: Path, *, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python tests/apps/plain/app.py -m ARGS`` in ``cwd`` (never raises)."""
    return run_python([str(APP), "-m", *args], cwd, env=env)


def run_serially(
    args: Sequence[str], cwd: Path, *, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The same in the sweep's own process (``+rlsweep=serial``): for tests of what the
    sweeper decides, which worker processes would only make slower."""
    return run_app([*args, "rlsweep=serial"], cwd, env=env)


def draws(sweep: Path) -> dict[tuple[int, int], dict[str, float]]:
    """Each job's global-RNG draws by (x, seed), read from its own config."""
    import yaml

    out = {}
    for path in sweep.glob("*/draws.json"):
        cfg = yaml.safe_load((path.parent / ".hydra" / "config.yaml").read_text())
        out[(cfg["x"], cfg["seed"])] = json.loads(path.read_text())
    return out


def executed(log: Path) -> list[str]:
    return sorted(log.read_text().split()) if log.exists() else []


def test_a_job_draws_the_same_numbers_however_it_is_launched(tmp_path: Path) -> None:
    """Under n_jobs=2, serially, in reverse order on one worker under another hash seed,
    and with a key set to the value it has by default (and an ignored key changed): the
    same global-RNG draws."""
    runs = {
        "joblib": (["x=1,2", "seed=range(2)", "hydra.launcher.n_jobs=2", NO_REPORT], None),
        "serial": (["x=1,2", "seed=range(2)", "hydra.launcher.executor=serial", NO_REPORT], None),
        "reversed": (
            ["x=2,1", "seed=1,0", "hydra.launcher.n_jobs=1", NO_REPORT],
            {"PYTHONHASHSEED": "12345"},
        ),
        "explicit": (["x=1,2", "seed=range(2)", "lr=0.1", "tag=other", NO_REPORT], None),
    }
    with ThreadPoolExecutor(2) as pool:
        futures = {}
        for name, (args, env) in runs.items():
            (tmp_path / name).mkdir()
            futures[name] = pool.submit(run_app, args, tmp_path / name, env=env)
        done = {name: f.result() for name, f in futures.items()}
    for name, proc in done.items():
        assert proc.returncode == 0, (name, proc.stderr[-3000:])
    reference = draws(tmp_path / "joblib" / "multirun" / "app")
    assert len(reference) == 4
    assert len({d["random"] for d in reference.values()}) == 4  # every job its own stream
    for name in ("serial", "reversed", "explicit"):
        assert draws(tmp_path / name / "multirun" / "app") == reference, name


def test_resume_runs_only_what_did_not_finish(tmp_path: Path) -> None:
    log = tmp_path / "executions.log"
    env = {"PLAIN_APP_LOG": str(log)}
    sweep = tmp_path / "multirun" / "app"

    first = run_serially(["x=1,2", "seed=range(2)", NO_REPORT], tmp_path, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    names = {"x=1,seed=0", "x=2,seed=0", "x=1,seed=1", "x=2,seed=1"}
    assert {p.name for p in sweep.iterdir() if p.is_dir()} == names  # named by the job
    assert len(executed(log)) == 4

    again = run_serially(["x=1,2", "seed=range(2)", NO_REPORT], tmp_path, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(executed(log)) == 4  # a finished sweep runs nothing
    assert "4 of 4 jobs already complete" in again.stderr

    # A new value, another order.
    grown = run_serially(["x=3,2,1", "seed=1,0", NO_REPORT], tmp_path, env=env)
    assert grown.returncode == 0, grown.stderr[-3000:]
    assert executed(log) == sorted([*names, "x=3,seed=0", "x=3,seed=1"])


def test_a_failed_job_is_reported_kept_apart_and_run_again(tmp_path: Path) -> None:
    log = tmp_path / "executions.log"
    env = {"PLAIN_APP_LOG": str(log)}
    sweep = tmp_path / "multirun" / "app"
    failing = run_serially(["x=1,2,3", "seed=range(2)", "fail_x=2"], tmp_path, env=env)
    assert failing.returncode != 0
    assert "2 of 6 jobs failed" in failing.stderr
    assert "planned failure at x=2" in (sweep / "x=2,seed=0" / "error.txt").read_text()
    assert (sweep / "x=1,seed=0" / "result.json").is_file()  # the others are kept
    with (sweep / "summary.csv").open() as f:
        rows = {r["job"]: r["status"] for r in csv.DictReader(f)}
    assert rows == {
        **{f"x={x},seed={s}": "completed" for s in (0, 1) for x in (1, 3)},
        "x=2,seed=0": "failed",
        "x=2,seed=1": "failed",
    }

    log.unlink()
    fixed = run_serially(["x=1,2,3", "seed=range(2)"], tmp_path, env=env)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert executed(log) == ["x=2,seed=0", "x=2,seed=1"]  # exactly the failed jobs


def test_no_result_is_ever_taken_for_another_job(tmp_path: Path) -> None:
    """Hydra's numbered directories, a reordered sweep, and a changed config file."""
    log = tmp_path / "executions.log"
    env = {"PLAIN_APP_LOG": str(log)}
    numbered = ["hydra.sweep.subdir=${hydra.job.num}"]
    sweep = tmp_path / "multirun" / "app"

    first = run_serially(["x=1", "seed=0,1,2,3", *numbered, NO_REPORT], tmp_path, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    before = {d: (sweep / d / "result.json").read_text() for d in "0123"}

    reordered = run_serially(["x=1", "seed=3,2,1,0", *numbered], tmp_path, env=env)
    assert reordered.returncode != 0
    assert "seed: 0 then, 3 now" in reordered.stderr  # directory 0 holds seed 0's result
    assert len(executed(log)) == 4  # refused before anything ran
    assert {d: (sweep / d / "result.json").read_text() for d in "0123"} == before

    conf = tmp_path / "conf"
    shutil.copytree(APP_DIR / "conf", conf)
    text = (conf / "config.yaml").read_text()
    (conf / "config.yaml").write_text(text.replace("lr: 0.1", "lr: 0.2"))
    changed = run_serially(
        [f"--config-path={conf}", "x=1", "seed=0,1,2,3", *numbered], tmp_path, env=env
    )
    assert changed.returncode != 0
    assert "lr: 0.1 then, 0.2 now" in changed.stderr
    assert len(executed(log)) == 4


def test_an_apps_own_result_json_is_never_taken_for_a_record(tmp_path: Path) -> None:
    """A result.json the app writes itself does not make a job done; it is kept aside."""
    sweep = tmp_path / "multirun" / "app"
    job = sweep / "seed=0"
    job.mkdir(parents=True)
    (job / "result.json").write_text(json.dumps({"score": -1.0}))  # not rlsweep's
    proc = run_serially(["x=1", "seed=range(1)"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((job / "result.json").read_text())
    assert record["score"] != -1.0 and "rlsweep" in record
