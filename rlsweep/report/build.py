"""From sweep directories to the written report: load the runs, choose the metric, compute the
numbers, draw the figures, render report.md and report.html, write the files.

:func:`write_report` is the entry point (``python -m rlsweep.report``, the end of a sweep), for
every sweep: rlsweep's own agents (groups are agents, tasks are envs, the metric their final
return, plus scores normalised per env) and any other app (groups by its swept keys, on a
metric it returned or logged).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlsweep.report import ranking
from rlsweep.report.analysis import (
    BOOTSTRAP_REPS,
    AggregateStats,
    GroupStats,
    ImprovementStats,
    ScoreMatrices,
    aggregate_stats,
    env_baselines,
    group_scores,
    group_stats,
    improvement_stats,
    normalized_scores,
)
from rlsweep.report.comparisons import Comparison, paired_comparisons, shared_seeds
from rlsweep.report.figures import (
    bands_of,
    labels_of,
    write_figures,
    write_keys_figure,
    write_search_figure,
)
from rlsweep.report.files import (
    EVALUATIONS_CSV,
    EVALUATIONS_PARQUET,
    REPORT_HTML,
    REPORT_MD,
    write_csv,
    write_html,
    write_markdown,
    write_parquet,
)
from rlsweep.report.html import render_html
from rlsweep.report.markdown import Content
from rlsweep.report.markdown_compare import with_comparisons
from rlsweep.report.markdown_search import read_search, with_search
from rlsweep.report.metrics import Metric, choose_metric, curve_series
from rlsweep.report.read import read_runs
from rlsweep.report.render import render_report
from rlsweep.report.runs import (
    Run,
    Sweep,
    deduplicate,
    groups_of,
    missing_dirs,
    missing_runs,
    unique_dirs,
)
from rlsweep.report.tidy import tidy_table

__all__ = ["Report", "write_report"]


@dataclass(frozen=True)
class Report:
    """What :func:`write_report` wrote, and the numbers behind it."""

    markdown: Path
    text: str
    html: Path  # report.html: the same report as one self-contained page
    csv: Path
    parquet: Path
    plots: tuple[Path, ...]
    sweep: Sweep
    runs: tuple[Run, ...]  # deduplicated
    # Completed jobs that no group can count: another job's at a kept run's place.
    unplaced: tuple[Run, ...]
    metric: Metric
    groups: tuple[GroupStats, ...]  # one per (group, task)
    aggregates: tuple[AggregateStats, ...]
    improvements: tuple[ImprovementStats, ...]
    comparisons: tuple[Comparison, ...]


def _checked(sweep_dirs: Sequence[Path], seed: int) -> list[Path]:
    """The sweep directories, resolved and each once; ValueError for none, a bad seed, or one
    that is not a directory."""
    if not sweep_dirs:
        raise ValueError("no sweep directory given")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    sweeps = unique_dirs(sweep_dirs)
    for d in sweeps:
        if not d.is_dir():
            raise ValueError(f"{d} is not a directory")
    return sweeps


def _scores(
    sweep: Sweep, runs: Sequence[Run], metric: str | None
) -> tuple[ScoreMatrices, dict[str, tuple[float, float]], dict[str, str]]:
    """The scores the pairwise sections take and, for rlsweep's agents (normalised per env),
    the envs' baselines and why an env has none."""
    if not sweep.built_in:
        return group_scores(runs, metric), {}, {}
    baselines, reasons = env_baselines(runs)
    return normalized_scores(runs, baselines, metric), baselines, reasons


def _paired(runs: Sequence[Run], metric: str | None) -> dict[str, ranking.Compared]:
    """Per task, the groups the paired comparisons compare (in the report's group order)."""
    values: dict[str, dict[str, list[float]]] = {}
    order = {g: i for i, g in enumerate(groups_of(runs))}
    for run in sorted(runs, key=lambda r: order.get(r.group, -1)):
        value = run.value(metric)
        if value is not None:
            values.setdefault(run.task, {}).setdefault(run.group, []).append(value)
    return {
        task: ranking.compared({g: np.array(v)[:, None] for g, v in by_group.items()})
        for task, by_group in values.items()
    }


def _key_views(
    sweep: Sweep, runs: Sequence[Run], groups: Sequence[GroupStats], metric: str | None,
    seed: int, reps: int,
) -> dict[str, tuple[ranking.KeyValue, ...]]:  # fmt: skip
    """The metric against each swept key: for a grid of several keys, or one key of three
    values or more (any app's; rlsweep's agents have no keys)."""
    if sweep.built_in or metric is None:
        return {}
    views = {
        key: tuple(ranking.key_view(runs, groups, key, metric, seed=seed, reps=reps))
        for key in sweep.group_keys
    }
    if len(views) == 1 and len(next(iter(views.values()))) < 3:
        return {}
    return views


@dataclass(frozen=True)
class _Numbers:
    """The statistics of a report, before its figures."""

    runs: list[Run]
    superseded: list[Run]
    unplaced: list[Run]
    missing: list[tuple[str, str, int]]
    groups: list[GroupStats]
    matrices: ScoreMatrices
    baselines: dict[str, tuple[float, float]]
    reasons: dict[str, str]
    improved: ranking.Compared
    improvements: list[ImprovementStats]
    paired: ranking.Compared
    comparisons: list[Comparison]


def _numbers(sweep: Sweep, metric: str | None, seed: int, reps: int) -> _Numbers:
    runs, superseded, unplaced = deduplicate(sweep.runs)
    missing = missing_runs(runs)
    groups = group_stats(runs, missing, metric, seed=seed, reps=reps)
    matrices, baselines, reasons = _scores(sweep, runs, metric)
    improved = ranking.compared(matrices.scores)
    improvements = improvement_stats(matrices, improved.groups, seed=seed, reps=reps)
    paired = _paired(runs, metric)
    chosen = {task: c.groups for task, c in paired.items()}
    comparisons = paired_comparisons(runs, metric, chosen, seed=seed, reps=reps)
    first = ranking.Compared(
        tuple(dict.fromkeys(g for c in paired.values() for g in c.groups)),
        max((c.single for c in paired.values()), default=0),
        max((c.capped for c in paired.values()), default=0),
    )
    return _Numbers(runs, superseded, unplaced, missing, groups, matrices, baselines, reasons,
                    improved, improvements, first, comparisons)  # fmt: skip


def _figures(
    sweep: Sweep, n: _Numbers, chosen: Metric, target: Path, seed: int, reps: int
) -> tuple[dict[str, str], str, dict[str, tuple[ranking.KeyValue, ...]]]:
    """The figures written (by role), why there are no learning curves, the key views."""
    metric, series = chosen.name, curve_series(chosen)
    top = ranking.top_groups(n.groups, ranking.COMPARED)
    names = list(dict.fromkeys(g.group for g in n.groups))
    drawn = names if len(names) <= ranking.COMPARED else [g.group for g in top]
    bands, note = bands_of(n.runs, series, drawn, built_in=sweep.built_in, seed=seed, reps=reps)
    profiled = ScoreMatrices(
        n.matrices.envs, {g: n.matrices.scores[g] for g in n.improved.groups}, n.matrices.notes
    )
    labels = labels_of(sweep.built_in, metric, n.matrices, series)
    figures = write_figures(target, bands, profiled, n.improvements, labels, seed=seed, reps=reps)
    keys = _key_views(sweep, n.runs, n.groups, metric, seed, reps)
    figures.update(write_keys_figure(target, keys, metric))
    figures.update(write_search_figure(target, read_search(sweep.sweeps)))
    return figures, note, keys


def write_report(
    sweep_dirs: Sequence[Path],
    out_dir: Path | None = None,
    *,
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
    metric: str | None = None,
    replicate_key: str | None = None,
    metric_by: str = "--metric",
) -> Report:
    """Write report.md, report.html, the plots and the tidy table of ``sweep_dirs`` into
    ``out_dir`` (default: the first sweep directory).

    ``metric`` names the number the statistics are on (any app's: a number its task returned
    or a series it logged; ``metric_by`` the setting that names it, for the report's words);
    ``replicate_key`` the replicate's config key when the jobs did not record it. Raises ValueError when there are no sweep directories or no job directory in
    them, or for a ``metric`` no job has (the message lists those they have).
    """
    sweep = read_runs(_checked(sweep_dirs, seed), replicate_key=replicate_key)
    if not sweep.runs:
        raise ValueError(f"no job directory in {', '.join(str(d) for d in sweep.sweeps)}")
    chosen = choose_metric(sweep.runs, metric, built_in=sweep.built_in, by=metric_by)
    target = (out_dir if out_dir is not None else sweep.sweeps[0]).resolve()
    target.mkdir(parents=True, exist_ok=True)
    n = _numbers(sweep, chosen.name, seed, reps)
    figures, curves_note, keys = _figures(sweep, n, chosen, target, seed, reps)
    table = tidy_table(sweep, n.runs, n.baselines)
    aggregates = aggregate_stats(n.matrices, seed=seed, reps=reps) if sweep.built_in else []
    content = Content(
        sweep=sweep, runs=tuple(n.runs), superseded=tuple(n.superseded),
        unplaced=tuple(n.unplaced), missing=tuple(n.missing), metric=chosen, groups=tuple(n.groups),
        improvements=tuple(n.improvements), improved=n.improved,
        comparisons=tuple(n.comparisons), paired=n.paired,
        seeds={} if sweep.built_in else {(x.a, x.b): shared_seeds(x, n.runs)
                                         for x in n.comparisons},
        plot_names=figures, curves_note=curves_note, columns=tuple(table.names),
        out_dir=target, seed=seed, reps=reps, baselines=n.baselines, reasons=n.reasons,
        matrices=n.matrices, aggregates=tuple(aggregates),
        top=tuple(ranking.top_groups(n.groups)), keys=keys,
        missing_dirs=tuple(missing_dirs(sweep)), grid_recorded=sweep.grid_recorded,
    )  # fmt: skip
    text = with_comparisons(render_report(content), sweep.sweeps)
    text = with_search(text, read_search(sweep.sweeps), figures.get("search"), seed=seed, reps=reps)
    write_csv(target / EVALUATIONS_CSV, table)
    write_parquet(target / EVALUATIONS_PARQUET, table)
    write_markdown(target / REPORT_MD, text)
    write_html(target / REPORT_HTML, render_html(content, text))
    return Report(
        markdown=target / REPORT_MD, text=text, html=target / REPORT_HTML,
        csv=target / EVALUATIONS_CSV, parquet=target / EVALUATIONS_PARQUET,
        plots=tuple(target / name for name in figures.values()), sweep=sweep,
        runs=tuple(n.runs), unplaced=tuple(n.unplaced), metric=chosen, groups=tuple(n.groups),
        aggregates=tuple(aggregates), improvements=tuple(n.improvements),
        comparisons=tuple(n.comparisons),
    )  # fmt: skip
