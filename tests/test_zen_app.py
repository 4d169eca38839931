"""An app written with hydra-zen (tests/apps/zen_app: configs built in Python with ``builds``
and ``store``, no YAML, ``zen(train).hydra_main()``, targets defined in its ``__main__``)
runs as it is, opted in from the command line only: the steps of tests/real_apps.py, its
sweep named after its script, and the report on its own TensorBoard event files."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_apps import App, Flow, check_flow, run_flow

ZEN = App(
    source=Path(__file__).parent / "apps" / "zen_app",
    grid=["+rlsweep=joblib", "optim.lr=0.01,0.003", "seed=range(4)", "episodes=20"],
    failing="optim.lr=0.003,seed=2",
    change=("gamma: float = 0.99", "gamma: float = 0.98"),
    replicate_key="seed",
    config_file="app.py",
)


@pytest.fixture(scope="module")
def zen(tmp_path_factory: pytest.TempPathFactory) -> Flow:
    return run_flow(ZEN, tmp_path_factory.mktemp("zen"))


def test_a_hydra_zen_app_runs_as_it_is(zen: Flow) -> None:
    names = [f"optim.lr={lr},seed={s}" for lr in ("0.003", "0.01") for s in range(4)]
    check_flow(zen, ZEN, names)
    # Hydra names a hydra-zen app's jobs after hydra-zen's own module: rlsweep, the script.
    assert zen.sweep.name == "app"
    report = (zen.sweep / "report.md").read_text()
    assert "eval/return" in report or "return" in report
