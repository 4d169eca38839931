"""Hydra's own Optuna sweeper over rlsweep's launcher (``hydra.launcher.replicates``): every
trial runs as 2 replicates (seed=0,1: identity seeds, each its own job directory), and
Optuna reads their aggregate as the trial's value. tests/apps/optuna is run as a user
would, in subprocesses: a 4-trial search, 2 trials per Optuna batch."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import run_python
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from hydra_plugins.rlsweep_launcher.rlsweep_launcher import RLSweepLauncher
from rlsweep.errors import ConfigError
from rlsweep.launch.replicates import Replicates
from rlsweep.search.objective import aggregate

APP = Path(__file__).parent / "apps" / "optuna" / "app.py"
# Trials of tests/apps/optuna with x below this fail at their replicate seed=1.
FAIL_BELOW = 0.5

Run = tuple[subprocess.CompletedProcess[str], Path]


def search(
    tmp: Path, name: str, args: Sequence[str] = (), env: dict[str, str] | None = None
) -> Run:
    sweep = tmp / name
    proc = run_python(
        [str(APP), "-m", f"hydra.sweep.dir={sweep}", *args], tmp, env=env, timeout=180
    )
    return proc, sweep


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """The searches of this file, side by side (most of their time is starting Python)."""
    tmp = tmp_path_factory.mktemp("optuna")
    calls = {
        "first": ((), None),
        "again": ((), None),
        # Failed trials are told to Optuna as failed, and the search goes on. (Serially, in
        # the sweep's process: the same engine without starting workers, for time.)
        "failing": (
            ("hydra.sweeper.max_failure_rate=1.0", "hydra.launcher.executor=serial"),
            {"OPTUNA_APP_FAIL_BELOW": str(FAIL_BELOW)},
        ),
        "seed_set": (("seed=3",), None),
    }
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = {n: pool.submit(search, tmp, n, a, e) for n, (a, e) in calls.items()}
        return {n: f.result() for n, f in futures.items()}


def ok(run: Run) -> Path:
    proc, sweep = run
    assert proc.returncode == 0, proc.stderr[-3000:]
    return sweep


def jobs(sweep: Path) -> dict[int, tuple[float, int, float | None]]:
    """Each job directory's number: its trial's x, its seed, its score (None: failed)."""
    out = {}
    for d in sweep.iterdir():
        if not (d / ".hydra").is_dir():
            continue
        overrides = dict(str(o).split("=", 1) for o in OmegaConf.load(d / ".hydra/overrides.yaml"))
        result = d / "result.json"
        score = json.loads(result.read_text())["score"] if result.is_file() else None
        out[int(d.name)] = (float(overrides["x"]), int(overrides["seed"]), score)
    return out


def trials(sweep: Path) -> dict[float, list[tuple[int, float | None]]]:
    """Each trial's replicates: (seed, score), by the trial's x."""
    out: dict[float, list[tuple[int, float | None]]] = {}
    for _, (x, seed, score) in sorted(jobs(sweep).items()):
        out.setdefault(x, []).append((seed, score))
    return out


def best(sweep: Path) -> tuple[float, float]:
    """Optuna's best trial: its x and its value."""
    results = OmegaConf.load(sweep / "optimization_results.yaml")
    return float(results.best_params.x), float(results.best_value)


def value(replicates: list[tuple[int, float | None]]) -> float:
    """A trial's value recomputed from its replicates' result.json (the app's objective)."""
    scores = [s for _, s in replicates]
    assert None not in scores
    return aggregate([float(s) for s in scores if s is not None], "iqm")


def test_each_trial_runs_as_two_replicates_and_returns_their_aggregate(
    runs: dict[str, Run],
) -> None:
    sweep = ok(runs["first"])
    done = jobs(sweep)
    assert sorted(done) == list(range(8))
    assert all((sweep / str(n) / "result.json").is_file() for n in done)
    by_trial = trials(sweep)
    assert len(by_trial) == 4
    for x, replicates in by_trial.items():
        assert [seed for seed, _ in replicates] == [0, 1], x
        assert replicates[0][1] != replicates[1][1]  # each replicate its own seeds
    # Trial k's replicates are jobs 2k and 2k+1.
    for k in range(4):
        assert done[2 * k][0] == done[2 * k + 1][0]
    x, best_value = best(sweep)
    assert best_value == value(by_trial[x])
    assert best_value == max(value(r) for r in by_trial.values())  # direction: maximize


def test_the_same_search_gives_the_same_trials_and_values(runs: dict[str, Run]) -> None:
    first, again = ok(runs["first"]), ok(runs["again"])
    assert jobs(again) == jobs(first)
    assert best(again) == best(first)


def test_a_failed_replicate_fails_its_trial_and_only_it(runs: dict[str, Run]) -> None:
    sweep = ok(runs["failing"])
    proc = runs["failing"][0]
    output = proc.stdout + proc.stderr  # Hydra logs to stdout
    by_trial = trials(sweep)
    assert len(by_trial) == 4
    failing = {x for x in by_trial if x < FAIL_BELOW}
    assert failing and failing != set(by_trial)  # some trials fail, some do not
    for number, (x, seed, score) in jobs(sweep).items():
        failed = x in failing and seed == 1
        assert (score is None) == failed
        assert (sweep / str(number) / "error.txt").is_file() == failed
        if failed:
            assert f"seed=1 ({sweep / str(number)}): RuntimeError: planned failure" in output
    assert output.count("1 replicate(s) failed") == len(failing)
    x, best_value = best(sweep)
    assert x not in failing
    assert best_value == max(value(by_trial[t]) for t in set(by_trial) - failing)


def test_a_trial_that_sets_the_replicate_key_is_refused(runs: dict[str, Run]) -> None:
    proc, sweep = runs["seed_set"]
    assert proc.returncode != 0
    assert "sets the replicate key 'seed'" in proc.stderr
    assert "(seed=3)" in proc.stderr
    assert not sweep.exists()


def test_rlsweeps_own_sweeper_is_refused_replicates() -> None:
    launcher = RLSweepLauncher(replicates=2)
    with pytest.raises(ConfigError, match=r"hydra.launcher.replicates=2 is for Hydra's own"):
        launcher.prime([])
    RLSweepLauncher().replicates.refuse_own_sweeper()  # replicates=1: nothing to refuse


@pytest.mark.parametrize(
    ("count", "objective", "message"),
    [
        (0, "iqm", "hydra.launcher.replicates must be an integer >= 1"),
        (2, "median", "hydra.launcher.objective='median' is not allowed; choose one of iqm"),
    ],
)
def test_bad_settings_are_refused_by_name(count: int, objective: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Replicates.create(count, objective, None)


def completed(value: object) -> JobReturn:
    ret = JobReturn(overrides=["x=1"], status=JobStatus.COMPLETED)
    ret.return_value = value
    return ret


def test_a_trials_value_reads_the_results_metric() -> None:
    returns = [completed({"score": 1.0, "x": 1.0}), completed({"score": 4.0, "x": 1.0})]
    ret = Replicates(2, "mean", "score").trial_return(["x=1"], returns, "seed")
    assert ret.status == JobStatus.COMPLETED and ret.return_value == 2.5
    assert ret.overrides == ["x=1"]
    # A result without the number fails the trial, naming the setting.
    ret = Replicates(2, "mean", "loss").trial_return(["x=1"], returns, "seed")
    assert ret.status == JobStatus.FAILED
    assert "hydra.launcher.metric=loss" in str(ret._return_value)
