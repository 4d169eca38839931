"""Hydra's own launcher test suites, run against the rlsweep launcher."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.test_utils.launcher_common_tests import (
    BatchedSweeperTestSuite,
    IntegrationTestSuite,
    LauncherTestSuite,
)
from omegaconf import OmegaConf

from hydra_plugins.rlsweep_launcher.rlsweep_launcher import RLSweepLauncher
from hydra_plugins.rlsweep_launcher.rlsweep_sweeper import RLSweepSweeper

# Each variant is a launcher config: (name, overrides).
VARIANTS = [
    ("rlsweep", []),  # joblib executor, loky backend
    ("rlsweep", ["hydra.launcher.executor=serial"]),
    ("rlsweep", ["hydra.launcher.backend=multiprocessing", "hydra.launcher.start_method=spawn"]),
]
# backend=threading is left out here: these suites rely on Hydra's legacy per-job chdir,
# which threads cannot share (the threading backend refuses it; see tests/test_launch.py).
IDS = ["loky", "serial", "multiprocessing-spawn"]


def test_discovery() -> None:
    assert RLSweepLauncher.__name__ in [x.__name__ for x in Plugins.instance().discover(Launcher)]
    assert RLSweepSweeper.__name__ in [x.__name__ for x in Plugins.instance().discover(Sweeper)]


@pytest.mark.parametrize(("launcher_name", "overrides"), VARIANTS, ids=IDS)
class TestRLSweepLauncher(LauncherTestSuite):
    pass


@pytest.mark.parametrize(
    ("launcher_name", "overrides"),
    [(name, [*ov, "hydra.sweeper.max_batch_size=2"]) for name, ov in VARIANTS],
    ids=IDS,
)
class TestRLSweepLauncherBatched(BatchedSweeperTestSuite):
    pass


@pytest.mark.parametrize(
    ("task_launcher_cfg", "extra_flags"),
    [
        (
            {
                "defaults": [
                    {"override hydra/launcher": "rlsweep"},
                    {"override hydra/hydra_logging": "hydra_debug"},
                    {"override hydra/job_logging": "disabled"},
                ]
            },
            ["-m"],
        ),
        (
            {
                "defaults": [
                    {"override hydra/launcher": "rlsweep"},
                    {"override hydra/hydra_logging": "hydra_debug"},
                    {"override hydra/job_logging": "disabled"},
                ],
                "hydra": {"launcher": {"executor": "serial"}},
            },
            ["-m"],
        ),
    ],
    ids=["loky", "serial"],
)
class TestRLSweepLauncherIntegration(IntegrationTestSuite):
    pass


def _configs(ret: JobReturn, sweep_dir: Path) -> tuple[object, object]:
    """A job's returned ``cfg`` and ``hydra_cfg``, minus what differs between launchers by
    design (the launcher's own node, choice and overrides, hydra.job.id), with the sweep
    directory written as ``<sweep>``."""
    assert ret.cfg is not None and ret.hydra_cfg is not None
    hydra_cfg = OmegaConf.to_container(ret.hydra_cfg, resolve=False)
    assert isinstance(hydra_cfg, dict)
    node = hydra_cfg["hydra"]
    del node["launcher"], node["runtime"]["choices"]["hydra/launcher"], node["job"]["id"]
    overrides = node["overrides"]["hydra"]
    overrides[:] = [o for o in overrides if not o.startswith(("hydra/launcher", "hydra.launcher"))]
    text = json.dumps([OmegaConf.to_container(ret.cfg, resolve=False), hydra_cfg])
    return tuple(json.loads(text.replace(str(sweep_dir), "<sweep>")))


@pytest.mark.parametrize(("launcher_name", "overrides"), VARIANTS, ids=IDS)
def test_returns_carry_the_configs_of_hydras_basic_launcher(
    hydra_sweep_runner: Any, launcher_name: str, overrides: list[str], tmp_path: Path
) -> None:
    """A worker sends its JobReturn back without ``cfg`` and ``hydra_cfg`` (they are
    composed again when read: rlsweep.launch.jobs.Returned); read, they are what Hydra's
    basic launcher returns, run_job's hydra.runtime.output_dir included."""

    def returns(launcher: list[str], sweep_dir: Path) -> list[JobReturn]:
        sweep = hydra_sweep_runner(
            calling_file=None,
            calling_module="hydra.test_utils.a_module",
            task_function=None,
            config_path="configs",
            config_name="compose.yaml",
            overrides=[*launcher, "hydra/job_logging=disabled", "foo=1,2", "bar=10,'${foo}'"],
            temp_dir=sweep_dir,
        )
        with sweep:
            assert sweep.returns is not None
            return [ret for batch in sweep.returns for ret in batch]

    ours = returns([f"hydra/launcher={launcher_name}", *overrides], tmp_path / "ours")
    basic = returns(["hydra/launcher=basic"], tmp_path / "basic")
    assert [r.overrides for r in ours] == [r.overrides for r in basic]
    assert [r.return_value for r in ours] == [r.return_value for r in basic]
    assert [r.hydra_cfg.hydra.job.num for r in ours] == [0, 1, 2, 3]  # type: ignore[union-attr]
    for mine, theirs in zip(ours, basic, strict=True):
        assert _configs(mine, tmp_path / "ours") == _configs(theirs, tmp_path / "basic")
