"""The report's figures: which there is data for, their titles and labels, their bands
(:mod:`rlsweep.report.curves`), drawn (:mod:`rlsweep.report.plots`) and written
(:mod:`rlsweep.report.files`). Every band comes from a Generator of
:func:`rlsweep.report.analysis.band_rng`; the probability of improvement and the swept keys
are drawn from the tables' own intervals. A figure draws at most
:data:`~rlsweep.report.ranking.COMPARED` groups."""

from __future__ import annotations

import keyword
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsweep.report import plots
from rlsweep.report.analysis import ImprovementStats, ScoreMatrices, band_rng
from rlsweep.report.curves import CurveBand, curve_bands, profile_bands
from rlsweep.report.files import (
    CURVES_PNG,
    IMPROVEMENT_PNG,
    KEYS_PNG,
    PROFILES_PNG,
    SEARCH_PNG,
    write_png,
)
from rlsweep.report.ranking import KeyValue
from rlsweep.report.runs import Run
from rlsweep.report.tidy import curve_data

__all__ = ["Labels", "bands_of", "labels_of", "log_hint", "write_figures", "write_search_figure"]

Bands = dict[str, dict[str, CurveBand]]
AGENT_CURVES = "eval_return_mean"  # the series of rlsweep's own agents' learning curves


@dataclass(frozen=True)
class Labels:
    """The figures' titles and axis labels."""

    curves: str
    steps: str
    values: str
    profiles: str
    scores: str
    improvement: str


def labels_of(
    built_in: bool, metric: str | None, matrices: ScoreMatrices, series: str | None = None
) -> Labels:
    if built_in:
        return Labels(
            curves="Evaluation return: IQM over runs, 95% CI band",
            steps="environment steps",
            values="evaluation return (IQM)",
            profiles=f"Performance profiles over {len(matrices.envs)} env(s)",
            scores="normalized score (τ)",
            improvement="Probability of improvement (95% CI)",
        )
    return Labels(
        curves="IQM over runs, 95% CI band",
        steps="step",
        values=f"{series or metric} (IQM)",
        profiles=f"Performance profiles: {metric}",
        scores=f"{metric} (τ)",
        improvement=f"Probability of improvement of {metric} (95% CI)",
    )


def log_hint(name: str) -> str:
    """The Python call that logs ``name`` per step, valid for any name."""
    if name.isidentifier() and not keyword.iskeyword(name):
        return f"rlsweep.current().log(step, {name}=value)"
    return f"rlsweep.current().log(step, **{{{name!r}: value}})"


def bands_of(
    runs: Sequence[Run],
    series: str | None,
    groups: Sequence[str],
    *,
    built_in: bool,
    seed: int,
    reps: int,
) -> tuple[Bands | None, str]:
    """The learning curves' bands of ``groups``: of the logged ``series`` (rlsweep's agents:
    their evaluation return), or why there are none."""
    if built_in:
        curves = curve_data(runs, AGENT_CURVES, groups, built_in=True)
        if not curves:
            return None, "No completed run logged evaluations."
    else:
        if series is None:
            return None, (
                "No completed run logged a series: the learning curves plot one when jobs log "
                f"it per step (`{log_hint('score')}`, or the app's own TensorBoard or CSV logs)."
            )
        curves = curve_data(runs, series, groups, built_in=False)
        if not curves:
            return None, f"No completed run logged `{series}`."
        curves = {series: curves[""]}
    try:
        return curve_bands(curves, seed=band_rng(seed, "curves"), reps=reps), ""
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


def write_keys_figure(
    target: Path, views: Mapping[str, Sequence[KeyValue]], metric: str | None
) -> dict[str, str]:
    """The metric against each swept key, if there is one to show (its name by role)."""
    if not views or metric is None:
        return {}
    write_png(plots.key_plot(views, metric=metric), target / KEYS_PNG)
    return {"keys": KEYS_PNG}


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
