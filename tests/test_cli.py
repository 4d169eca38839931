"""The user's command line, end to end, in real subprocesses from a scratch directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import TINY, results, run_cli, run_clis


def test_grid_runs_every_job_and_prints_the_summary(workdir: Path) -> None:
    proc = run_cli(["-m", "agent=a2c,ppo", "seed=range(2)", "launcher=joblib", *TINY], workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = workdir / "multirun" / "default"
    res = results(sweep)
    # Job directories are named by the keys the sweep varies, not by the job's number;
    # the overrides every job shares are recorded once, in sweep.json.
    assert sorted(res) == [f"agent={a},seed={s}" for a in ("a2c", "ppo") for s in (0, 1)]
    constant = json.loads((sweep / "sweep.json").read_text())["constant"]
    assert constant == {
        "launcher": "joblib",
        "train.total_steps": "1024",
        "eval.every_steps": "512",
        "eval.episodes": "3",
    }
    assert {(r["agent"], r["replicate"]) for r in res.values()} == {
        (a, s) for a in ("a2c", "ppo") for s in (0, 1)
    }
    for name, r in res.items():
        assert r["env"] == "CartPole-v1"
        assert r["steps"] >= 1024
        assert len(r["final_episode_returns"]) == 3
        assert set(r["phase_seconds"]) == {"collect", "train", "evaluate"}
        assert r["versions"]["torch"].startswith("2.")
        assert r["config"]["agent"]["name"] == r["agent"]
        seeds = json.loads((sweep / name / "seeds.json").read_text())
        assert seeds["replicate"] == r["replicate"] and seeds["root"] == 0
        assert len(seeds["seeds"]["train_envs"]) == r["config"]["agent"]["n_envs"]
        header = (sweep / name / "metrics.csv").read_text().splitlines()[0]
        assert (
            header
            == "step,wall_time,eval_return_mean,eval_return_std,train_return_mean,train_episodes"
        )
    # Progress line on stderr, summary table on stdout, files in the sweep dir.
    assert "[rlsweep] 4/4 done | 0 failed" in proc.stderr
    assert "| a2c" in proc.stdout and "| ppo" in proc.stdout and "IQM 95% CI" in proc.stdout
    for name in (
        "summary.md",
        "summary.csv",
        "summary.json",
        "report.md",
        "report_learning_curves.png",
        "evaluations.parquet",
        "multirun.yaml",
    ):
        assert (sweep / name).is_file(), name
    cells = json.loads((sweep / "summary.json").read_text())["cells"]
    assert [(c["agent"], c["completed"], c["failed"]) for c in cells] == [
        ("a2c", 2, 0),
        ("ppo", 2, 0),
    ]
    # The summary's numbers are those of the result files.
    ppo = sorted(r["final_return"] for r in res.values() if r["agent"] == "ppo")
    assert cells[1]["mean"] == pytest.approx(sum(ppo) / 2)


def test_single_run_uses_the_defaults(workdir: Path) -> None:
    proc = run_cli(list(TINY), workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = (workdir / "runs" / "default").glob("*/result.json")
    r = json.loads(result.read_text())
    assert (r["agent"], r["env"], r["replicate"]) == ("ppo", "CartPole-v1", 0)
    assert "eval return" in proc.stderr  # a single run shows its progress


def test_experiment_files_need_no_python(workdir: Path, tmp_path: Path) -> None:
    """A shipped experiment, and one of the user's own through --config-dir."""
    mine = tmp_path / "myconf" / "experiment"
    mine.mkdir(parents=True)
    (mine / "mine.yaml").write_text(
        "# @package _global_\n"
        "name: mine\n"
        "train: {total_steps: 1024}\n"
        "eval: {every_steps: 512, episodes: 2}\n"
        "hydra:\n  mode: MULTIRUN\n  sweeper:\n    params:\n      env: cartpole,acrobot\n      seed: 0,1\n"
    )
    procs = run_clis(
        {
            "shipped": (
                ["+experiment=main_grid", "hydra.sweeper.params.seed='range(1)'", *TINY],
                workdir,
                None,
            ),
            "mine": (["--config-dir", str(tmp_path / "myconf"), "+experiment=mine"], workdir, None),
        }
    )
    for proc in procs.values():
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert {r["agent"] for r in results(workdir / "multirun" / "main_grid").values()} == {
        "a2c",
        "ppo",
    }
    res = results(workdir / "multirun" / "mine")
    assert sorted((r["env"], r["replicate"]) for r in res.values()) == [
        ("Acrobot-v1", 0),
        ("Acrobot-v1", 1),
        ("CartPole-v1", 0),
        ("CartPole-v1", 1),
    ]


def test_a_failing_job_does_not_stop_the_others(workdir: Path) -> None:
    proc = run_cli(
        ["-m", "env=fault", "env.kwargs.fault_replicates=[1]", "seed=range(3)", *TINY], workdir
    )
    assert proc.returncode != 0
    sweep = workdir / "multirun" / "default"
    res = results(sweep)
    assert sorted(r["replicate"] for r in res.values()) == [0, 2]
    (failed_dir,) = [d for d in sweep.iterdir() if "seed=1" in d.name]
    error = (failed_dir / "error.txt").read_text()
    assert "Traceback (most recent call last)" in error
    assert "InjectedFault: injected fault at step 50" in error
    assert not (failed_dir / "result.json").exists()
    # The failure is in the summary (with its traceback) and in the final message.
    summary = (sweep / "summary.md").read_text()
    assert "Failed jobs" in summary and "InjectedFault" in summary
    assert "1 of 3 jobs failed" in proc.stderr
    assert "[rlsweep] 2/3 done | 1 failed" in proc.stderr


BAD_INPUT = [
    (["agent=foo"], ["Could not find 'agent/foo'", "a2c", "ppo"]),
    (["env=foo"], ["Could not find 'env/foo'", "cartpole", "pendulum"]),
    (["launcher=foo"], ["Could not find 'launcher/foo'", "joblib", "serial"]),
    (["agent.learning_rate=fast"], ["agent.learning_rate", "'fast'", "float"]),
    (["agent.gamma=1.5"], ["agent.gamma must be in [0, 1]", "got 1.5"]),
    (["train.total_steps=-5"], ["train.total_steps", ">= 1"]),
    (["n_jobs=0"], ["n_jobs", ">= 1"]),
    (["env.id=NoSuchEnv-v0"], ["Unknown gymnasium id", "NoSuchEnv-v0"]),
    (["env.id=CartPol-v1"], ["Did you mean CartPole-v1"]),
    (["env.id=../../x"], ["Unknown gymnasium id", "../../x"]),
    (["+agent.lerning_rate=1e-3"], ["agent.lerning_rate", "Did you mean 'learning_rate'"]),
    # Swept, the key reaches rlsweep's composer, which names the allowed keys (a single
    # value is refused by Hydra's own composition first: it names the key only).
    (
        ["agent.lerning_rate=1e-3,3e-4"],
        ["agent.lerning_rate", "Did you mean 'learning_rate'", "gamma"],
    ),
    (["agent.lerning_rate=1e-3"], ["agent.lerning_rate", "not in struct"]),
    (["launcher=joblib,serial"], ["Sweeping over 'launcher'"]),
    (["seed=range(a)"], ["seed=range(a)"]),
    (["seed=-1"], ["seed", "replicate index >= 0"]),
    (["agent=dqn", "env=pendulum"], ["agent 'dqn' supports discrete", "continuous action space"]),
]


BAD_IDS = [b[0][0] for b in BAD_INPUT]


@pytest.fixture(scope="module")
def bad_input_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    """Every BAD_INPUT case run once, side by side, each in a directory of its own."""
    assert len(set(BAD_IDS)) == len(BAD_INPUT), "two BAD_INPUT cases share an id"
    runs = {}
    for case_id, (overrides, _) in zip(BAD_IDS, BAD_INPUT, strict=True):
        grid = "seed=0,1" if "seed" not in overrides[0] else "agent=ppo"
        runs[case_id] = (["-m", *TINY, grid, *overrides], tmp_path_factory.mktemp("bad"), None)
    procs = run_clis(runs)
    return {case_id: (runs[case_id][1], procs[case_id]) for case_id in runs}


@pytest.mark.parametrize(
    ("case_id", "expected"), zip(BAD_IDS, [b[1] for b in BAD_INPUT], strict=True), ids=BAD_IDS
)
def test_bad_input_is_refused_before_anything_runs(
    bad_input_runs: dict[str, tuple[Path, subprocess.CompletedProcess[str]]],
    case_id: str,
    expected: list[str],
) -> None:
    workdir, proc = bad_input_runs[case_id]
    assert proc.returncode != 0
    for fragment in expected:
        assert fragment in proc.stderr, f"{fragment!r} not in:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    # Nothing that looks like results: no sweep directory at all.
    assert not (workdir / "multirun").exists()


def test_an_experiment_file_that_does_not_parse_is_refused(workdir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "conf" / "experiment"
    broken.mkdir(parents=True)
    (broken / "broken.yaml").write_text("# @package _global_\ntrain: {total_steps: 10\n  oops: [\n")
    proc = run_cli(["--config-dir", str(tmp_path / "conf"), "+experiment=broken", "-m"], workdir)
    assert proc.returncode != 0
    assert "broken.yaml" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (workdir / "multirun").exists()


def test_names_and_values_never_write_outside_the_sweep_directory(workdir: Path) -> None:
    """name=../../x and values with slashes stay inside multirun/ (and their job dir)."""
    proc = run_cli(
        [
            "-m",
            "name=../../escape",
            "env.id=rlsweep/Fault-v0",
            "seed=0",
            *TINY,
        ],
        workdir,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in workdir.iterdir()) == ["multirun"]
    (sweep,) = (workdir / "multirun").iterdir()
    assert sweep.name.startswith("_._.._escape-")  # no leading dot, no slash
    (job,) = [d for d in sweep.iterdir() if d.is_dir()]
    assert "/" not in job.name and (job / "result.json").is_file()
    assert not (workdir.parent / "escape").exists()
