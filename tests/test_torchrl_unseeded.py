"""A TorchRL app shaped like TorchRL's dqn_cartpole (tests/apps/torchrl_unseeded: its own
``logger:`` section, no seed key, seeding nothing, TorchRL's collector, loss and TensorBoard
logger, nothing returned) runs as it is, opted in from the command line only: the steps of
tests/real_apps.py, the report on its own event files, the same logs in two sweeps, and the
determinism check naming where a job made nondeterministic first differs."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import NO_REPORT, run_python
from real_apps import App, Flow, check_flow, comparable_series, grid_names, run, run_flow

APPS = Path(__file__).parent / "apps"
UNSEEDED = App(
    source=APPS / "torchrl_unseeded",
    grid=[
        "+rlsweep=joblib",
        "optim.lr=0.001,0.0003",
        "+seed=range(4)",
        # A short run: 5 batches of 100 frames, updates from frame 200, evaluations at 200,
        # 400 and 500.
        "collector.total_frames=500",
        "collector.frames_per_batch=100",
        "collector.init_random_frames=200",
        "logger.test_interval=200",
    ],
    failing="optim.lr=0.0003,seed=2",
    change=("gamma: 0.99", "gamma: 0.98"),
    replicate_key="seed",
)


@pytest.fixture(scope="module")
def unseeded(tmp_path_factory: pytest.TempPathFactory) -> Flow:
    return run_flow(UNSEEDED, tmp_path_factory.mktemp("unseeded"))


def test_an_app_that_seeds_nothing_runs_as_it_is(unseeded: Flow) -> None:
    check_flow(unseeded, UNSEEDED, grid_names("seed"))
    report = (unseeded.sweep / "report.md").read_text()
    assert "eval/reward" in report  # from TorchRL's TensorBoard logger's event files


def test_an_app_that_seeds_nothing_logs_the_same_in_two_sweeps(
    unseeded: Flow, tmp_path: Path
) -> None:
    """The same job in another sweep, run serially: bitwise the same series (timings
    aside); another replicate: other series."""
    grid = [a.replace("+seed=range(4)", "+seed=range(2)") for a in UNSEEDED.grid]
    grid = [a.replace("optim.lr=0.001,0.0003", "optim.lr=0.0003") for a in grid]
    # Run in the sweep's own process this time (no workers to start, and the same numbers
    # as under joblib are expected), without the report (not what is compared).
    grid = [a.replace("+rlsweep=joblib", "+rlsweep=serial") for a in grid]
    grid.append(NO_REPORT)
    other = run(unseeded.app, grid, tmp_path)
    assert other.returncode == 0, other.stderr[-3000:]
    # That sweep varies only the seed: its jobs are named seed=0, seed=1.
    for s in (0, 1):
        mine = comparable_series(unseeded.sweep / f"optim.lr=0.0003,seed={s}")
        theirs = comparable_series(tmp_path / "multirun" / "app" / f"seed={s}")
        assert mine and mine == theirs
    first, second = (
        comparable_series(unseeded.sweep / f"optim.lr=0.0003,seed={s}") for s in (0, 1)
    )
    assert first["train/q_loss"] != second["train/q_loss"]


def test_the_check_names_where_a_job_made_nondeterministic_first_differs(unseeded: Flow) -> None:
    proc = run_python(
        [
            "-m",
            "rlsweep.check",
            str(unseeded.sweep),
            "--job",
            "optim.lr=0.001,seed=1",
            # A budget shorter than the run (500 frames): each run stops once it has
            # logged step 300, past the first update (frame 200), where the noise goes in.
            "--steps",
            "300",
        ],
        unseeded.sweep.parent,
        env={"TEST_APP_NONDETERMINISTIC": "1"},
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    # The noise goes into the first update (frame 200): the training loss shows it first.
    assert "First difference:" in proc.stdout and "train/q_loss at step" in proc.stdout, proc.stdout
