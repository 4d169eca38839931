"""The report's figures: which there is data for, their titles and labels, their bands
(:mod:`rlsweep.report.curves`), drawn (:mod:`rlsweep.report.plots`) and written
(:mod:`rlsweep.report.files`). Every band comes from a Generator of
:func:`rlsweep.report.analysis.band_rng`; the probability of improvement is drawn from the
table's own intervals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsweep.report import plots
from rlsweep.report.analysis import ImprovementStats, ScoreMatrices, band_rng
from rlsweep.report.app_runs import AppRun
from rlsweep.report.curves import CurveBand, curve_bands, profile_bands
from rlsweep.report.files import (
    CURVES_PNG,
    IMPROVEMENT_PNG,
    PROFILES_PNG,
    SEARCH_PNG,
    write_png,
)
from rlsweep.report.tidy import Table, app_curve_data, learning_curve_data
from rlsweep.store import read_metrics

__all__ = [
    "Labels",
    "agents_bands",
    "agents_labels",
    "app_bands",
    "app_labels",
    "write_figures",
    "write_search_figure",
]

Bands = dict[str, dict[str, CurveBand]]


@dataclass(frozen=True)
class Labels:
    """The figures' titles and axis labels."""

    curves: str
    steps: str
    values: str
    profiles: str
    scores: str
    improvement: str


def agents_labels(matrices: ScoreMatrices) -> Labels:
    return Labels(
        curves="Evaluation return: IQM over runs, 95% CI band",
        steps="environment steps",
        values="evaluation return (IQM)",
        profiles=f"Performance profiles over {len(matrices.envs)} env(s)",
        scores="normalized score (τ)",
        improvement="Probability of improvement (95% CI)",
    )


def app_labels(metric: str | None) -> Labels:
    return Labels(
        curves="IQM over runs, 95% CI band",
        steps="step",
        values=f"{metric} (IQM)",
        profiles=f"Performance profiles: {metric}",
        scores=f"{metric} (τ)",
        improvement=f"Probability of improvement of {metric} (95% CI)",
    )


def agents_bands(table: Table, *, seed: int, reps: int) -> Bands | None:
    """The learning curves' bands of the evaluations in the tidy table (None: none logged)."""
    curves = learning_curve_data(table)
    return curve_bands(curves, seed=band_rng(seed, "curves"), reps=reps) if curves else None


def app_bands(
    runs: Sequence[AppRun], metric: str | None, *, seed: int, reps: int
) -> tuple[Bands | None, str]:
    """Any app's learning curves' bands of ``metric``, or why there are none."""
    if metric is None:
        return None, "No metric: no learning curves."
    curves = app_curve_data(runs, metric)
    if not curves:
        logged = sorted(
            {k for r in runs for row in read_metrics(r.path)[:1] for k in row} - {"step"}
        )
        return None, (
            f"No completed run logged `{metric}` in its metrics.csv"
            + (f" (its columns: {', '.join(f'`{n}`' for n in logged)})" if logged else "")
            + f": the learning curves plot the metric when jobs also log it per step "
            f"(`rlsweep.current().log(step, {metric}=...)`)."
        )
    try:
        return curve_bands({metric: curves}, seed=band_rng(seed, "curves"), reps=reps), ""
    except ValueError as exc:
        return None, f"No learning curves: {exc}."


def write_figures(
    target: Path,
    bands: Bands | None,
    matrices: ScoreMatrices,
    improvements: Sequence[ImprovementStats],
    labels: Labels,
    *,
    seed: int,
    reps: int,
) -> dict[str, str]:
    """Draw and write the PNGs there is data for; their file names by role."""
    names: dict[str, str] = {}
    if bands:
        figure = plots.learning_curves(
            bands, title=labels.curves, xlabel=labels.steps, ylabel=labels.values
        )
        write_png(figure, target / CURVES_PNG)
        names["curves"] = CURVES_PNG
    if matrices.scores:
        profiles = profile_bands(matrices.scores, seed=band_rng(seed, "profiles"), reps=reps)
        figure = plots.performance_profile_plot(
            profiles, title=labels.profiles, xlabel=labels.scores
        )
        write_png(figure, target / PROFILES_PNG)
        names["profiles"] = PROFILES_PNG
    if improvements:
        figure = plots.probability_of_improvement_plot(improvements, title=labels.improvement)
        write_png(figure, target / IMPROVEMENT_PNG)
        names["improvement"] = IMPROVEMENT_PNG
    return names


def write_search_figure(target: Path, record: Mapping[str, Any] | None) -> dict[str, str]:
    """The search's progress plot, if the sweep is a search with trials (its name by role)."""
    if not record or not record["trials"]:
        return {}
    settings = record["settings"]
    figure = plots.search_progress_plot(
        record["trials"],
        objective=settings["objective"],
        metric=str(record["metric"]),
        maximize=settings["direction"] == "maximize",
    )
    write_png(figure, target / SEARCH_PNG)
    return {"search": SEARCH_PNG}
