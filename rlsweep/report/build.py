"""From sweep directories to the written report: load the runs, compute the numbers, draw the
figures, render report.md and report.html, write the files.

:func:`write_report` is the entry point (``python -m rlsweep.report``, the end of a sweep): a
sweep of rlsweep's own agents gets the report of the final evaluation return per (agent, env);
a sweep of any other Hydra app gets :func:`write_app_report`'s (grouped by its swept keys, on
a metric its task function returned).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlsweep.report.analysis import (
    BOOTSTRAP_REPS,
    AggregateStats,
    CellStats,
    GroupStats,
    ImprovementStats,
    aggregate_stats,
    cell_stats,
    env_baselines,
    group_scores,
    group_stats,
    improvement_stats,
    normalized_scores,
)
from rlsweep.report.app_runs import AppSweep, choose_metric, is_app_sweep, read_app_sweep, to_runs
from rlsweep.report.comparisons import Comparison, paired_comparisons, shared_seeds
from rlsweep.report.figures import (
    agents_bands,
    agents_labels,
    app_bands,
    app_labels,
    write_figures,
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
from rlsweep.report.markdown_agents import AgentsContent, render_report
from rlsweep.report.markdown_app import AppContent, render_app_report
from rlsweep.report.markdown_compare import with_comparisons
from rlsweep.report.markdown_search import read_search, with_search
from rlsweep.report.runs import Run, deduplicate, load_runs, missing_runs, unique_dirs
from rlsweep.report.tidy import Table, tidy_app_table, tidy_table

__all__ = ["AppReport", "Report", "write_app_report", "write_report"]


@dataclass(frozen=True)
class Report:
    """What :func:`write_report` wrote, and the numbers behind it."""

    markdown: Path
    text: str
    html: Path  # report.html: the same report as one self-contained page
    csv: Path
    parquet: Path
    plots: tuple[Path, ...]
    runs: tuple[Run, ...]
    cells: tuple[CellStats, ...]
    aggregates: tuple[AggregateStats, ...]
    improvements: tuple[ImprovementStats, ...]
    comparisons: tuple[Comparison, ...]


@dataclass(frozen=True)
class AppReport(Report):
    """What :func:`write_app_report` wrote: a :class:`Report` whose agents are the groups
    (``cells``: one per group) and whose one env is the metric, and the groups' statistics."""

    metric: str | None = None
    metric_reason: str = ""
    sweep: AppSweep | None = None
    groups: tuple[GroupStats, ...] = field(default_factory=tuple)


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


def _target(out_dir: Path | None, sweeps: Sequence[Path]) -> Path:
    target = (out_dir if out_dir is not None else sweeps[0]).resolve()
    target.mkdir(parents=True, exist_ok=True)
    return target


def _content(
    runs: Sequence[Run],
    superseded: Sequence[Run],
    missing: Sequence[tuple[str, str, int]],
    improvements: Sequence[ImprovementStats],
    comparisons: Sequence[Comparison],
    figures: dict[str, str],
    target: Path,
    seed: int,
    reps: int,
) -> dict[str, Any]:
    """The fields of :class:`~rlsweep.report.markdown.Content`: what every report.md shows,
    ``figures`` being the plots written, by role."""
    common = Content(
        runs=tuple(runs),
        superseded=tuple(superseded),
        missing=tuple(missing),
        improvements=tuple(improvements),
        comparisons=tuple(comparisons),
        plot_names=figures,
        out_dir=target,
        seed=seed,
        reps=reps,
    )
    return vars(common)


def _sections(content: Content, text: str, sweeps: Sequence[Path]) -> str:
    """report.md with the sections of a comparison or a search, if the sweep is one."""
    text = with_comparisons(text, sweeps)
    plot = content.plot_names.get("search")
    return with_search(text, read_search(sweeps), plot, seed=content.seed, reps=content.reps)


def _written(content: Content, text: str, table: Table) -> dict[str, Any]:
    """Write the tidy table, report.md and report.html; the fields of :class:`Report` common
    to both."""
    target = content.out_dir
    write_csv(target / EVALUATIONS_CSV, table)
    write_parquet(target / EVALUATIONS_PARQUET, table)
    write_markdown(target / REPORT_MD, text)
    write_html(target / REPORT_HTML, render_html(content, text))
    return {
        "markdown": target / REPORT_MD,
        "text": text,
        "html": target / REPORT_HTML,
        "csv": target / EVALUATIONS_CSV,
        "parquet": target / EVALUATIONS_PARQUET,
        "plots": tuple(target / name for name in content.plot_names.values()),
        "runs": content.runs,
        "improvements": content.improvements,
        "comparisons": content.comparisons,
    }


# --------------------------------------------------------------------------------------------
# rlsweep's own agents


def write_report(
    sweep_dirs: Sequence[Path],
    out_dir: Path | None = None,
    *,
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
    metric: str | None = None,
    replicate_key: str | None = None,
) -> Report:
    """Write report.md, the plots and the tidy table of ``sweep_dirs`` into ``out_dir``.

    ``out_dir`` defaults to the first sweep directory. Raises ValueError when there are no
    sweep directories or no job directory in them. A sweep of another app than rlsweep's
    own agents gets the report of :func:`write_app_report` (grouped by its swept keys, on
    ``metric``; ``replicate_key`` names its replicate index if not ``seed``).
    """
    sweeps = _checked(sweep_dirs, seed)
    if is_app_sweep(sweeps):
        return write_app_report(
            sweeps, out_dir, metric=metric, seed=seed, reps=reps, replicate_key=replicate_key
        )
    if metric not in (None, "final_return"):
        raise ValueError(
            f"--metric {metric}: the report of rlsweep's own agents is on their final_return"
        )
    runs, superseded = deduplicate(load_runs(sweeps))
    if not runs:
        raise ValueError(f"no job directory in {', '.join(str(d) for d in sweeps)}")
    return _agents_report(sweeps, runs, superseded, _target(out_dir, sweeps), seed, reps)


def _agents_report(
    sweeps: Sequence[Path],
    runs: Sequence[Run],
    superseded: Sequence[Run],
    target: Path,
    seed: int,
    reps: int,
) -> Report:
    """The report of the (deduplicated) runs of rlsweep's own agents, written to ``target``."""
    baselines, reasons = env_baselines(runs)
    matrices = normalized_scores(runs, baselines)
    improvements = improvement_stats(matrices, seed=seed, reps=reps)
    table = tidy_table(runs, baselines)
    bands = agents_bands(table, seed=seed, reps=reps)
    labels = agents_labels(matrices)
    figures = write_figures(target, bands, matrices, improvements, labels, seed=seed, reps=reps)
    figures.update(write_search_figure(target, read_search(sweeps)))
    comparisons = paired_comparisons(runs, seed=seed, reps=reps)
    missing = missing_runs(runs)
    content = AgentsContent(
        **_content(
            runs, superseded, missing, improvements, comparisons, figures, target, seed, reps
        ),
        sweeps=tuple(sweeps),
        cells=tuple(cell_stats(runs, missing, seed=seed, reps=reps)),
        baselines=baselines,
        reasons=reasons,
        matrices=matrices,
        aggregates=tuple(aggregate_stats(matrices, seed=seed, reps=reps)),
    )
    written = _written(content, _sections(content, render_report(content), sweeps), table)
    return Report(**written, cells=content.cells, aggregates=content.aggregates)


# --------------------------------------------------------------------------------------------
# Any app


def write_app_report(
    sweep_dirs: Sequence[Path],
    out_dir: Path | None = None,
    *,
    metric: str | None = None,
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
    replicate_key: str | None = None,
) -> AppReport:
    """Write report.md, the plots and the tidy table of any app's sweeps into ``out_dir``.

    ``out_dir`` defaults to the first sweep directory. Raises ValueError when there are no
    sweep directories or no job directory in them, or for a ``metric`` no job returned.
    """
    sweep = read_app_sweep(_checked(sweep_dirs, seed), replicate_key=replicate_key)
    if not sweep.runs:
        raise ValueError(f"no job directory in {', '.join(str(d) for d in sweep.sweeps)}")
    chosen, reason = choose_metric(sweep.numeric, metric)
    target = _target(out_dir, sweep.sweeps)
    content, cells, table = _app_content(sweep, chosen, reason, target, seed, reps)
    return AppReport(
        **_written(content, _sections(content, render_app_report(content), sweep.sweeps), table),
        cells=tuple(cells),
        aggregates=(),
        metric=chosen,
        metric_reason=reason,
        sweep=sweep,
        groups=content.groups,
    )


def _app_content(
    sweep: AppSweep, metric: str | None, reason: str, target: Path, seed: int, reps: int
) -> tuple[AppContent, list[CellStats], Table]:
    """What any app's report.md shows (its figures written to ``target``), its groups as
    cells, and its tidy table."""
    runs, superseded = deduplicate(to_runs(sweep, metric))
    by_path = {r.path: r for r in sweep.runs}
    kept = [by_path[r.path] for r in runs]
    missing = missing_runs(runs)
    cells = cell_stats(runs, missing, seed=seed, reps=reps)
    valued = [r for r in runs if not (r.status == "completed" and r.final_return is None)]
    matrices = group_scores(valued, metric)
    improvements = improvement_stats(matrices, seed=seed, reps=reps)
    comparisons = paired_comparisons(valued, seed=seed, reps=reps) if metric else []
    table = tidy_app_table(sweep, kept)
    bands, curves_note = app_bands(kept, metric, seed=seed, reps=reps)
    figures = write_figures(
        target, bands, matrices, improvements, app_labels(metric), seed=seed, reps=reps
    )
    figures.update(write_search_figure(target, read_search(sweep.sweeps)))
    content = AppContent(
        **_content(
            runs, superseded, missing, improvements, comparisons, figures, target, seed, reps
        ),
        sweep=sweep,
        metric=metric,
        metric_reason=reason,
        groups=tuple(group_stats(cells, runs, seed=seed, reps=reps)),
        seeds={(x.a, x.b): shared_seeds(x, valued, by_path) for x in comparisons},
        curves_note=curves_note,
        columns=tuple(table.names),
    )
    return content, cells, table
