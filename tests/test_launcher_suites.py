"""Hydra's own launcher test suites, run against the rlsweep launcher."""

from __future__ import annotations

import pytest
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.test_utils.launcher_common_tests import (
    BatchedSweeperTestSuite,
    IntegrationTestSuite,
    LauncherTestSuite,
)

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
