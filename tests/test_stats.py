"""Statistics on tiny inputs whose answers can be checked by hand."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import numpy as np
import pytest

from rlsweep import stats
from rlsweep.stats import bootstrap

RLIABLE_CASE = np.array([[1.0, 2.0], [2.0, 2.0], [1.0, 1.0], [2.0, 1.0]])


# ---------------------------------------------------------------------------- aggregates


@pytest.mark.parametrize("aggregate", [stats.mean, stats.median, stats.iqm])
def test_rliable_case_is_one_and_a_half(aggregate) -> None:
    assert aggregate(RLIABLE_CASE) == 1.5


def test_iqm_of_eight_values_by_hand() -> None:
    # Sorted: 1 2 3 4 5 6 7 100; drop int(8/4) = 2 at each end -> mean(3, 4, 5, 6) = 4.5.
    values = np.array([7.0, 100.0, 1.0, 5.0, 3.0, 2.0, 6.0, 4.0])
    assert stats.iqm(values) == 4.5
    assert stats.iqm(values.reshape(4, 2)) == 4.5  # over all entries of a matrix


def test_iqm_small_samples_is_the_mean() -> None:
    # n < 4 cuts nothing (int(0.25 n) = 0).
    assert stats.iqm([1.0, 2.0, 6.0]) == 3.0


def test_iqm_matches_scipy_trim_mean() -> None:
    import scipy.stats as scipy_stats  # the cross-checks: in the test extra, never skipped

    rng = np.random.default_rng(5)
    for n in (4, 5, 9, 10, 11, 37):
        x = rng.normal(size=n)
        assert stats.iqm(x) == pytest.approx(scipy_stats.trim_mean(x, 0.25), abs=1e-12)


def test_median_odd_and_even() -> None:
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5


def test_optimality_gap_by_hand() -> None:
    # gamma = 1: max(1 - x, 0) = 0.5, 0, 0, 1 -> mean 0.375.
    x = np.array([[0.5, 1.0], [1.5, 0.0]])
    assert stats.optimality_gap(x) == 0.375
    # gamma = 2: 1.5, 1, 0.5, 2 -> mean 1.25.
    assert stats.optimality_gap(x, gamma=2.0) == 1.25


def test_aggregates_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="empty"):
        stats.mean(np.empty((0, 3)))
    with pytest.raises(ValueError, match="shape"):
        stats.mean(np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="NaN"):
        stats.iqm([1.0, np.nan])


def test_normalize_scores() -> None:
    x = np.array([[0.0, 50.0], [100.0, 25.0]])
    out = stats.normalize_scores(x, [0.0, 25.0], [100.0, 75.0])  # per-task baselines
    np.testing.assert_array_equal(out, [[0.0, 0.5], [1.0, 0.0]])
    assert stats.normalize_scores(5.0, 0.0, 10.0) == 0.5
    with pytest.raises(ValueError, match="differ"):
        stats.normalize_scores(x, 1.0, 1.0)


# ---------------------------------------------------------------------------- bootstrap


def _data(seed: int = 0, shape: tuple[int, ...] = (10, 3)) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


def test_bootstrap_reproducible_bitwise() -> None:
    x = _data()
    for statistic in (stats.mean, stats.iqm, stats.median):
        first = bootstrap.bootstrap_ci(x, statistic, reps=500, seed=7)
        second = bootstrap.bootstrap_ci(x, statistic, reps=500, seed=7)
        assert first == second
        # A generator built from the same seed gives the same draws.
        assert (
            bootstrap.bootstrap_ci(x, statistic, reps=500, seed=np.random.default_rng(7)) == first
        )


def test_bootstrap_other_seed_differs() -> None:
    x = _data()
    a = bootstrap.bootstrap_ci(x, stats.iqm, reps=500, seed=1)
    b = bootstrap.bootstrap_ci(x, stats.iqm, reps=500, seed=2)
    assert a[0] == b[0]  # same point estimate
    assert (a[1], a[2]) != (b[1], b[2])


def test_bootstrap_contains_point_and_is_ordered() -> None:
    x = _data(3)
    for statistic in (stats.mean, stats.median, stats.iqm, stats.optimality_gap):
        point, low, high = bootstrap.bootstrap_ci(x, statistic, reps=1000)
        assert low <= point <= high
        assert low < high
    assert bootstrap.bootstrap_ci(x, stats.mean)[0] == stats.mean(x)


def test_bootstrap_degenerate_data_has_zero_width() -> None:
    x = np.full((6, 2), 3.0)
    assert bootstrap.bootstrap_ci(x, stats.iqm, reps=200) == (3.0, 3.0, 3.0)
    assert bootstrap.bootstrap_ci(x[:, 0], stats.mean, reps=200) == (3.0, 3.0, 3.0)


def test_bootstrap_never_mixes_tasks() -> None:
    # Task 0 scores all 0 and task 1 all 1: every stratified resample keeps four of each, so
    # the mean is always 0.5. Pooling runs across tasks would make it vary.
    x = np.array([[0.0, 1.0]] * 4)
    assert bootstrap.bootstrap_ci(x, stats.mean, reps=500) == (0.5, 0.5, 0.5)

    # The same through the per-resample (non-vectorised) path, looking at every resample.
    x = np.array([[0.0, 10.0], [1.0, 11.0], [2.0, 12.0], [3.0, 13.0]])

    def check_columns(sample: np.ndarray) -> float:
        assert sample.shape == x.shape
        assert set(sample[:, 0]) <= {0.0, 1.0, 2.0, 3.0}
        assert set(sample[:, 1]) <= {10.0, 11.0, 12.0, 13.0}
        return float(sample.mean())

    bootstrap.bootstrap_ci(x, check_columns, reps=200)


def _call(statistic: Callable[[np.ndarray], float], sample: np.ndarray) -> float:
    """A statistic bootstrap_ci does not recognise, so it takes the per-resample path."""
    return statistic(sample)


def test_bootstrap_vectorised_matches_per_resample_loop() -> None:
    x = _data(4, (7, 3))
    for statistic in (stats.mean, stats.median, stats.iqm):
        fast = bootstrap.bootstrap_ci(x, statistic, reps=300, seed=11)
        slow = bootstrap.bootstrap_ci(x, functools.partial(_call, statistic), reps=300, seed=11)
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)
    gap = functools.partial(stats.optimality_gap, gamma=0.3)
    fast = bootstrap.bootstrap_ci(x, gap, reps=300, seed=11)
    slow = bootstrap.bootstrap_ci(
        x, lambda s: stats.optimality_gap(s, gamma=0.3), reps=300, seed=11
    )
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)


def test_bootstrap_one_dimensional_is_plain_bootstrap() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    # A 1-D vector is one task: identical to the (runs, 1) matrix.
    assert bootstrap.bootstrap_ci(x, stats.mean, reps=300) == bootstrap.bootstrap_ci(
        x[:, None], stats.mean, reps=300
    )
    # Resampled values always come from x; the mean stays within [min, max].
    point, low, high = bootstrap.bootstrap_ci(x, stats.mean, reps=300)
    assert point == 4.0
    assert 1.0 <= low < 4.0 < high <= 10.0


def test_bootstrap_coverage_for_normal_samples() -> None:
    # Percentile intervals for a mean of 30 normals cover ~93%; over generator seeds 0-5 and
    # 2024 this test's hit rate ranged 0.91-0.965 (binomial noise of 200 trials is ~1.7%).
    rng = np.random.default_rng(1)
    true_mean = 1.0
    hits = 0
    for _ in range(200):
        sample = rng.normal(true_mean, 2.0, size=30)
        _, low, high = bootstrap.bootstrap_ci(sample, stats.mean, reps=500, seed=rng)
        hits += low <= true_mean <= high
    assert 0.90 <= hits / 200 <= 0.99


def test_bootstrap_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="confidence"):
        bootstrap.bootstrap_ci([1.0, 2.0], stats.mean, confidence=1.5)
    with pytest.raises(ValueError, match="reps"):
        bootstrap.bootstrap_ci([1.0, 2.0], stats.mean, reps=0)
    with pytest.raises(TypeError, match="seed"):
        bootstrap.bootstrap_ci([1.0, 2.0], stats.mean, seed=1.5)  # type: ignore[arg-type]


def test_pointwise_bootstrap_resamples_whole_rows() -> None:
    # Columns are exact copies of each other, so resampling whole rows gives identical intervals.
    column = np.array([0.0, 1.0, 5.0, 2.0, 8.0])
    x = np.stack([column, column, column], axis=1)
    point, low, high = bootstrap.pointwise_bootstrap_ci(x, stats.iqm, reps=400)
    assert point == pytest.approx([stats.iqm(column)] * 3)
    assert np.all(low == low[0]) and np.all(high == high[0])
    assert np.all(low <= point) and np.all(point <= high)
    # Vectorised and per-resample paths agree.
    other = np.random.default_rng(1).normal(size=(6, 4))
    fast = bootstrap.pointwise_bootstrap_ci(other, stats.iqm, reps=200, seed=3)
    slow = bootstrap.pointwise_bootstrap_ci(other, lambda c: stats.iqm(c), reps=200, seed=3)
    for f, s in zip(fast, slow, strict=True):
        np.testing.assert_allclose(f, s, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------- P(X > Y)


def _brute_force_poi(x: np.ndarray, y: np.ndarray) -> float:
    per_task = []
    for t in range(x.shape[1]):
        pairs = list(itertools.product(x[:, t], y[:, t]))
        wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs)
        per_task.append(wins / len(pairs))
    return float(np.mean(per_task))


def test_probability_of_improvement_hand_cases() -> None:
    x = np.array([[1.0, 5.0], [2.0, 6.0], [3.0, 7.0]])
    assert stats.probability_of_improvement(x, x) == 0.5
    assert stats.probability_of_improvement(x + 100.0, x) == 1.0
    assert stats.probability_of_improvement(x, x + 100.0) == 0.0
    # One task with ties: pairs (1,2) < (1,3) < (2,2) = (2,3) <  -> 0.5 / 4.
    assert stats.probability_of_improvement([1.0, 2.0], [2.0, 3.0]) == 0.125
    # Two tasks average: task 0 -> 1.0, task 1 -> 0.0.
    assert stats.probability_of_improvement([[2.0, 0.0]], [[1.0, 1.0]]) == 0.5


def test_probability_of_improvement_matches_brute_force() -> None:
    rng = np.random.default_rng(8)
    for nx, ny, tasks in [(3, 3, 1), (5, 4, 3), (2, 7, 2)]:
        x = rng.integers(0, 4, size=(nx, tasks)).astype(float)  # small integers: many ties
        y = rng.integers(0, 4, size=(ny, tasks)).astype(float)
        assert stats.probability_of_improvement(x, y) == pytest.approx(_brute_force_poi(x, y))
        assert stats.probability_of_improvement(x, y) + stats.probability_of_improvement(
            y, x
        ) == pytest.approx(1.0)


def test_probability_of_improvement_ci() -> None:
    rng = np.random.default_rng(9)
    x, y = rng.normal(0.5, 1.0, size=(8, 3)), rng.normal(0.0, 1.0, size=(8, 3))
    point, low, high = bootstrap.probability_of_improvement_ci(x, y, reps=500, seed=1)
    assert point == stats.probability_of_improvement(x, y)
    assert 0.0 <= low <= point <= high <= 1.0
    assert bootstrap.probability_of_improvement_ci(x, y, reps=500, seed=1) == (point, low, high)
    # Dominance survives every resample.
    assert bootstrap.probability_of_improvement_ci(x + 10.0, y, reps=200) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="same tasks"):
        stats.probability_of_improvement(x, y[:, :2])


# ---------------------------------------------------------------------------- profiles


def test_performance_profile_by_hand() -> None:
    x = np.array([[0.1, 0.5], [0.3, 0.9]])
    # Scores strictly above tau: 4, 3, 1, 0 of 4.
    profile = stats.performance_profile(x, [0.0, 0.2, 0.6, 1.0])
    np.testing.assert_array_equal(profile, [1.0, 0.75, 0.25, 0.0])
    # Strict inequality: a score equal to tau does not count.
    np.testing.assert_array_equal(stats.performance_profile(x, 0.5), [0.25])


def _fraction_above(sample: np.ndarray, tau: float) -> float:
    return float(np.mean(sample > tau))


def test_performance_profile_ci() -> None:
    x = _data(6, (10, 4))
    taus = np.linspace(-2.0, 2.0, 9)
    point, low, high = bootstrap.performance_profile_ci(x, taus, reps=400)
    np.testing.assert_array_equal(point, stats.performance_profile(x, taus))
    assert point.shape == low.shape == high.shape == (9,)
    assert np.all(low <= point) and np.all(point <= high)
    assert np.all(np.diff(point) <= 0)  # non-increasing in tau
    # Same per-tau values as a scalar bootstrap_ci with the matching statistic and seed.
    for k, tau in enumerate(taus):
        ref = bootstrap.bootstrap_ci(x, functools.partial(_fraction_above, tau=tau), reps=400)
        assert (low[k], high[k]) == pytest.approx(ref[1:])


# ---------------------------------------------------------------------------- paired analysis


def test_paired_differences() -> None:
    np.testing.assert_array_equal(stats.paired_differences([[3.0, 1.0]], [[1.0, 1.5]]), [[2, -0.5]])
    with pytest.raises(ValueError, match="same shape"):
        stats.paired_differences(np.ones((3, 2)), np.ones((4, 2)))


def test_paired_ci_contains_truth_and_beats_unpaired() -> None:
    rng = np.random.default_rng(42)
    runs, tasks, true_diff = 20, 3, 0.5
    shared = rng.normal(0.0, 2.0, size=(runs, tasks))  # e.g. the seed's luck, common to both
    a = shared + true_diff + rng.normal(0.0, 0.1, size=(runs, tasks))
    b = shared + rng.normal(0.0, 0.1, size=(runs, tasks))
    point, low, high = bootstrap.paired_bootstrap_ci(a, b, stats.mean, reps=1000)
    assert point == pytest.approx(stats.mean(a) - stats.mean(b))
    assert low <= true_diff <= high
    _, ulow, uhigh = bootstrap.unpaired_bootstrap_ci(a, b, stats.mean, reps=1000)
    assert ulow <= true_diff <= uhigh
    assert (high - low) < 0.25 * (uhigh - ulow)
    # For the mean, the paired CI is the bootstrap CI of the mean difference.
    d = stats.paired_differences(a, b)
    assert (low, high) == pytest.approx(bootstrap.bootstrap_ci(d, stats.mean, reps=1000)[1:])


def test_paired_ci_reproducible_and_shape_checked() -> None:
    a, b = _data(1), _data(2)
    first = bootstrap.paired_bootstrap_ci(a, b, stats.iqm, reps=300, seed=5)
    assert first == bootstrap.paired_bootstrap_ci(a, b, stats.iqm, reps=300, seed=5)
    with pytest.raises(ValueError, match="same shape"):
        bootstrap.paired_bootstrap_ci(a, b[:5], stats.iqm)


# ---------------------------------------------------------------------------- tests of significance


WILCOXON_EXACT_CASES = [
    [1.5, -0.3, 2.2, 0.8, 1.1],
    [0.2, -0.5, 1.3, -2.1, 0.7, 0.9, -0.4, 1.8],
    [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0],
    [0.3, 0.0, -1.2, 2.5, 0.0, 1.7, 0.9],  # zeros are dropped, the rest have no ties
]


@pytest.mark.parametrize("d", WILCOXON_EXACT_CASES)
def test_wilcoxon_exact_matches_scipy(d: list[float]) -> None:
    import scipy.stats as scipy_stats  # the cross-checks: in the test extra, never skipped

    expected = scipy_stats.wilcoxon(d, zero_method="wilcox", method="exact").pvalue
    assert stats.wilcoxon_signed_rank(d) == pytest.approx(expected, rel=1e-12)


def test_wilcoxon_exact_by_hand() -> None:
    # n = 3, all positive: W+ = 6 is the maximum, P(W+ >= 6) = 1/8, two-sided 1/4.
    assert stats.wilcoxon_signed_rank([1.0, 2.0, 3.0]) == 0.25


def test_wilcoxon_approximate_matches_scipy() -> None:
    import scipy.stats as scipy_stats  # the cross-checks: in the test extra, never skipped

    rng = np.random.default_rng(3)
    cases = [
        rng.normal(0.3, 1.0, size=40),  # n > 25
        np.round(rng.normal(0.5, 1.0, size=12), 1),  # ties: normal approximation
        np.array([1.0, 1.0, 2.0, -1.0, 3.0, 0.0, 2.0, -2.0, 4.0, 1.0]),  # ties and a zero
        rng.normal(-0.2, 1.0, size=60),
    ]
    for d in cases:
        expected = scipy_stats.wilcoxon(
            d, zero_method="wilcox", correction=True, method="asymptotic"
        ).pvalue
        assert stats.wilcoxon_signed_rank(d) == pytest.approx(expected, rel=1e-9)


def test_wilcoxon_all_zero_and_symmetric() -> None:
    assert stats.wilcoxon_signed_rank([0.0, 0.0]) == 1.0
    d = np.array([0.4, -1.3, 2.0, 0.1, -0.7])
    assert stats.wilcoxon_signed_rank(d) == stats.wilcoxon_signed_rank(-d)


def test_holm_by_hand() -> None:
    # Sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, max(0.04*1, 0.06) = 0.06.
    adjusted = stats.holm([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])
    # Capped at 1 and monotone.
    np.testing.assert_array_equal(stats.holm([0.5, 0.6]), [1.0, 1.0])
    np.testing.assert_array_equal(stats.holm([0.2]), [0.2])
    assert stats.holm([]).shape == (0,)
    with pytest.raises(ValueError):
        stats.holm([0.1, 1.2])
