"""The plugin and conf/ are found in a regular (wheel) install, not only in this checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import TINY

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (whl,) = out.glob("rlsweep-*.whl")
    return whl


def test_wheel_ships_plugin_and_conf_but_no_namespace_init(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "hydra_plugins/rlsweep_launcher/rlsweep_launcher.py" in names
    assert "rlsweep/launch/core.py" in names
    # An __init__.py here would hide every other Hydra plugin.
    assert "hydra_plugins/__init__.py" not in names
    for conf in (
        "config.yaml",
        "agent/ppo.yaml",
        "env/cartpole.yaml",
        "launcher/joblib.yaml",
        "experiment/main_grid.yaml",
        "preset/ppo_cartpole.yaml",
        "launcher/slurm.yaml",
    ):
        assert f"rlsweep/conf/{conf}" in names


def test_multirun_from_a_regular_install_in_another_directory(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    code = (
        "import rlsweep, rlsweep.paths, hydra_plugins.rlsweep_launcher.rlsweep_launcher as c;"
        "print(rlsweep.__file__); print(rlsweep.paths.conf_dir()); print(c.__file__)"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run(
        [sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert all(p.startswith(str(site)) for p in where), where
    proc = subprocess.run(
        [sys.executable, "-m", "rlsweep", "-m", "seed=0,1", *TINY],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[rlsweep] 2/2 done" in proc.stderr  # our launcher, not Hydra's basic one
    res = [json.loads(p.read_text()) for p in (work / "multirun" / "default").glob("*/result.json")]
    assert sorted(r["replicate"] for r in res) == [0, 1]
