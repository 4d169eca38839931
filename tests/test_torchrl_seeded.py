"""A TorchRL app shaped like TorchRL's discrete_sac (tests/apps/torchrl_seeded: its own
``logger:`` section, its seed at ``env.seed`` seeding torch, numpy and its envs, TorchRL's
collector, loss and CSVLogger, nothing returned) runs as it is, opted in from the command
line only: the steps of tests/real_apps.py and the report on its own CSV log files."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_apps import App, Flow, check_flow, grid_names, run_flow

APPS = Path(__file__).parent / "apps"
SEEDED = App(
    source=APPS / "torchrl_seeded",
    grid=[
        "+rlsweep=joblib",
        "hydra.launcher.identity.replicate=env.seed",
        "optim.lr=0.001,0.0003",
        "env.seed=range(4)",
        # A short run: 5 batches of 100 frames, updates from frame 200, evaluations at 200,
        # 400 and 500 of at most 100 steps each.
        "collector.total_frames=500",
        "collector.frames_per_batch=100",
        "collector.init_random_frames=200",
        "logger.eval_iter=200",
        "env.max_episode_steps=100",
    ],
    failing="optim.lr=0.0003,env.seed=2",
    change=("gamma: 0.99", "gamma: 0.98"),
    replicate_key="env.seed",
)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Flow:
    return run_flow(SEEDED, tmp_path_factory.mktemp("seeded"))


def test_an_app_seeded_from_env_seed_runs_as_it_is(seeded: Flow) -> None:
    check_flow(seeded, SEEDED, grid_names("env.seed"))
    report = (seeded.sweep / "report.md").read_text()
    assert "eval/reward" in report  # the final metric, from TorchRL's CSVLogger files
