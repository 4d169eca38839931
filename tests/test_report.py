"""The statistical report: each statistic on tiny inputs, reference implementations, synthetic
sweeps with a known truth, reproducibility, and one real sweep end to end."""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

from rlsweep import stats
from rlsweep.identity import canonical_json
from rlsweep.report.analysis import GroupStats, group_stats, normalized_scores, statistic_rng
from rlsweep.report.build import write_report
from rlsweep.report.cli import main
from rlsweep.report.comparisons import Comparison, match_pairs, paired_comparisons
from rlsweep.report.files import CURVES_PNG, EVALUATIONS_PARQUET, IMPROVEMENT_PNG, PROFILES_PNG
from rlsweep.report.read import read_runs
from rlsweep.report.runs import Run, deduplicate, missing_runs
from rlsweep.report.tidy import AGENT_COLUMNS
from rlsweep.seeding import identity_digest
from rlsweep.stats import bootstrap, estimates

FINAL = "final_return"  # the metric of rlsweep's own agents


def load_runs(sweep_dirs: Sequence[Path]) -> list[Run]:
    """Every run of the sweeps, as the report reads them."""
    return list(read_runs(sweep_dirs).runs)


def cell_stats(
    runs: Sequence[Run], missing: Sequence[tuple[str, str, int]] = (), *, reps: int
) -> list[GroupStats]:
    return group_stats(runs, missing, FINAL, reps=reps)


RLIABLE_CASE = np.array([[1.0, 2.0], [2.0, 2.0], [1.0, 1.0], [2.0, 1.0]])


# ============================================================================================
# Statistics on tiny hand-checkable matrices


def test_rliable_case_mean_median_iqm_are_one_and_a_half() -> None:
    # rliable's own test case: every aggregate of [[1,2],[2,2],[1,1],[2,1]] is 1.5.
    assert stats.mean(RLIABLE_CASE) == 1.5
    assert stats.median(RLIABLE_CASE) == 1.5
    assert stats.iqm(RLIABLE_CASE) == 1.5
    # Optimality gap from 2: max(2 - x, 0) = 1, 0, 0, 0, 1, 1, 0, 1 -> 0.5.
    assert stats.optimality_gap(RLIABLE_CASE, gamma=2.0) == 0.5
    # Sample standard deviation: four 1s and four 2s around 1.5 -> sqrt(8 * 0.25 / 7).
    assert stats.std(RLIABLE_CASE) == pytest.approx(np.sqrt(2.0 / 7.0), rel=1e-15)


def test_probability_of_improvement_tiny() -> None:
    # Task 0: x = (1, 2, 1, 2) vs y = (0, 0, 0, 0): always better -> 1.
    # Task 1: x = (2, 2, 1, 1) vs y = (2, 2, 2, 2): 8 ties of 16 pairs, 0 wins -> 0.25.
    y = np.array([[0.0, 2.0]] * 4)
    assert stats.probability_of_improvement(RLIABLE_CASE, y) == (1.0 + 0.25) / 2


def test_std_by_hand() -> None:
    assert stats.std([1.0, 3.0]) == pytest.approx(np.sqrt(2.0))
    assert stats.std([1.0, 3.0], ddof=0) == 1.0
    assert np.isnan(stats.std([4.0]))  # n = 1: undefined
    assert stats.std([2.0, 2.0, 2.0]) == 0.0


def test_correlation_by_hand() -> None:
    assert stats.correlation([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]) == pytest.approx(1.0)
    assert stats.correlation([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    # Centred: x = (-1, 0, 1), y = (-1, 2, -1) -> sum xy = 0.
    assert stats.correlation([1.0, 2.0, 3.0], [0.0, 3.0, 0.0]) == 0.0
    assert np.isnan(stats.correlation([1.0, 2.0], [5.0, 5.0]))  # constant side
    assert np.isnan(stats.correlation([1.0], [2.0]))
    x = np.random.default_rng(0).normal(size=(9, 2))
    y = x + np.random.default_rng(1).normal(size=(9, 2))
    expected = np.corrcoef(x.ravel(), y.ravel())[0, 1]
    assert stats.correlation(x, y) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="same shape"):
        stats.correlation([1.0, 2.0], [1.0, 2.0, 3.0])


# ============================================================================================
# Against reference implementations.
#
# The spec asks for agreement with rliable. rliable cannot be installed next to pandas 3 (it
# requires arch<8, which fails to import with pandas 3), so these tests replace it with
# independent implementations of its definitions: scipy.stats.trim_mean (rliable's IQM),
# np.median, np.mean, rliable's optimality-gap formula, the Mann–Whitney U statistic (rliable's
# probability of improvement), and a straightforward-loop percentile stratified bootstrap
# drawing from numpy's *global* state (rliable's bootstrap ignores its random_state argument
# and draws from that state: seeding it is how rliable's reference values are reproduced).


def _ref_iqm(x: np.ndarray) -> float:
    import scipy.stats as scipy_stats  # the cross-checks: in the test extra, never skipped

    return float(scipy_stats.trim_mean(x, proportiontocut=0.25, axis=None))


def _ref_optimality_gap(x: np.ndarray, gamma: float = 1.0) -> float:
    return float(gamma - np.mean(np.minimum(x, gamma)))  # rliable's formula


def _ref_probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    import scipy.stats as scipy_stats  # the cross-checks: in the test extra, never skipped

    per_task = [
        scipy_stats.mannwhitneyu(x[:, t], y[:, t], alternative="greater").statistic
        / (x.shape[0] * y.shape[0])
        for t in range(x.shape[1])
    ]
    return float(np.mean(per_task))


REFERENCES: dict[str, tuple[Callable[[np.ndarray], float], Callable[[np.ndarray], float]]] = {
    "IQM": (stats.iqm, _ref_iqm),
    "mean": (stats.mean, lambda x: float(np.mean(x))),
    "median": (stats.median, lambda x: float(np.median(x))),
    "optimality gap": (functools.partial(stats.optimality_gap, gamma=1.0), _ref_optimality_gap),
}


@pytest.fixture
def global_numpy_state() -> Iterator[None]:
    """The reference bootstrap seeds numpy's global state; restore it afterwards."""
    state = np.random.get_state()
    yield
    np.random.set_state(state)


def _ref_bootstrap_ci(sample: Callable[[], float], reps: int, seed: int) -> tuple[float, float]:
    """Percentile 95% interval of ``reps`` calls of ``sample`` after np.random.seed(seed)."""
    np.random.seed(seed)
    dist = np.array([sample() for _ in range(reps)])
    low, high = np.percentile(dist, [2.5, 97.5])
    return float(low), float(high)


def _ref_resample(x: np.ndarray) -> np.ndarray:
    """One stratified resample: runs drawn with replacement within each task (column)."""
    out = np.empty_like(x)
    for t in range(x.shape[1]):
        out[:, t] = x[np.random.randint(0, x.shape[0], size=x.shape[0]), t]
    return out


@pytest.mark.parametrize("name", list(REFERENCES))
def test_point_estimates_equal_reference_exactly_on_dyadic_scores(name: str) -> None:
    # Multiples of 1/8, in counts that are powers of two: every sum and every division is
    # exact, so any order of evaluation gives the same bits and "exactly equal" is well
    # defined (elsewhere the formulas may round differently, see the next test).
    ours, ref = REFERENCES[name]
    rng = np.random.default_rng(11)
    for shape in [(4, 2), (8, 1), (4, 4), (16, 2), (2, 8)]:
        x = rng.integers(0, 17, size=shape) / 8.0
        assert ours(x) == ref(x)
    assert ours(RLIABLE_CASE) == ref(RLIABLE_CASE)


@pytest.mark.parametrize("name", list(REFERENCES))
def test_point_estimates_match_reference_on_real_valued_scores(name: str) -> None:
    # On arbitrary floats only the summation order can differ (mean of max(1 - x, 0) vs
    # 1 - mean(min(x, 1)) for the optimality gap): a few ulps.
    ours, ref = REFERENCES[name]
    x = np.random.default_rng(12).normal(0.6, 0.3, size=(10, 3))
    assert ours(x) == pytest.approx(ref(x), rel=1e-13, abs=1e-15)


def test_probability_of_improvement_equals_mann_whitney() -> None:
    rng = np.random.default_rng(13)
    for nx, ny, tasks in [(4, 4, 2), (5, 3, 3), (6, 6, 1)]:
        x = rng.integers(0, 5, size=(nx, tasks)) / 4.0  # ties on purpose
        y = rng.integers(0, 5, size=(ny, tasks)) / 4.0
        assert stats.probability_of_improvement(x, y) == _ref_probability_of_improvement(x, y)


@pytest.mark.parametrize(("nx", "ny", "tasks"), [(1, 2, 1), (5, 8, 3), (60, 45, 2)])
def test_probability_of_improvement_ci_is_the_pairwise_count_of_the_same_resamples(
    nx: int, ny: int, tasks: int
) -> None:
    """Counted from the resamples' run indices, the bootstrap distribution (and so the
    interval) is bit for bit that of comparing every pair of resampled values
    (estimates.batch_probability_of_improvement, the definition)."""
    pairwise = estimates.batch_probability_of_improvement
    rng = np.random.default_rng(nx + ny)
    x = rng.integers(0, 6, size=(nx, tasks)) / 3.0  # ties within and across x and y
    y = rng.integers(0, 6, size=(ny, tasks)) / 3.0
    x[0], y[-1] = -0.0, 0.0  # -0 and +0 are one value
    dist = bootstrap._bootstrap([x, y], pairwise, 3000, np.random.default_rng(7), paired=False)
    low, high = bootstrap._interval(dist, 0.95)
    point = pairwise(x[None], y[None])[0]
    ci = bootstrap.probability_of_improvement_ci(x, y, reps=3000, seed=7)
    assert ci == (point, low, high)
    assert bootstrap.probability_of_improvement_ci([[-0.0]], [[0.0]], reps=50)[:2] == (0.5, 0.5)


REFERENCE_REPS = 5000


@pytest.mark.parametrize("name", list(REFERENCES))
def test_stratified_bootstrap_ci_matches_loop_reference(name: str, global_numpy_state) -> None:
    ours, ref = REFERENCES[name]
    x = np.random.default_rng(2024).normal(0.6, 0.3, size=(10, 3))
    point, low, high = bootstrap.bootstrap_ci(x, ours, reps=REFERENCE_REPS, seed=0)
    ref_low, ref_high = _ref_bootstrap_ci(lambda: ref(_ref_resample(x)), REFERENCE_REPS, seed=0)
    assert point == pytest.approx(ref(x), rel=1e-13)
    assert low == pytest.approx(ref_low, rel=0.02)
    assert high == pytest.approx(ref_high, rel=0.02)


def test_probability_of_improvement_ci_matches_loop_reference(global_numpy_state) -> None:
    rng = np.random.default_rng(2025)
    x, y = rng.normal(0.8, 0.5, size=(8, 3)), rng.normal(0.4, 0.5, size=(8, 3))

    def resampled() -> float:
        xs, ys = _ref_resample(x), _ref_resample(y)
        wins = (xs[:, None, :] > ys[None, :, :]) + 0.5 * (xs[:, None, :] == ys[None, :, :])
        return float(wins.mean(axis=(0, 1)).mean())

    point, low, high = bootstrap.probability_of_improvement_ci(x, y, reps=REFERENCE_REPS, seed=0)
    ref_low, ref_high = _ref_bootstrap_ci(resampled, REFERENCE_REPS, seed=0)
    assert point == _ref_probability_of_improvement(x, y)
    assert low == pytest.approx(ref_low, rel=0.02)
    assert high == pytest.approx(ref_high, rel=0.02)


# ============================================================================================
# Synthetic sweep directories: we write the files a job writes, so the truth is known.

BASELINES = (0.0, 100.0)


def write_job(
    sweep: Path,
    agent: str,
    env: str,
    replicate: int,
    final: float | None = None,
    *,
    status: str = "completed",
    crn: bool = True,
    root: int = 0,
    baselines: tuple[float | None, float | None] = BASELINES,
    agent_config: dict[str, object] | None = None,
    train_steps: int = 1000,
    curve: Sequence[tuple[int, float]] | None = None,
) -> Path:
    """One job directory as rlsweep.job writes it (result.json only when completed)."""
    agent_cfg = agent_config or {"name": agent}
    name = f"agent={agent},env={env},seed={replicate}"
    if agent_config:
        name += "," + ",".join(f"{k}={v}" for k, v in sorted(agent_config.items()) if k != "name")
    if train_steps != 1000:
        name += f",train.total_steps={train_steps}"
    d = sweep / name
    (d / ".hydra").mkdir(parents=True)
    env_identity: dict[str, object] = {"id": env, "kwargs": {}, "max_episode_steps": None}
    env_cfg = {**env_identity, "random_score": baselines[0], "reference_score": baselines[1]}
    config = {
        "agent": agent_cfg,
        "env": env_cfg,
        "seed": replicate,
        "seeding": {"root": root, "common_random_numbers": crn},
        "train": {"total_steps": train_steps},
    }
    (d / ".hydra" / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
    env_key = [root, replicate, env] + ([] if crn else [agent])
    seeds = {
        "version": 1,
        "root": root,
        "replicate": replicate,
        "common_random_numbers": crn,
        "env_identity": env_identity,
        "agent_identity_sha256": identity_digest(agent_cfg),
        "seeds": {"eval_episodes": [identity_digest(env_key)], "agent": identity_digest(name)},
    }
    (d / "seeds.json").write_text(json.dumps(seeds))
    value = 0.0 if final is None else final
    points = curve if curve is not None else [(0, 0.0), (100, value / 2), (200, value)]
    if status == "incomplete":
        points = points[:1]
    lines = ["step,wall_time,eval_return_mean,eval_return_std,train_return_mean,train_episodes"]
    lines += [f"{s},{0.5 * i},{r},1.0,,0" for i, (s, r) in enumerate(points)]
    (d / "metrics.csv").write_text("\n".join(lines) + "\n")
    if status == "completed":
        result = {
            "agent": agent_cfg["name"],
            "env": env,
            "replicate": replicate,
            "final_return": value,
            "config": config,
        }
        identity = {
            "format": 1,
            "config": config,
            "replicate": replicate,
            "root": root,
            "shared": {"env": env_identity},
            "agent": {"agent": agent_cfg},
            "crn": crn,
            "threads": 1,
        }
        digest = hashlib.sha256(canonical_json(identity).encode("ascii")).hexdigest()
        result["rlsweep"] = {"identity": digest, "job": identity}  # rlsweep's record
        (d / "result.json").write_text(json.dumps(result))
    elif status == "failed":
        (d / "error.txt").write_text("Traceback (most recent call last):\nRuntimeError: boom\n")
    return d


TRUE_DIFFERENCE = 5.0
N_PAIRED = 12


def paired_sweep(sweep: Path, *, b_crn: bool = True, b_root: int = 0) -> dict[str, np.ndarray]:
    """Agents a, b, c on env E. Each replicate has a large shared luck s_r (what common random
    numbers share); a = s + 5 + noise, b = s + noise, c = s + noise: a - b = 5, b - c = 0."""
    rng = np.random.default_rng(7)
    shared = rng.normal(50.0, 20.0, size=N_PAIRED)
    finals = {
        "a": shared + TRUE_DIFFERENCE + rng.normal(0.0, 0.5, size=N_PAIRED),
        "b": shared + rng.normal(0.0, 0.5, size=N_PAIRED),
        "c": shared + rng.normal(0.0, 0.5, size=N_PAIRED),
    }
    for agent, values in finals.items():
        for r, v in enumerate(values):
            crn, root = (b_crn, b_root) if agent == "b" else (True, 0)
            write_job(sweep, agent, "E", r, float(v), crn=crn, root=root)
    return finals


def _comparison(comparisons: Sequence[Comparison], a: str, b: str) -> Comparison:
    (found,) = [c for c in comparisons if (c.a, c.b) == (a, b)]
    return found


def test_paired_analysis_recovers_known_difference(tmp_path: Path) -> None:
    finals = paired_sweep(tmp_path)
    rep = write_report([tmp_path], reps=1000)
    ab = _comparison(rep.comparisons, "a", "b")
    assert ab.paired and ab.n_pairs == N_PAIRED and ab.note == ""
    assert ab.difference == pytest.approx(np.mean(finals["a"] - finals["b"]))
    assert ab.low <= TRUE_DIFFERENCE <= ab.high
    assert ab.low > 0.0  # the difference is detected...
    _, ulow, uhigh = bootstrap.unpaired_bootstrap_ci(
        finals["a"], finals["b"], stats.mean, reps=1000
    )
    assert ulow < 0.0 < uhigh  # ...which independent runs could not do with this seed luck
    assert (ab.high - ab.low) < 0.1 * (uhigh - ulow)
    assert ab.correlation > 0.99  # the pairing correlation observed
    # Every one of the 12 differences is positive: exact two-sided p = 2 / 2^12.
    assert ab.p_value == pytest.approx(2.0 / 2**N_PAIRED)
    bc = _comparison(rep.comparisons, "b", "c")  # true difference 0
    assert abs(bc.difference) < 0.1 * TRUE_DIFFERENCE
    assert bc.p_holm > 0.05  # no difference claimed after the family-wise correction
    # Holm over the family of the three paired tests.
    raw = [c.p_value for c in rep.comparisons]
    np.testing.assert_allclose([c.p_holm for c in rep.comparisons], stats.holm(raw))
    assert all(c.p_holm >= c.p_value for c in rep.comparisons)
    assert "Holm p (3 tests)" in rep.text
    assert (
        "| E   | a − b | paired | 12 | 4.93       | [4.58, 5.29]   | <0.001     | 0.001 "
        in rep.text
    )


def _synthetic_runs(a: np.ndarray, b: np.ndarray) -> list[Run]:
    """Completed runs of agents a and b on env E, replicate r of each paired."""
    return [
        Run(Path("s"), Path(f"{agent}{r}"), "completed", agent, "E", r, 0, True, None,
            values={FINAL: float(v)})
        for agent, values in (("a", a), ("b", b))
        for r, v in enumerate(values)
    ]  # fmt: skip


def test_paired_analysis_coverage_and_false_positives() -> None:
    # 200 synthetic studies of 12 paired replicates with shared luck (sd 20) and run noise
    # (sd 0.5). True difference 5: the paired 95% CI covers it in about 95% of studies (the
    # percentile bootstrap undercovers a little at n = 12). True difference 0: Wilcoxon at
    # the 5% level rejects in about 5% of studies.
    rng = np.random.default_rng(99)
    covered = rejected = 0
    for study in range(200):
        shared = rng.normal(50.0, 20.0, size=N_PAIRED)
        b = shared + rng.normal(0.0, 0.5, size=N_PAIRED)
        a = shared + TRUE_DIFFERENCE + rng.normal(0.0, 0.5, size=N_PAIRED)
        null = shared + rng.normal(0.0, 0.5, size=N_PAIRED)
        (ab,) = paired_comparisons(_synthetic_runs(a, b), FINAL, seed=study, reps=300)
        covered += ab.low <= TRUE_DIFFERENCE <= ab.high
        (bn,) = paired_comparisons(_synthetic_runs(null, b), FINAL, seed=study, reps=50)
        rejected += bn.p_value < 0.05
    assert 0.85 <= covered / 200 <= 0.99
    assert rejected / 200 <= 0.10


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"b_crn": False}, "common random numbers off"),
        ({"b_root": 1}, "different seeding roots"),
    ],
)
def test_unpaired_runs_fall_back_to_unpaired_ci(
    tmp_path: Path, kwargs: dict[str, object], reason: str
) -> None:
    finals = paired_sweep(tmp_path, **kwargs)  # type: ignore[arg-type]
    rep = write_report([tmp_path], reps=500)
    ab = _comparison(rep.comparisons, "a", "b")
    assert not ab.paired and reason in ab.note
    assert np.isnan(ab.p_value) and np.isnan(ab.correlation)
    expected = bootstrap.unpaired_bootstrap_ci(
        finals["a"],
        finals["b"],
        stats.mean,
        reps=500,
        seed=statistic_rng(0, "paired", "E", "a", "b"),
    )
    assert (ab.difference, ab.low, ab.high) == expected
    assert f"E, a − b: not paired ({reason}" in rep.text
    # a and c stay paired, and only paired tests enter the Holm family.
    assert _comparison(rep.comparisons, "a", "c").paired
    assert "Holm p (1 tests)" in rep.text


def test_partial_pairing_uses_matched_replicates(tmp_path: Path) -> None:
    for r in range(5):
        write_job(tmp_path, "a", "E", r, 10.0 + r)
    for r in range(4):
        write_job(tmp_path, "b", "E", r, 8.0 + r)
    (ab,) = paired_comparisons(load_runs([tmp_path]), FINAL, reps=200)
    assert ab.paired and ab.n_pairs == 4 and ab.difference == 2.0
    assert ab.note == "1 run(s) without a partner left out"


def test_match_pairs_rule(tmp_path: Path) -> None:
    def run(rep: int, root: int = 0, crn: bool | None = True) -> Run:
        return Run(
            tmp_path, tmp_path / f"r{rep}-{root}", "completed", "x", "E", rep, root, crn,
            None, values={FINAL: 1.0},
        )  # fmt: skip

    pairs, why = match_pairs([run(0), run(1), run(2, crn=False)], [run(1), run(2), run(0, 1)])
    assert [(p.replicate, q.replicate) for p, q in pairs] == [(1, 1)] and why == ""
    assert match_pairs([run(0, crn=None)], [run(0, crn=None)]) == ([], "no seeds.json")
    assert match_pairs([run(0)], [run(1)]) == ([], "no replicate index in common")


# -------------------------------------------------------------------------- n and missing jobs


def test_failed_incomplete_and_missing_jobs_are_counted_and_listed(tmp_path: Path) -> None:
    for r in range(3):
        write_job(tmp_path, "a", "E", r, 10.0 * (r + 1))
    write_job(tmp_path, "a", "E", 3, status="failed")
    write_job(tmp_path, "b", "E", 0, 5.0)
    write_job(tmp_path, "b", "E", 1, 7.0)
    write_job(tmp_path, "b", "E", 2, status="incomplete")
    # b / E / replicate 3 never started: no directory at all.
    rep = write_report([tmp_path], reps=200)
    cells = {c.group: c for c in rep.groups}
    a, b = cells["a"], cells["b"]
    assert (a.completed, a.failed, a.incomplete, a.missing) == (3, 1, 0, 0)
    assert (b.completed, b.failed, b.incomplete, b.missing) == (2, 0, 1, 1)
    assert (a.mean, a.median, a.iqm) == (20.0, 20.0, 20.0)
    assert a.std == 10.0
    assert a.iqm_ci[0] <= 20.0 <= a.iqm_ci[1]
    text = rep.text
    assert "| a     | E   | 3 | 1      | 0          | 0       |" in text
    assert "| b     | E   | 2 | 0      | 1          | 1       |" in text
    assert "7 jobs: 5 completed, 1 failed, 1 incomplete; 1 missing" in text
    assert "- a on E, replicate 3: RuntimeError: boom (`agent=a,env=E,seed=3`)" in text
    assert "- b on E, replicate 2 (`agent=b,env=E,seed=2`)" in text.split("Incomplete")[1]
    assert "- b on E, replicate 3" in text.split("Missing (no job directory")[1]


def test_a_single_run_has_no_ci(tmp_path: Path) -> None:
    write_job(tmp_path, "a", "E", 0, 3.0)
    (cell,) = cell_stats(load_runs([tmp_path]), reps=100)
    assert (cell.completed, cell.mean, cell.iqm) == (1, 3.0, 3.0)
    assert np.isnan(cell.std) and all(np.isnan(cell.iqm_ci))


def test_sweep_where_every_job_failed_still_reports(tmp_path: Path) -> None:
    import pandas as pd

    write_job(tmp_path, "a", "E", 0, status="failed")
    write_job(tmp_path, "b", "E", 0, status="failed")
    rep = write_report([tmp_path], reps=100)
    assert rep.aggregates == () and rep.comparisons == () and rep.plots == ()
    assert "No aggregate" in rep.text and "No completed run logged evaluations." in rep.text
    assert "Failed (the traceback is in the job's error.txt):" in rep.text
    # The tidy table holds the failed jobs' evaluations, marked as such.
    assert set(pd.read_parquet(rep.parquet)["status"]) == {"failed"}


# ------------------------------------------------------------------------- across environments


def test_normalised_aggregates_and_excluded_env(tmp_path: Path) -> None:
    # Env E: baselines 0 / 100. Env F: none (left out with a note). Env G: baselines 10 / 20.
    for r, (e, g) in enumerate([(20.0, 12.0), (40.0, 14.0), (60.0, 20.0), (80.0, 10.0)]):
        write_job(tmp_path, "a", "E", r, e)
        write_job(tmp_path, "a", "G", r, g, baselines=(10.0, 20.0))
        write_job(tmp_path, "a", "F", r, 1.0, baselines=(None, None))
        write_job(tmp_path, "b", "E", r, e / 2)
        write_job(tmp_path, "b", "G", r, 10.0, baselines=(10.0, 20.0))
    rep = write_report([tmp_path], reps=300)
    # Normalised a: E -> .2 .4 .6 .8; G -> .2 .4 1 0. Sorted: 0 .2 .2 .4 .4 .6 .8 1.
    a = {x.group: x for x in rep.aggregates}["a"]
    assert (a.runs, a.envs) == (4, 2)
    assert a.values["IQM"][0] == pytest.approx(0.4)  # mean(.2, .4, .4, .6)
    assert a.values["mean"][0] == pytest.approx(0.45)
    assert a.values["median"][0] == pytest.approx(0.4)
    assert a.values["optimality gap"][0] == pytest.approx(0.55)
    for point, low, high in a.values.values():
        assert low <= point <= high
    # b: E -> .1 .2 .3 .4, G -> 0: always below a's run on G? a > b except a's 0 on G (a tie).
    (poi,) = rep.improvements
    assert (poi.x, poi.y) == ("a", "b")
    # E: a beats b in 16 - (pairs with a <= b) pairs: b = .1 .2 .3 .4 vs a = .2 .4 .6 .8.
    expected_e = np.mean([[1.0 if x > y else 0.5 if x == y else 0.0 for y in (.1, .2, .3, .4)]
                          for x in (.2, .4, .6, .8)])  # fmt: skip
    expected_g = (3 * 1.0 + 0.5) / 4
    assert poi.point == pytest.approx((expected_e + expected_g) / 2)
    assert poi.low <= poi.point <= poi.high
    assert (
        "| F   | –      | –         | no: no random_score / reference_score in the env config |"
        in (rep.text)
    )
    assert "Aggregates over 2 env(s) (E, G)" in rep.text


def test_unequal_run_counts_use_lowest_replicates_with_a_note(tmp_path: Path) -> None:
    for r in range(3):
        write_job(tmp_path, "a", "E", r, 10.0 * r)
    for r in range(2):
        write_job(tmp_path, "a", "G", r, 50.0)
    write_job(tmp_path, "a", "G", 2, status="failed")
    matrices = normalized_scores(load_runs([tmp_path]), {"E": BASELINES, "G": BASELINES}, FINAL)
    np.testing.assert_array_equal(matrices.scores["a"], [[0.0, 0.5], [0.1, 0.5]])
    (note,) = matrices.notes
    assert "a completed unequal run counts (E: 3, G: 2)" in note and "first 2 runs" in note


def test_env_missing_an_agent_is_left_out_of_the_aggregate(tmp_path: Path) -> None:
    write_job(tmp_path, "a", "E", 0, 1.0)
    write_job(tmp_path, "a", "G", 0, 1.0)
    write_job(tmp_path, "b", "E", 0, 1.0)
    matrices = normalized_scores(load_runs([tmp_path]), {"E": BASELINES, "G": BASELINES}, FINAL)
    assert matrices.envs == ("E",)
    assert matrices.notes == ("G left out: no completed run of b.",)


def test_a_sweep_of_presets_is_not_crossed_into_phantom_cells(tmp_path: Path) -> None:
    """Each agent on its own env (+preset=...): no (a, G) or (b, E) cell, nothing missing."""
    for r in range(2):
        write_job(tmp_path, "a", "E", r, 1.0 + r)
        write_job(tmp_path, "b", "G", r, 3.0 + r)
    write_job(tmp_path, "b", "G", 2, 5.0)
    runs = load_runs([tmp_path])
    assert missing_runs(runs) == [("a", "E", 2)]  # a missing replicate of a real cell
    cells = cell_stats(runs, missing_runs(runs), reps=100)
    assert [(c.group, c.task, c.completed, c.missing) for c in cells] == [
        ("a", "E", 2, 1),
        ("b", "G", 3, 0),
    ]


# ------------------------------------------------------------------------- identity of agents


def test_agents_sharing_a_name_are_told_apart_by_their_config(tmp_path: Path) -> None:
    for r in range(2):
        write_job(tmp_path, "ppo", "E", r, 1.0, agent_config={"name": "ppo", "lr": 0.1})
        write_job(tmp_path, "ppo", "E", r, 2.0, agent_config={"name": "ppo", "lr": 0.01})
    write_job(tmp_path, "ppo", "E", 2, status="failed", agent_config={"name": "ppo", "lr": 0.1})
    runs = load_runs([tmp_path])
    assert sorted({r.group for r in runs}) == ["ppo[lr=0.01]", "ppo[lr=0.1]"]
    cells = {c.group: c for c in cell_stats(runs, missing_runs(runs), reps=100)}
    assert (cells["ppo[lr=0.1]"].completed, cells["ppo[lr=0.1]"].failed) == (2, 1)
    assert cells["ppo[lr=0.01]"].mean == 2.0
    assert cells["ppo[lr=0.01]"].missing == 1  # replicate 2 was never run for lr=0.01


def test_an_option_missing_from_older_results_is_not_a_difference(tmp_path: Path) -> None:
    """Results written before an option existed lack its key; it does not label agents."""
    write_job(tmp_path, "ppo", "E", 0, 1.0, agent_config={"name": "ppo", "lr": 0.1})
    new = {"name": "ppo", "lr": 0.01, "use_sde": True}
    write_job(tmp_path, "ppo", "E", 0, 2.0, agent_config=new)
    runs = load_runs([tmp_path])
    assert sorted({r.group for r in runs}) == ["ppo[lr=0.01]", "ppo[lr=0.1]"]


def test_agents_trained_for_different_budgets_are_different_agents(tmp_path: Path) -> None:
    write_job(tmp_path, "ppo", "E", 0, 1.0)
    write_job(tmp_path, "ppo", "E", 0, 2.0, train_steps=5000)
    write_job(tmp_path, "a2c", "E", 0, 3.0)
    runs, superseded, unplaced = deduplicate(load_runs([tmp_path]))
    assert superseded == unplaced == []  # same replicate, but not the same job
    assert sorted(r.group for r in runs) == [
        "a2c",
        "ppo[train.total_steps=1000]",
        "ppo[train.total_steps=5000]",
    ]


def test_several_sweep_dirs_count_each_job_once(tmp_path: Path) -> None:
    first, second, out = tmp_path / "s1", tmp_path / "s2", tmp_path / "out"
    write_job(first, "a", "E", 0, 1.0)
    write_job(first, "a", "E", 1, status="failed")
    write_job(second, "a", "E", 1, 3.0)  # the failed job, completed by a later sweep
    write_job(second, "a", "E", 2, 5.0)
    rep = write_report([first, second, first], out)
    assert rep.markdown == out.resolve() / "report.md"
    (cell,) = rep.groups
    assert (cell.completed, cell.failed, cell.mean) == (3, 0, 3.0)
    assert f"`{first.resolve()}`, `{second.resolve()}`" in rep.text
    assert "The same job found again" in rep.text and "counted once" in rep.text
    assert "- `../s1/agent=a,env=E,seed=1` (failed)" in rep.text
    assert not (first / "report.md").exists()


# ============================================================================================
# Reproducibility, the tidy table, the CLI


def test_statistic_rng_is_keyed_and_reproducible() -> None:
    a = statistic_rng(0, "cell", "ppo", "E").integers(0, 1 << 30, size=4)
    b = statistic_rng(0, "cell", "ppo", "E").integers(0, 1 << 30, size=4)
    c = statistic_rng(0, "cell", "a2c", "E").integers(0, 1 << 30, size=4)
    d = statistic_rng(1, "cell", "ppo", "E").integers(0, 1 << 30, size=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c) and not np.array_equal(a, d)


def test_report_is_byte_identical_across_runs(tmp_path: Path) -> None:
    paired_sweep(tmp_path)
    write_job(tmp_path, "a", "E", N_PAIRED, status="failed")
    first = write_report([tmp_path], reps=300)
    first_bytes = first.markdown.read_bytes()
    second = write_report([tmp_path], reps=300)
    assert second.markdown.read_bytes() == first_bytes
    assert first.csv.read_bytes() == second.csv.read_bytes()
    # Another seed moves the CIs, never the point estimates.
    other = write_report([tmp_path], tmp_path / "other", seed=1, reps=300)
    assert other.text != first.text
    assert [c.mean for c in other.groups] == [c.mean for c in first.groups]
    assert [c.iqm_ci for c in other.groups] != [c.iqm_ci for c in first.groups]


def test_adding_an_agent_leaves_the_others_numbers_alone(tmp_path: Path) -> None:
    finals = paired_sweep(tmp_path)

    def numbers() -> tuple[list[GroupStats], list[Comparison]]:
        runs = load_runs([tmp_path])
        return cell_stats(runs, reps=200), paired_comparisons(runs, FINAL, reps=200)

    cells, comparisons = numbers()
    for r in range(N_PAIRED):
        write_job(tmp_path, "d", "E", r, float(finals["a"][r]) + 1.0)
    more_cells, more_comparisons = numbers()
    assert more_cells[:3] == cells
    ab, more_ab = _comparison(comparisons, "a", "b"), _comparison(more_comparisons, "a", "b")
    assert (more_ab.low, more_ab.high, more_ab.p_value) == (ab.low, ab.high, ab.p_value)
    assert more_ab.p_holm >= ab.p_holm  # only the family grew


def test_tidy_table_reads_back_with_one_pandas_call(tmp_path: Path) -> None:
    import pandas as pd

    write_job(tmp_path, "a", "E", 0, 40.0, curve=[(0, 0.0), (100, 20.0), (250, 40.0)])
    write_job(tmp_path, "a", "E", 1, 60.0)
    write_job(tmp_path, "b", "E", 0, status="failed", curve=[(0, 5.0), (100, 6.0)])
    rep = write_report([tmp_path], reps=100)
    frame = pd.read_parquet(rep.parquet)
    assert list(frame.columns) == list(AGENT_COLUMNS)
    assert len(frame) == 3 + 3 + 2  # one row per (job, evaluation step)
    row = frame[(frame["agent"] == "a") & (frame["replicate"] == 0) & (frame["step"] == 250)]
    assert row["return"].item() == 40.0
    assert row["normalized_return"].item() == 0.4
    assert row["wall_time"].item() == 1.0
    assert row["status"].item() == "completed"
    assert bool(row["common_random_numbers"].item()) is True
    assert row["seed_fingerprint"].item() == identity_digest(
        json.loads((tmp_path / "agent=a,env=E,seed=0" / "seeds.json").read_text())["seeds"]
    )
    assert set(frame.loc[frame["agent"] == "b", "status"]) == {"failed"}
    from_csv = pd.read_csv(rep.csv)
    assert list(from_csv.columns) == list(AGENT_COLUMNS)
    np.testing.assert_array_equal(from_csv["return"], frame["return"])
    np.testing.assert_array_equal(from_csv["step"], frame["step"])
    assert list(from_csv["job"]) == list(frame["job"])


def test_main_writes_the_report_and_rejects_bad_dirs(tmp_path: Path, capsys) -> None:
    write_job(tmp_path, "a", "E", 0, 1.0)
    write_job(tmp_path, "b", "E", 0, 2.0)
    assert main([str(tmp_path), "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert f"Report: {tmp_path.resolve() / 'report.md'}" in out
    assert (tmp_path / "report_learning_curves.png").is_file()
    assert main([str(tmp_path / "nowhere")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(empty)]) == 2
    assert "no job directory" in capsys.readouterr().err


# ============================================================================================
# A real sweep, end to end (about 10 s of training on 2 cores)


def _png(path: Path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_of_a_real_sweep(workdir: Path) -> None:
    import pandas as pd

    args = ["-m", "agent=a2c,ppo", "seed=range(2)", "env=cartpole,acrobot", "n_jobs=2"]
    budget = ["train.total_steps=1024", "eval.every_steps=512", "eval.episodes=2"]
    proc = run_cli([*args, *budget], workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = workdir / "multirun" / "default"
    command = [sys.executable, "-m", "rlsweep.report", str(sweep)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    text = (sweep / "report.md").read_text()
    for heading in (
        "## Final return per agent and environment",
        "## Across environments (normalised scores)",
        "### Probability of improvement",
        "## Paired comparisons",
        "## Learning curves",
        "## Failed, incomplete and missing jobs",
    ):
        assert heading in text
    assert (
        "8 jobs: 8 completed, 0 failed, 0 incomplete; 0 missing from the grid (4 agent-env cells x 2 replicates)"
        in text
    )
    # Common random numbers are the default: every comparison is paired.
    assert "| Acrobot-v1  | a2c − ppo | paired |" in text
    assert "| CartPole-v1 | a2c − ppo | paired |" in text
    for name in (CURVES_PNG, PROFILES_PNG, IMPROVEMENT_PNG):
        assert _png(sweep / name)
    frame = pd.read_parquet(sweep / EVALUATIONS_PARQUET)
    assert frame.groupby(["agent", "env"])["replicate"].nunique().to_dict() == {
        (a, e): 2 for a in ("a2c", "ppo") for e in ("Acrobot-v1", "CartPole-v1")
    }
    for job, rows in frame.groupby("job"):
        metrics = pd.read_csv(sweep / str(job) / "metrics.csv")
        np.testing.assert_array_equal(rows["step"], metrics["step"])
        np.testing.assert_array_equal(rows["return"], metrics["eval_return_mean"])
    # Same sweep, same report, byte for byte (in-process this time).
    again = write_report([sweep])
    assert again.markdown.read_text() == text
