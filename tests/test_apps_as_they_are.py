"""A published Hydra app opts in without editing a line and gets every guarantee.

The app (tests/apps/asis) is shaped like the ones people publish: nothing of rlsweep in it,
its seed at ``env.seed`` (or no seeding at all), its own ``logger:``, ``search:`` and
``compare:`` sections, gymnasium envs reset without a seed, results written to files and
nothing returned. Every test opts in from the command line only (``+rlsweep=...``).
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import run_python

APP_DIR = Path(__file__).parent / "apps" / "asis"
ENV_SEED = "hydra.launcher.identity.replicate=env.seed"


def run(
    args: list[str], cwd: Path, *, app: Path = APP_DIR, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return run_python([str(app / "app.py"), "-m", *args], cwd, env=env)


def jobs(sweep: Path) -> dict[str, dict[str, Any]]:
    """Each job's draws.json by its directory's name."""
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(sweep.glob("*/draws.json"))}


def record(job_dir: Path) -> dict[str, Any]:
    return json.loads((job_dir / "result.json").read_text())["rlsweep"]


@pytest.mark.parametrize(
    ("key", "values"),
    [
        ("logger.backend", ("csv", "tensorboard")),
        ("search.trials", (5, 6)),
        ("compare.rounds", (7, 8)),
    ],
)
def test_an_apps_own_sections_are_its_own(
    tmp_path: Path, key: str, values: tuple[Any, ...]
) -> None:
    """An app's ``logger:``, ``search:`` and ``compare:`` reach it as it wrote them, are
    swept like any of its keys, and are part of what its jobs are."""
    swept = ",".join(str(v) for v in values)
    proc = run(["+rlsweep=serial", f"{key}={swept}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    sweep = tmp_path / "multirun" / "app"
    found = jobs(sweep)
    assert sorted(found) == [f"{key}={v}" for v in values]  # named by the swept key
    section, leaf = key.split(".")
    for value in values:
        config = found[f"{key}={value}"]["config"]
        defaults: dict[str, dict[str, Any]] = {
            "logger": {"backend": "csv", "exp_name": "asis"},
            "search": {"trials": 5},
            "compare": {"rounds": 7},
        }
        assert config[section] == {**defaults[section], leaf: value}
        identity = record(sweep / f"{key}={value}")["job"]["config"]
        assert identity[section][leaf] == value


def test_replicates_at_env_seed_read_the_jobs_own_seed(tmp_path: Path) -> None:
    """``hydra.launcher.identity.replicate=env.seed``: the jobs are named and grouped by the
    index, and the app reads each job's own 31-bit seed at env.seed (never 0..3); re-running
    runs nothing."""
    from omegaconf import OmegaConf

    from rlsweep.identity import Identity
    from rlsweep.seeding import Seeds

    args = ["+rlsweep=joblib", ENV_SEED, "env.seed=range(4)", "optim.lr=0.001,0.01"]
    proc = run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "8 jobs: 2 groups x 4 replicates (replicate key 'env.seed'" in proc.stderr
    sweep = tmp_path / "multirun" / "app"
    found = jobs(sweep)
    assert sorted(found) == [
        f"optim.lr={lr},env.seed={r}" for lr in ("0.001", "0.01") for r in range(4)
    ]  # named by the swept keys, the replicate key last
    read = []
    for name, draws in found.items():
        index = int(re.search(r"env.seed=(\d)", name).group(1))  # type: ignore[union-attr]
        meta = record(sweep / name)
        assert meta["job"]["replicate"] == index and meta["keys"]["replicate"] == "env.seed"
        job = meta["job"]
        identity = Identity(
            job["config"],
            job["replicate"],
            job["shared"],
            job["agent"],
            job["root"],
            job["crn"],
            job["threads"],
            job["derived_seed"],
        )
        assert identity.digest == meta["identity"]
        assert draws["seed_read"] == Seeds(identity).seed("replicate_seed", shared=True, bits=31)
        assert OmegaConf.load(sweep / name / ".hydra" / "config.yaml").env.seed == index
        read.append(draws["seed_read"])
    assert len(set(read)) == 8 and not set(read) & set(range(4))
    assert json.loads((sweep / "sweep.json").read_text())["replicate_key"] == "env.seed"

    again = run(args, tmp_path)
    assert again.returncode == 0, again.stderr
    assert "8 of 8 jobs already complete (skipped), 0 to run" in again.stderr

    # What the app reads there is part of what the job is: a result of the other is refused.
    switched = run([*args, "hydra.launcher.identity.replicate_value=index"], tmp_path)
    assert switched.returncode != 0 and "replicate_value" in switched.stderr

    as_index = run([*args, "hydra.launcher.identity.replicate_value=index"], tmp_path / "index")
    assert as_index.returncode == 0, as_index.stderr
    assert {d["seed_read"] for d in jobs(tmp_path / "index" / "multirun" / "app").values()} == {
        0,
        1,
        2,
        3,
    }


def test_an_app_that_seeds_nothing_gives_the_same_numbers_on_every_run(tmp_path: Path) -> None:
    """Envs reset without a seed, spaces sampled unseeded, np.random.default_rng(), an async
    vector env on multiprocessing's default start method (in a joblib worker, too: not
    loky's, whose pickler cannot send its shared memory): bitwise the same draws under
    joblib and serially, other draws for each replicate, and the two forked workers never on
    one stream."""
    args = ["seeding=none", "vector=default", "+seed=range(3)"]
    first = run(["+rlsweep=joblib", *args], tmp_path / "a")
    second = run(["+rlsweep=serial", *args], tmp_path / "b")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    a, b = jobs(tmp_path / "a" / "multirun" / "app"), jobs(tmp_path / "b" / "multirun" / "app")
    assert sorted(a) == ["seed=0", "seed=1", "seed=2"]
    assert a == b
    for draws in a.values():
        assert draws["vector_starts"][0] != draws["vector_starts"][1]
    for field in ("returns", "vector_starts", "default_rng", "numpy", "random"):
        assert len({json.dumps(d[field]) for d in a.values()}) == 3, field


def test_a_worker_started_fresh_is_said_in_the_jobs_log_and_the_summary(tmp_path: Path) -> None:
    proc = run(["+rlsweep=serial", "seeding=none", "vector=spawn"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    sweep = tmp_path / "multirun" / "app"
    log = next(sweep.glob("*/app.log")).read_text()
    assert "start method: rlsweep cannot give them streams of their own" in log
    seeds = json.loads(next(sweep.glob("*/seeds.json")).read_text())
    assert seeds["unseeded"]["fresh_subprocesses"] == 2  # the async vector env's two workers
    assert seeds["unseeded"]["forks"] == 0  # spawned, not forked
    flag = "the jobs of 1 group started sub-processes fresh (all: 1 job(s))"
    for name in ("summary.md", "report.md"):  # said where people look, per group
        assert flag in (sweep / name).read_text(), name


def test_directories_name_the_swept_keys_and_a_renamed_job_is_found(tmp_path: Path) -> None:
    """Named by the keys the sweep varies, no ``+``, constants once in sweep.json; when a
    later sweep varies one key more, the jobs done are found under their earlier names."""
    args = [
        "+rlsweep=serial",
        "+seed=range(2)",
        "optim.lr=0.001,0.01",
        "episodes=2",
        "env.name=CartPole-v1",
    ]
    proc = run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    sweep = tmp_path / "multirun" / "app"
    assert sorted(jobs(sweep)) == [
        f"optim.lr={lr},seed={s}" for lr in ("0.001", "0.01") for s in (0, 1)
    ]
    record = json.loads((sweep / "sweep.json").read_text())
    assert record["constant"] == {"episodes": "2", "env.name": "CartPole-v1"}
    assert record["varying"] == ["optim.lr", "seed"]

    grown = run([*args[:-2], "episodes=2,3"], tmp_path)
    assert grown.returncode == 0, grown.stderr
    assert "4 found under their earlier names, renamed" in grown.stderr
    names = sorted(jobs(sweep))
    assert names == [
        f"episodes={e},optim.lr={lr},seed={s}"
        for e in (2, 3)
        for lr in ("0.001", "0.01")
        for s in (0, 1)
    ]
    with (sweep / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8 and not any("rlsweep" in column for column in rows[0])


def test_a_changed_yaml_value_is_refused_with_a_hint_that_works(tmp_path: Path) -> None:
    app = tmp_path / "app"
    shutil.copytree(APP_DIR, app)
    args = ["+rlsweep=serial", "optim.lr=0.001,0.01"]
    assert run(args, tmp_path, app=app).returncode == 0
    config = app / "conf" / "config.yaml"
    config.write_text(config.read_text().replace("episodes: 3", "episodes: 4"))
    sweep = tmp_path / "multirun" / "app"

    def files() -> dict[Path, bytes]:  # but the sweep's lock, which holds its taker's pid
        return {
            p: p.read_bytes() for p in sweep.rglob("*") if p.is_file() and p.name != ".rlsweep.lock"
        }

    before = files()
    refused = run(args, tmp_path, app=app)
    assert refused.returncode != 0
    assert files() == before  # a refused run leaves nothing: no file written, none changed
    hint = re.search(r"add (\S+) to the command", refused.stderr)
    assert hint is not None and "episodes: 3 then, 4 now" in refused.stderr, refused.stderr
    rerun = run([*args, hint.group(1)], tmp_path, app=app)
    assert rerun.returncode == 0, rerun.stderr
    assert all(d["config"]["episodes"] == 4 for d in jobs(tmp_path / "multirun" / "app").values())


def test_a_refused_sweep_leaves_nothing_on_disk(tmp_path: Path) -> None:
    proc = run(["+rlsweep=joblib", "optim.lr=0.1,0.2", "no_such_key=1"], tmp_path)
    assert proc.returncode != 0 and "no_such_key" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_one_failing_setting_fails_only_its_jobs(tmp_path: Path) -> None:
    proc = run(
        ["+rlsweep=joblib", "optim.lr=0.001,0.01", "+seed=range(2)", "fail_at_lr=0.01"], tmp_path
    )
    assert proc.returncode == 1
    sweep = tmp_path / "multirun" / "app"
    assert sorted(jobs(sweep)) == ["optim.lr=0.001,seed=0", "optim.lr=0.001,seed=1"]
    for s in (0, 1):
        error = (sweep / f"optim.lr=0.01,seed={s}" / "error.txt").read_text()
        assert "planned failure at optim.lr=0.01" in error
        assert f'File "{APP_DIR / "app.py"}"' in error  # the app's own file, not <dynamic-code>


def test_the_determinism_check_names_the_first_difference(tmp_path: Path) -> None:
    proc = run(["+rlsweep=serial", "seeding=none", "+seed=range(2)"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    sweep = str(tmp_path / "multirun" / "app")
    same = run_python(["-m", "rlsweep.check", sweep, "--job", "seed=1"], tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "No difference found" in same.stdout
    differs = run_python(
        ["-m", "rlsweep.check", sweep], tmp_path, env={"ASIS_NONDETERMINISTIC": "1"}
    )
    assert differs.returncode == 1, differs.stdout + differs.stderr
    assert "First difference: draws.json, entropy:" in differs.stdout


def test_a_result_computed_when_the_app_read_the_index_is_found_and_refused(
    tmp_path: Path,
) -> None:
    """A sweep whose app read the replicate index (replicate_value=index, or a sweep run
    before the job's own seed was the default), resumed under another naming: its jobs are
    found by identity, and refused as computed otherwise, not run again beside them."""
    old = ["+rlsweep=serial", "+seed=range(2)", "optim.lr=0.001"]
    first = run([*old, "hydra.launcher.identity.replicate_value=index"], tmp_path)
    assert first.returncode == 0, first.stderr
    grown = ["+rlsweep=serial", "+seed=range(2)", "optim.lr=0.001,0.01"]
    refused = run(grown, tmp_path)
    assert refused.returncode != 0 and "replicate_value" in refused.stderr, refused.stderr
    rerun = run([*grown, "hydra.sweeper.rerun=all"], tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    sweep = tmp_path / "multirun" / "app"
    names = sorted(p.name for p in sweep.iterdir() if (p / ".hydra").is_dir())
    assert names == [f"optim.lr={lr},seed={s}" for lr in ("0.001", "0.01") for s in (0, 1)]
    assert all(d["seed_read"] not in (0, 1) for d in jobs(sweep).values())


def test_the_start_line_says_what_rlsweep_set_and_hints_as_the_app_needs(tmp_path: Path) -> None:
    """The app has no top-level ``seed``, and keeps its own at ``env.seed``."""
    setting = run(["+rlsweep=serial", "env.seed=0,1", "hydra.sweeper.report=false"], tmp_path / "a")
    assert setting.returncode == 0, setting.stderr
    assert (
        "[rlsweep] 2 jobs in 2 groups of one replicate each: the replicate key 'seed' is not "
        "swept ('env.seed' is swept as a setting: to make it the replicate index, add "
        "hydra.launcher.identity.replicate=env.seed)"
    ) in setting.stderr
    one = run(["+rlsweep=serial", "hydra.sweeper.report=false"], tmp_path / "b")
    assert one.returncode == 0, one.stderr
    assert "[rlsweep] 1 job in 1 group of one replicate each" in one.stderr
    assert "(sweep it, e.g. '+seed=range(4)', for replicates;" in one.stderr  # as pasted
    index = run(
        ["+rlsweep=serial", ENV_SEED, "env.seed=range(2)", "hydra.sweeper.report=false"],
        tmp_path / "c",
    )
    assert "2 replicates (replicate key 'env.seed'; rlsweep sets 'env.seed' to each job's" in (
        index.stderr
    )
