"""The command line's own answers, in real subprocesses: ``--help`` (fast, with examples,
only the user's groups), ``--version`` (rlsweep's), usage errors under the program's name,
and a command line that cannot run refused before anything is written."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from conftest import TINY, run_cli, run_clis, run_python

import rlsweep


def _seconds(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    """The quickest of three runs of ``python ARGS`` (a loaded machine's noise is upward)."""
    best, proc = float("inf"), None
    for _ in range(3):
        start = time.perf_counter()
        proc = run_python(args, cwd)
        best = min(best, time.perf_counter() - start)
    assert proc is not None
    return best, proc


def test_help_is_fast_shows_examples_and_only_the_users_groups(workdir: Path) -> None:
    hydra_start, _ = _seconds(["-c", "import hydra"], workdir)
    took, proc = _seconds(["-m", "rlsweep", "--help"], workdir)
    assert proc.returncode == 0, proc.stderr
    # Hydra's own --help composes the config and lists every group: 3 s and more.
    assert took < hydra_start + 1.0, (took, hydra_start)
    out = proc.stdout
    assert out.startswith("usage: python -m rlsweep [-m]")
    assert "Examples:" in out and "python -m rlsweep -m agent=a2c,ppo 'seed=range(8)'" in out
    assert "  launcher: joblib (default), ray, serial, slurm, submitit_local\n" in out
    assert "  agent: a2c, dqn, es, ppo (default)" in out and "  +preset: " in out
    groups = out.split("Config groups", 1)[1].split("Flags:", 1)[0]
    assert re.search(r"\bfault\b", groups) is None  # the tests' env
    assert "rlsweep" not in groups and "hydra" not in groups  # app-only and Hydra's groups
    assert "--hydra-help" in out and "--version" in out
    assert not (workdir / "outputs").exists() and not (workdir / "runs").exists()


def test_help_lists_the_groups_of_a_config_dir_too(workdir: Path, tmp_path: Path) -> None:
    mine = tmp_path / "myconf" / "experiment"
    mine.mkdir(parents=True)
    (mine / "my_grid.yaml").write_text("# @package _global_\nname: my_grid\n")
    proc = run_cli(["--config-dir", str(tmp_path / "myconf"), "--help"], workdir)
    assert proc.returncode == 0, proc.stderr
    assert "  +experiment: classic_control, main_grid, my_grid\n" in proc.stdout


def test_version_is_rlsweeps(workdir: Path) -> None:
    proc = run_cli(["--version"], workdir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"rlsweep {rlsweep.__version__} (Hydra ")


def test_a_bad_flag_is_refused_under_the_programs_name(workdir: Path) -> None:
    proc = run_cli(["--bogus"], workdir)
    assert proc.returncode == 2
    assert "usage: python -m rlsweep [--help]" in proc.stderr
    assert "python -m rlsweep: error: unrecognized arguments: --bogus" in proc.stderr
    assert "__main__.py" not in proc.stderr


REFUSED = {
    # Hydra's basic launcher (always installed) stands for any other launcher plugin
    # (hydra/launcher=joblib, submitit_local...): its config has none of rlsweep's keys.
    "basic": (["-m", "hydra/launcher=basic", "seed=range(2)"], "e.g. launcher=serial"),
    "basic-single": (["hydra/launcher=basic"], "e.g. launcher=serial"),
    # Refused by name, whether Hydra's joblib launcher plugin is installed or not.
    "joblib": (["-m", "hydra/launcher=joblib", "seed=range(2)"], "e.g. launcher=joblib"),
    "no-launcher": (["-m", "launcher=null", "seed=range(2)"], "launcher=null leaves"),
    "both": (["-m", "launcher=null", "hydra/launcher=basic"], "launcher=NAME"),
}


@pytest.fixture(scope="module")
def refused(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    runs = {
        name: ([*args, *TINY], tmp_path_factory.mktemp(name), None)
        for name, (args, _) in REFUSED.items()
    }
    procs = run_clis(runs)
    return {name: (runs[name][1], procs[name]) for name in runs}


@pytest.mark.parametrize("case", list(REFUSED))
def test_another_launcher_plugin_is_refused_naming_the_launcher_group(
    refused: dict[str, tuple[Path, subprocess.CompletedProcess[str]]], case: str
) -> None:
    workdir, proc = refused[case]
    assert proc.returncode == 1
    assert REFUSED[case][1] in proc.stderr, proc.stderr
    assert "launcher=joblib, launcher=ray, launcher=serial" in proc.stderr
    assert "conf/launcher" in proc.stderr or "joblib by default" in proc.stderr
    assert "Traceback" not in proc.stderr and "not in 'BasicLauncherConf'" not in proc.stderr
    assert list(workdir.iterdir()) == []  # nothing written


def test_the_launcher_plugin_rlsweep_is_the_app_s_own(workdir: Path) -> None:
    proc = run_cli(
        ["hydra/launcher=rlsweep", "--cfg", "hydra", "--package", "hydra.launcher"], workdir
    )
    assert proc.returncode == 0, proc.stderr
    assert "executor: joblib" in proc.stdout


def test_a_single_run_with_a_misspelled_key_writes_nothing(workdir: Path) -> None:
    (workdir / "runs" / "kept").mkdir(parents=True)  # the user's: stays
    proc = run_cli([*TINY, "name=bad", "+agent.learnin_rate=1e-3"], workdir)
    assert proc.returncode == 1
    assert "Unknown config key 'agent.learnin_rate'" in proc.stderr
    assert [p.name for p in (workdir / "runs").iterdir()] == ["kept"]
