"""Plots: files written at the expected size, and the drawn data checked by hand: a figure
draws exactly the bands and intervals it is given."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from rlsweep import stats
from rlsweep.report import plots
from rlsweep.report.analysis import ScoreMatrices, improvement_stats
from rlsweep.report.curves import Curves, aggregate_curves, common_grid, curve_bands, profile_bands
from rlsweep.report.files import write_png

if TYPE_CHECKING:  # matplotlib is imported by the tests that draw, not at collection
    from matplotlib.figure import Figure


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) in pixels, read from the PNG header."""
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def curve(steps: list[float], returns: list[float]) -> tuple[np.ndarray, np.ndarray]:
    return np.array(steps), np.array(returns)


def draw_curves(
    curves: Curves, path: Path, *, title: str | None = None, seed: int = 0, reps: int = 2000
) -> Figure:
    """The learning curves' figure of ``curves`` (bands seeded by ``seed``), written to ``path``."""
    fig = plots.learning_curves(curve_bands(curves, seed=seed, reps=reps), title=title)
    write_png(fig, path)
    return fig


# Four replicates on one grid. Per step, sorted values and their IQM (mean of the middle two):
# step 0: 0 2 4 10 -> 3;  step 10: 1 2 5 8 -> 3.5;  step 20: 1 2 2 3 -> 2.
FOUR = [
    curve([0, 10, 20], [0, 1, 2]),
    curve([0, 10, 20], [10, 5, 3]),
    curve([0, 10, 20], [2, 2, 2]),
    curve([0, 10, 20], [4, 8, 1]),
]


def test_learning_curves_iqm_line_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "curves.png"
    fig = draw_curves({"CartPole-v1": {"ppo": FOUR}}, path, reps=300)
    from matplotlib.figure import Figure

    assert isinstance(fig, Figure)
    assert path.is_file()
    assert png_size(path) == (750, 600)  # one panel: 5 x (3.5 + 0.5) inches at 150 dpi
    ax = fig.axes[0]
    (line,) = ax.get_lines()
    np.testing.assert_array_equal(line.get_xdata(), [0, 10, 20])
    np.testing.assert_array_equal(line.get_ydata(), [3.0, 3.5, 2.0])
    assert line.get_label() == "ppo"
    assert ax.get_title() == "CartPole-v1"
    assert ax.get_xlabel() == "environment steps"
    assert ax.get_ylabel() == "evaluation return (IQM)"
    # The band is the pointwise bootstrap CI and brackets the line.
    band = aggregate_curves(FOUR, reps=300, seed=np.random.default_rng(0))
    assert band.low is not None and band.high is not None
    assert np.all(band.low <= band.iqm) and np.all(band.iqm <= band.high)
    assert np.all(band.low >= 0.0) and np.all(band.high <= 10.0)
    (poly,) = ax.collections
    ys = np.asarray(poly.get_paths()[0].vertices)[:, 1]
    assert ys.min() == pytest.approx(band.low.min())
    assert ys.max() == pytest.approx(band.high.max())


def test_aggregate_curves_ragged_grids() -> None:
    # A: y = x on 0..30; B: constant 1 on 5..25. Common range [5, 25]; the grid is the union
    # of steps inside it; A is interpolated at 5, 15, 25. Two replicates: IQM = mean.
    a = curve([0, 10, 20, 30], [0, 10, 20, 30])
    b = curve([5, 15, 25], [1, 1, 1])
    np.testing.assert_array_equal(common_grid([a, b]), [5, 10, 15, 20, 25])
    band = aggregate_curves([a, b], reps=200)
    np.testing.assert_array_equal(band.steps, [5, 10, 15, 20, 25])
    np.testing.assert_allclose(band.iqm, [3.0, 5.5, 8.0, 10.5, 13.0])
    assert band.replicates == 2
    assert band.low is not None and band.high is not None
    # With two replicates every resample's mean lies between them.
    np.testing.assert_array_less(band.low - 1e-12, band.iqm)
    assert np.all(band.low >= 1.0 - 1e-12) and np.all(band.high <= band.steps + 1e-12)


def test_common_grid_caps_points_and_sorts_input() -> None:
    a = curve(list(range(0, 1000, 3)), [0.0] * len(range(0, 1000, 3)))
    b = curve(list(range(1, 1001, 7)), [0.0] * len(range(1, 1001, 7)))
    grid = common_grid([a, b], max_points=50)
    # Common range: [max(0, 1), min(999, 995)].
    np.testing.assert_allclose(grid, np.linspace(1, 995, 50))
    # Unsorted steps are sorted together with their returns.
    band = aggregate_curves([curve([20, 0, 10], [2, 0, 1])])
    np.testing.assert_array_equal(band.steps, [0, 10, 20])
    np.testing.assert_array_equal(band.iqm, [0, 1, 2])


def test_curves_that_do_not_overlap_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="do not overlap"):
        curve_bands({"env": {"ppo": [curve([0, 1], [0, 0]), curve([5, 6], [0, 0])]}})
    with pytest.raises(ValueError, match="equal length"):
        aggregate_curves([curve([0, 1, 2], [0, 0])])
    with pytest.raises(ValueError, match="no curves"):
        curve_bands({})


def test_single_replicate_draws_line_without_band(tmp_path: Path) -> None:
    path = tmp_path / "single.png"
    fig = draw_curves({"env": {"ppo": [curve([0, 500, 1000], [1, 4, 2])]}}, path)
    assert path.is_file()
    ax = fig.axes[0]
    assert len(ax.collections) == 0
    (line,) = ax.get_lines()
    np.testing.assert_array_equal(line.get_ydata(), [1, 4, 2])


def test_panels_wrap_and_agent_colours_are_consistent(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)

    def reps(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
        return [curve([0, 1000, 2000], list(rng.normal(size=3))) for _ in range(n)]

    curves = {
        "env-a": {"ppo": reps(3), "a2c": reps(3)},
        "env-b": {"a2c": reps(3), "ppo": reps(3)},  # other order: same colours
        "env-c": {"ppo": reps(1)},
        "env-d": {"a2c": reps(2)},
    }
    path = tmp_path / "grid.png"
    fig = draw_curves(curves, path, title="sweep", reps=100)
    # 4 envs wrap to 3 columns x 2 rows; height 2 x 3.5 + legend 0.5 + title 0.5 inches.
    assert png_size(path) == (3 * 750, 8 * 150)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["env-a", "env-b", "env-c", "env-d"]
    colours: dict[str, set[str]] = {}
    for ax in visible:
        for line in ax.get_lines():
            colours.setdefault(str(line.get_label()), set()).add(str(line.get_color()))
    assert colours == {"ppo": {plots.PALETTE[0]}, "a2c": {plots.PALETTE[1]}}
    legend_labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend_labels == ["ppo", "a2c"]


def test_learning_curves_reproducible(tmp_path: Path) -> None:
    curves = {"env": {"ppo": FOUR}}
    first = draw_curves(curves, tmp_path / "a.png", seed=3, reps=200)
    second = draw_curves(curves, tmp_path / "b.png", seed=3, reps=200)
    paths = [f.axes[0].collections[0].get_paths()[0].vertices for f in (first, second)]
    np.testing.assert_array_equal(paths[0], paths[1])
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


def test_format_steps() -> None:
    assert plots.format_steps(0) == "0"
    assert plots.format_steps(500) == "500"
    assert plots.format_steps(250_000) == "250k"
    assert plots.format_steps(1_500_000) == "1.5M"
    assert plots.format_steps(2e9) == "2G"


SCORES = {
    "ppo": np.array([[0.1, 0.5], [0.3, 0.9], [0.6, 0.8]]),
    "a2c": np.array([[0.0, 0.2], [0.2, 0.4], [0.1, 0.3]]),
}


def test_performance_profile_plot(tmp_path: Path) -> None:
    path = tmp_path / "profile.png"
    taus = np.linspace(0.0, 1.0, 11)
    profiles = profile_bands(SCORES, taus=taus, reps=200)
    fig = plots.performance_profile_plot(profiles)
    write_png(fig, path)
    assert png_size(path) == (900, 600)
    ax = fig.axes[0]
    lines = {str(line.get_label()): line for line in ax.get_lines()}
    assert set(lines) == {"ppo", "a2c"}
    for name, line in lines.items():
        np.testing.assert_array_equal(line.get_xdata(), taus)
        np.testing.assert_array_equal(
            line.get_ydata(), stats.performance_profile(SCORES[name], taus)
        )
    assert len(ax.collections) == 2  # one CI band per agent
    for poly, (point, low, high) in zip(ax.collections, profiles.bands.values(), strict=True):
        ys = np.asarray(poly.get_paths()[0].vertices)[:, 1]  # the band drawn is the one given
        assert ys.min() == pytest.approx(low.min()) and ys.max() == pytest.approx(high.max())
        assert np.all(low <= point) and np.all(point <= high)


def test_probability_of_improvement_plot(tmp_path: Path) -> None:
    path = tmp_path / "poi.png"
    scores = {**SCORES, "dqn": SCORES["a2c"] + 0.05}
    improvements = improvement_stats(ScoreMatrices(("t0", "t1"), scores, ()), reps=200)
    fig = plots.probability_of_improvement_plot(improvements)
    write_png(fig, path)
    assert path.is_file()
    width, height = png_size(path)
    assert width == 900 and height == round((1.2 + 0.5 * 3) * 150)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["P(ppo > a2c)", "P(ppo > dqn)", "P(a2c > dqn)"]
    points = [float(np.asarray(line.get_xdata())[0]) for line in ax.get_lines()[:3]]
    expected = [
        stats.probability_of_improvement(scores[a], scores[b])
        for a, b in [("ppo", "a2c"), ("ppo", "dqn"), ("a2c", "dqn")]
    ]
    assert points == pytest.approx(expected)
    # The interval drawn is the one given, to the bit.
    from matplotlib.collections import LineCollection

    for p, bar in zip(improvements, ax.collections, strict=True):
        assert isinstance(bar, LineCollection)
        (segment,) = bar.get_segments()
        assert (segment[0][0], segment[1][0]) == (p.low, p.high)
    fig = plots.probability_of_improvement_plot(improvements, pairs=[("a2c", "dqn")])
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["P(a2c > dqn)"]
    with pytest.raises(ValueError, match="unknown agent"):
        plots.probability_of_improvement_plot(improvements, pairs=[("ppo", "sac")])
    with pytest.raises(ValueError, match="at least one pair"):
        plots.probability_of_improvement_plot([])


def test_long_agent_labels_are_wrapped_and_get_fewer_legend_columns() -> None:
    short, ncols = plots.legend_layout(["ppo", "a2c", "dqn"])
    assert short == ["ppo", "a2c", "dqn"] and ncols == 3
    long = "ppo[" + ", ".join(f"key_{i}={i}" for i in range(12)) + "]"
    wrapped, ncols = plots.legend_layout([long, "a2c"])
    assert all(len(line) <= 60 for line in wrapped[0].split("\n"))
    assert wrapped[0].replace("\n", " ") == long and ncols == 2
