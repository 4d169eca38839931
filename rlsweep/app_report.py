"""The statistical report of any Hydra app's sweep (``python -m rlsweep.report SWEEP_DIR``).

The sweep is read into the runs table of :mod:`rlsweep.runs`: one run per job directory,
its group the values of the swept keys other than the replicate key, its value the metric
(``--metric``, else ``return``, else the only number returned, else the first in sorted
order). The statistics are those of :mod:`rlsweep.report`, on its own data contract
(:class:`rlsweep.report.Run`, a group as the agent and the metric as the env), with the same
seeded bootstraps: the same sweep gives the same ``report.md``, byte for byte. Written into
the first sweep directory or ``out_dir``:

- ``report.md``: per group n, mean, median and IQM of the metric with 95% bootstrap CIs;
  the probability of improvement of every pair of groups; paired comparisons (replicate r
  of one group with replicate r of the other); failed, incomplete and missing jobs;
- ``report_learning_curves.png`` when jobs logged the metric in ``metrics.csv``,
  ``report_performance_profiles.png`` and ``report_probability_of_improvement.png``;
- ``evaluations.csv`` / ``evaluations.parquet``: one row per (job, metrics.csv row).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rlsweep import report, stats
from rlsweep.report import (
    BOOTSTRAP_REPS,
    CURVES_PNG,
    EVALUATIONS_CSV,
    EVALUATIONS_PARQUET,
    IMPROVEMENT_PNG,
    PROFILES_PNG,
    REPORT_MD,
    STATUSES,
    CellStats,
    Comparison,
    FloatArray,
    ImprovementStats,
    Report,
    Run,
    ScoreMatrices,
    markdown_table,
    statistic_rng,
)
from rlsweep.runs import AppRun, AppSweep, choose_metric, read_app_sweep, tidy_app_table, to_runs
from rlsweep.store import atomic_write_text, read_metrics

__all__ = ["AppReport", "GroupStats", "group_stats", "render_app_report", "write_app_report"]


# --------------------------------------------------------------------------------------------
# Statistics


@dataclass(frozen=True)
class GroupStats:
    """The metric over one group's completed runs."""

    group: str
    completed: int  # completed runs with a finite value of the metric
    failed: int
    incomplete: int
    missing: int
    no_value: int  # completed runs without a finite value of the metric
    mean: float
    mean_ci: tuple[float, float]  # NaN when fewer than two runs have a value
    median: float
    median_ci: tuple[float, float]
    iqm: float
    iqm_ci: tuple[float, float]
    std: float


def _values(runs: Sequence[Run], group: str, metric: str) -> FloatArray:
    """A group's values, in the order of :func:`rlsweep.report.cell_stats`."""
    return report._finals(report._completed(runs, group, metric))


def group_stats(
    cells: Sequence[CellStats], runs: Sequence[Run], *, seed: int, reps: int
) -> list[GroupStats]:
    """Each cell (a group) with the median's CI and the count of runs without a value."""
    out = []
    for c in cells:
        x = _values(runs, c.agent, c.env)
        if x.size:
            rng = statistic_rng(seed, "cell", c.agent, c.env, "median")
            median_ci = report._ci(x, stats.median, rng, reps)[1:]
        else:
            median_ci = (math.nan, math.nan)
        no_value = sum(
            r.agent == c.agent and r.status == "completed" and r.final_return is None for r in runs
        )
        out.append(
            GroupStats(
                group=c.agent,
                completed=c.completed,
                failed=c.failed,
                incomplete=c.incomplete,
                missing=c.missing,
                no_value=no_value,
                mean=c.mean,
                mean_ci=c.mean_ci,
                median=c.median,
                median_ci=median_ci,
                iqm=c.iqm,
                iqm_ci=c.iqm_ci,
                std=c.std,
            )
        )
    return out


def _score_matrices(runs: Sequence[Run], metric: str | None) -> ScoreMatrices:
    """Each group's values as one task (a column): what the probability of improvement and
    the performance profiles take. Raw values: both only compare them."""
    if metric is None:
        return ScoreMatrices((), {}, ())
    scores = {}
    for group in sorted({r.agent for r in runs}):
        x = _values(runs, group, metric)
        if x.size:
            scores[group] = x[:, None]
    return ScoreMatrices((metric,) if scores else (), scores, ())


def _shared_seeds(comparison: Comparison, runs: Sequence[Run], by_path: dict[Path, AppRun]) -> str:
    """Whether the paired runs drew the same shared seeds (common random numbers)."""
    if not comparison.paired:
        return "–"
    a_runs = report._completed(runs, comparison.a, comparison.env)
    b_runs = report._completed(runs, comparison.b, comparison.env)
    pairs, _ = report.match_pairs(a_runs, b_runs)
    same = {by_path[p.path].shared == by_path[q.path].shared for p, q in pairs}
    return "shared" if same == {True} else "independent" if same == {False} else "mixed"


# --------------------------------------------------------------------------------------------
# Learning curves


def curve_data(
    runs: Sequence[AppRun], metric: str
) -> dict[str, list[tuple[FloatArray, FloatArray]]]:
    """group -> one (steps, values) pair per completed run that logged ``metric``."""
    curves: dict[str, list[tuple[FloatArray, FloatArray]]] = {}
    ordered = sorted(
        runs, key=lambda r: (r.group, r.root or 0, r.replicate or 0, str(r.sweep), r.job)
    )
    for run in ordered:
        if run.status != "completed":
            continue
        by_step: dict[float, float] = {}
        for row in read_metrics(run.path):
            step, value = row.get("step", math.nan), row.get(metric, math.nan)
            if math.isfinite(step) and math.isfinite(value):
                by_step[step] = value  # a step logged twice: its last value
        if by_step:
            steps = sorted(by_step)
            curves.setdefault(run.group, []).append(
                (np.array(steps, dtype=np.float64), np.array([by_step[s] for s in steps]))
            )
    return dict(sorted(curves.items()))


# --------------------------------------------------------------------------------------------
# Markdown


def num(x: float) -> str:
    """Four significant digits (any app's metric has its own scale); ``–`` for none."""
    if math.isnan(x):
        return "–"
    text = f"{x:.4g}"
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


def interval(low: float, high: float) -> str:
    if math.isnan(low) or math.isnan(high):
        return "–"
    return f"[{num(low)}, {num(high)}]"


def _code(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


@dataclass(frozen=True)
class _Content:
    """Everything the Markdown shows."""

    sweep: AppSweep
    metric: str | None
    metric_reason: str
    runs: tuple[Run, ...]
    superseded: tuple[Run, ...]
    missing: tuple[tuple[str, str, int], ...]
    groups: tuple[GroupStats, ...]
    improvements: tuple[ImprovementStats, ...]
    comparisons: tuple[Comparison, ...]
    seeds: dict[tuple[str, str], str]  # (A, B) -> shared / independent / mixed / –
    plot_names: dict[str, str]
    curves_note: str
    columns: tuple[str, ...]
    out_dir: Path
    seed: int
    reps: int


def _intro(c: _Content) -> list[str]:
    counts = {s: sum(r.status == s for r in c.runs) for s in STATUSES}
    sweeps = ", ".join(f"`{s}`" for s in c.sweep.sweeps)
    replicates = len({r.replicate for r in c.runs if r.replicate is not None})
    keys = c.sweep.group_keys
    if keys:
        groups = (
            f"Groups: the jobs with the same values of the swept keys {_code(keys)} (the "
            f"keys whose values differ between the jobs, other than the replicate key)."
        )
    else:
        groups = "No key but the replicate differs between the jobs: one group, `all`."
    root = (
        f" `{c.sweep.root_key}` is the root seed: runs of every root are pooled."
        if c.sweep.root_key
        else ""
    )
    if c.metric is None:
        metric = f"No statistics: {c.metric_reason}."
    else:
        metric = f"Metric: `{c.metric}`, {c.metric_reason}." + (
            " Another: `python -m rlsweep.report SWEEP_DIR --metric NAME`."
            if len(c.sweep.numeric) > 1
            else ""
        )
    return [
        "# Sweep report",
        "",
        f"Sweep director{'y' if len(c.sweep.sweeps) == 1 else 'ies'}: {sweeps}.",
        "",
        f"{len(c.runs)} jobs: {counts['completed']} completed, {counts['failed']} failed, "
        f"{counts['incomplete']} incomplete; {len(c.missing)} missing from the grid "
        f"({len(c.groups)} group{'' if len(c.groups) == 1 else 's'} x {replicates} "
        f"replicate{'' if replicates == 1 else 's'}).",
        "",
        f"{groups} Replicates: the values of `{c.sweep.replicate_key}` (the replicate index "
        f"recorded with each job).{root} {metric}",
        "",
        f"All CIs are 95% percentile bootstrap intervals ({c.reps} resamples; numpy "
        f"Generators seeded from seed {c.seed} and the statistic's name, so this file is "
        "reproducible byte for byte). With few runs per group (under about 10) percentile "
        "bootstrap intervals are too narrow: read them as rough.",
    ]


def _groups_section(c: _Content) -> list[str]:
    name = f"`{c.metric}`" if c.metric is not None else "The metric"
    rows = [
        [
            g.group,
            str(g.completed),
            str(g.failed),
            str(g.incomplete),
            str(g.missing),
            num(g.mean),
            interval(*g.mean_ci),
            num(g.median),
            interval(*g.median_ci),
            num(g.iqm),
            interval(*g.iqm_ci),
            num(g.std),
        ]
        for g in c.groups
    ]
    header = ["group", "n", "failed", "incomplete", "missing", "mean", "mean 95% CI", "median",
              "median 95% CI", "IQM", "IQM 95% CI", "std"]  # fmt: skip
    out = [
        f"## {name} per group",
        "",
        f"n counts the completed runs with a finite value of {name}; failed, incomplete and "
        "missing runs are counted apart and listed at the end. IQM: mean of the middle 50% of "
        "runs. std: sample standard deviation. CIs: percentile bootstrap over runs (none with "
        "fewer than 2 runs).",
        "",
        *(markdown_table(header, rows) if rows else ["No group."]),
    ]
    no_value = [r for r in c.runs if r.status == "completed" and r.final_return is None]
    if no_value and c.metric is not None:
        out += ["", f"Completed without a finite `{c.metric}` (not counted):", ""]
        out += [f"- {r.agent}, replicate {r.replicate} (`{report._where(r.path, c.out_dir)}`)"
                for r in no_value]  # fmt: skip
    return out


def _improvement_section(c: _Content) -> list[str]:
    out = ["## Probability of improvement", ""]
    if not c.improvements:
        return [*out, "No comparison: fewer than two groups with a completed run."]
    rows = [[f"P({p.x} > {p.y})", num(p.point), interval(p.low, p.high)]
            for p in c.improvements]  # fmt: skip
    out += [
        f"P(X > Y): the probability that a run of X has a higher `{c.metric}` than a run of Y "
        "(Mann–Whitney, ties count one half), with its 95% bootstrap CI. 0.5 means no "
        "difference; a CI that excludes 0.5 is a difference the data support. Higher is taken "
        "as better: for a loss, P(X > Y) above 0.5 says X is worse.",
        "",
        *markdown_table(["comparison", "estimate", "95% CI"], rows),
    ]
    if "improvement" in c.plot_names:
        out += ["", f"![probability of improvement]({c.plot_names['improvement']})"]
    if "profiles" in c.plot_names:
        out += [
            "",
            f"![performance profiles]({c.plot_names['profiles']})",
            "",
            f"Performance profile: the fraction of a group's runs whose `{c.metric}` exceeds "
            "τ, with pointwise 95% CI bands.",
        ]
    return out


_REASONS = {
    "no seeds.json": "no recorded identity",
    "common random numbers off (seeding.common_random_numbers: false)": (
        "common random numbers off in the recorded identity"
    ),
}


def _paired_section(c: _Content) -> list[str]:
    out = ["## Paired comparisons", ""]
    if not c.comparisons:
        return [*out, "No comparison: fewer than two groups with completed runs."]
    out += [
        f"A − B: difference of the mean `{c.metric}`. Runs pair by replicate index (and root): "
        "replicate r of A with replicate r of B. seeds: `shared` when every pair drew the same "
        "shared seeds (only agent-side keys, `rlsweep.Keys(agent=...)`, differ between A and "
        "B: common random numbers, which sharpen the comparison), `independent` when their "
        "seeds differ. Paired rows give the bootstrap CI of the mean paired difference, the "
        "two-sided Wilcoxon signed-rank p-value, that p-value Holm-adjusted over every paired "
        "test in this table, and the correlation r between paired values. Unpaired rows fall "
        "back to independent bootstrap CIs.",
        "",
    ]
    n_tests = sum(x.paired for x in c.comparisons)
    rows = [
        [
            f"{x.a} − {x.b}",
            "paired" if x.paired else "unpaired",
            str(x.n_pairs) if x.paired else f"{x.n_a} / {x.n_b}",
            num(x.difference),
            interval(x.low, x.high),
            report._pvalue(x.p_value),
            report._pvalue(x.p_holm),
            num(x.correlation),
            c.seeds[(x.a, x.b)],
        ]
        for x in c.comparisons
    ]
    header = ["A − B", "runs", "n", "difference", "95% CI", "Wilcoxon p",
              f"Holm p ({n_tests} tests)", "r", "seeds"]  # fmt: skip
    out += markdown_table(header, rows)
    notes = [
        f"- {x.a} − {x.b}: "
        + (
            x.note
            if x.paired
            else f"not paired ({_REASONS.get(x.note, x.note)}): unpaired CI, no test."
        )
        for x in c.comparisons
        if x.note
    ]
    return out + (["", *notes] if notes else [])


def _jobs_section(c: _Content) -> list[str]:
    out = ["## Failed, incomplete and missing jobs", ""]
    failed = [r for r in c.runs if r.status == "failed"]
    incomplete = [r for r in c.runs if r.status == "incomplete"]
    if not (failed or incomplete or c.missing or c.superseded):
        return [*out, "None: every job of the grid completed."]
    for title, group in (
        ("Failed (the traceback is in the job's error.txt)", failed),
        ("Incomplete (started, no result.json: killed or still running)", incomplete),
    ):
        if group:
            out += [f"{title}:", ""]
            out += [
                f"- {r.agent}, replicate {r.replicate}"
                + (f": {r.error}" if r.error else "")
                + f" (`{report._where(r.path, c.out_dir)}`)"
                for r in sorted(group, key=lambda r: (r.agent, *report._run_order(r)))
            ]
            out.append("")
    if c.missing:
        out += [
            "Missing (no job directory; the grid is every group x replicate index seen):",
            "",
            *(f"- {g}, replicate {k}" for g, _, k in c.missing),
            "",
        ]
    if c.superseded:
        out += [
            "Counted once (the same group, root and replicate found again; the completed or "
            "first one is used), not counted:",
            "",
            *(f"- `{report._where(r.path, c.out_dir)}` ({r.status})" for r in c.superseded),
            "",
        ]
    return out[:-1] if out[-1] == "" else out


def render_app_report(c: _Content) -> str:
    """The Markdown text of the report (a pure function of its content)."""
    parts = [*_intro(c), "", *_groups_section(c)]
    if c.metric is not None:
        parts += ["", *_improvement_section(c), "", *_paired_section(c)]
    parts += ["", "## Learning curves", ""]
    if "curves" in c.plot_names:
        parts += [
            f"IQM of `{c.metric}` over completed runs against the step it was logged at "
            "(metrics.csv), with a pointwise 95% bootstrap CI band; one colour per group.",
            "",
            f"![learning curves]({c.plot_names['curves']})",
        ]
    else:
        parts.append(c.curves_note)
    parts += [
        "",
        *_jobs_section(c),
        "",
        "## Data",
        "",
        f"`{EVALUATIONS_PARQUET}` and `{EVALUATIONS_CSV}`: one row per (job, row of its "
        f"metrics.csv), columns {', '.join(c.columns)}. Load with "
        f'`pd.read_parquet("{EVALUATIONS_PARQUET}")`.',
    ]
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------------------------
# Writing it all


@dataclass(frozen=True)
class AppReport(Report):
    """What :func:`write_app_report` wrote: a :class:`Report` whose agents are the groups
    (``cells``: one per group) and whose one env is the metric, and the groups' statistics."""

    metric: str | None = None
    metric_reason: str = ""
    sweep: AppSweep | None = None
    groups: tuple[GroupStats, ...] = field(default_factory=tuple)


def _write_plots(
    out_dir: Path,
    app_runs: Sequence[AppRun],
    metric: str | None,
    matrices: ScoreMatrices,
    *,
    seed: int,
    reps: int,
) -> tuple[dict[str, str], str]:
    """Write the PNGs there is data for: their file names by role, and why there are no
    learning curves (when there are none)."""
    from rlsweep import plots

    names: dict[str, str] = {}
    note = ""
    if metric is None:
        note = "No metric: no learning curves."
    else:
        curves = curve_data(app_runs, metric)
        if not curves:
            logged = sorted(
                {k for r in app_runs for row in read_metrics(r.path)[:1] for k in row} - {"step"}
            )
            note = (
                f"No completed run logged `{metric}` in its metrics.csv"
                + (f" (its columns: {_code(logged)})" if logged else "")
                + f": the learning curves plot the metric when jobs also log it per step "
                f"(`rlsweep.current().log(step, {metric}=...)`)."
            )
        else:
            try:
                plots.learning_curves(
                    {metric: curves},
                    out_dir / CURVES_PNG,
                    title="IQM over runs, 95% CI band",
                    seed=report._plot_seed(seed, "plot", "curves"),
                    reps=reps,
                    xlabel="step",
                    ylabel=f"{metric} (IQM)",
                )
                names["curves"] = CURVES_PNG
            except ValueError as exc:
                note = f"No learning curves: {exc}."
    if matrices.scores:
        plots.performance_profile_plot(
            matrices.scores,
            out_dir / PROFILES_PNG,
            reps=reps,
            seed=report._plot_seed(seed, "plot", "profiles"),
            title=f"Performance profiles: {metric}",
            xlabel=f"{metric} (τ)",
        )
        names["profiles"] = PROFILES_PNG
    if len(matrices.scores) >= 2:
        plots.probability_of_improvement_plot(
            matrices.scores,
            out_dir / IMPROVEMENT_PNG,
            reps=reps,
            seed=report._plot_seed(seed, "plot", "improvement"),
            title=f"Probability of improvement of {metric} (95% CI)",
        )
        names["improvement"] = IMPROVEMENT_PNG
    return names, note


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
    if not sweep_dirs:
        raise ValueError("no sweep directory given")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    for d in sweep_dirs:
        if not Path(d).is_dir():
            raise ValueError(f"{Path(d).resolve()} is not a directory")
    sweep = read_app_sweep(sweep_dirs, replicate_key=replicate_key)
    if not sweep.runs:
        raise ValueError(f"no job directory in {', '.join(str(d) for d in sweep.sweeps)}")
    chosen, reason = choose_metric(sweep.numeric, metric)
    runs, superseded = report.deduplicate(to_runs(sweep, chosen))
    by_path = {r.path: r for r in sweep.runs}
    kept = [by_path[r.path] for r in runs]
    target = (out_dir if out_dir is not None else sweep.sweeps[0]).resolve()
    target.mkdir(parents=True, exist_ok=True)

    missing = report.missing_runs(runs)
    cells = report.cell_stats(runs, missing, seed=seed, reps=reps)
    valued = [r for r in runs if not (r.status == "completed" and r.final_return is None)]
    matrices = _score_matrices(valued, chosen)
    improvements = report.improvement_stats(matrices, seed=seed, reps=reps)
    comparisons = report.paired_comparisons(valued, seed=seed, reps=reps) if chosen else []
    tidy: pd.DataFrame = tidy_app_table(sweep, kept)
    plot_names, curves_note = _write_plots(target, kept, chosen, matrices, seed=seed, reps=reps)
    content = _Content(
        sweep=sweep,
        metric=chosen,
        metric_reason=reason,
        runs=tuple(runs),
        superseded=tuple(superseded),
        missing=tuple(missing),
        groups=tuple(group_stats(cells, runs, seed=seed, reps=reps)),
        improvements=tuple(improvements),
        comparisons=tuple(comparisons),
        seeds={(x.a, x.b): _shared_seeds(x, valued, by_path) for x in comparisons},
        plot_names=plot_names,
        curves_note=curves_note,
        columns=tuple(str(c) for c in tidy.columns),
        out_dir=target,
        seed=seed,
        reps=reps,
    )
    text = render_app_report(content)
    tidy.to_csv(target / EVALUATIONS_CSV, index=False)
    tidy.to_parquet(target / EVALUATIONS_PARQUET, index=False)
    atomic_write_text(target / REPORT_MD, text)
    return AppReport(
        markdown=target / REPORT_MD,
        text=text,
        csv=target / EVALUATIONS_CSV,
        parquet=target / EVALUATIONS_PARQUET,
        plots=tuple(target / name for name in plot_names.values()),
        runs=content.runs,
        cells=tuple(cells),
        aggregates=(),
        improvements=content.improvements,
        comparisons=content.comparisons,
        metric=chosen,
        metric_reason=reason,
        sweep=sweep,
        groups=content.groups,
    )
