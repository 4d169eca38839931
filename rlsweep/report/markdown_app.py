"""report.md of any Hydra app's sweep: per group statistics of the metric, the probability of
improvement and paired comparisons of the groups, learning curves, and the failed, incomplete
and missing jobs. Numbers in four significant digits: any app's metric has its own scale."""

from __future__ import annotations

from dataclasses import dataclass

from rlsweep.report import markdown as md
from rlsweep.report.analysis import GroupStats
from rlsweep.report.app_runs import AppSweep

__all__ = ["SPEC", "AppContent", "group_values", "render_app_report"]

SPEC = ".4g"
GRID = md.Grid(name=lambda group, _: group, cells="group", same="group")
_REASONS = {
    "no seeds.json": "no recorded identity",
    "common random numbers off (seeding.common_random_numbers: false)": (
        "common random numbers off in the recorded identity"
    ),
}


@dataclass(frozen=True)
class AppContent(md.Content):
    """Everything the Markdown shows."""

    sweep: AppSweep
    metric: str | None
    metric_reason: str
    groups: tuple[GroupStats, ...]
    seeds: dict[tuple[str, str], str]  # (A, B) -> shared / independent / mixed / –
    curves_note: str
    columns: tuple[str, ...]


def _code(names: tuple[str, ...]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _intro(c: AppContent) -> list[str]:
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
    *title, counts = md.header(c.sweep.sweeps, c)
    return [
        *title,
        f"{counts} ({len(c.groups)} group{'' if len(c.groups) == 1 else 's'} x {replicates} "
        f"replicate{'' if replicates == 1 else 's'}).",
        "",
        f"{groups} Replicates: the values of `{c.sweep.replicate_key}` (the replicate index "
        f"recorded with each job).{root} {metric}",
        "",
        md.bootstrap_note(c, "group"),
    ]


def group_values(g: GroupStats) -> dict[str, str]:
    """A group's row, by column: group, n, failed, incomplete, missing, mean, its CI, median,
    its CI, IQM, its CI, std."""
    values = {
        "group": g.group,
        "n": str(g.completed),
        "failed": str(g.failed),
        "incomplete": str(g.incomplete),
        "missing": str(g.missing),
    }
    estimates = (("mean", g.mean, g.mean_ci), ("median", g.median, g.median_ci),
                 ("IQM", g.iqm, g.iqm_ci))  # fmt: skip
    for name, point, ci in estimates:
        values[name] = md.fmt_num(point, SPEC)
        values[f"{name} 95% CI"] = md.fmt_interval(*ci, SPEC)
    values["std"] = md.fmt_num(g.std, SPEC)
    return values


def _groups_section(c: AppContent) -> list[str]:
    name = f"`{c.metric}`" if c.metric is not None else "The metric"
    values = [group_values(g) for g in c.groups]
    rows = [list(v.values()) for v in values]
    out = [
        f"## {name} per group",
        "",
        f"n counts the completed runs with a finite value of {name}; failed, incomplete and "
        "missing runs are counted apart and listed at the end. IQM: mean of the middle 50% of "
        "runs. std: sample standard deviation. CIs: percentile bootstrap over runs (none with "
        "fewer than 2 runs).",
        "",
        *(md.markdown_table(list(values[0]), rows) if rows else ["No group."]),
    ]
    no_value = [r for r in c.runs if r.status == "completed" and r.final_return is None]
    if no_value and c.metric is not None:
        out += ["", f"Completed without a finite `{c.metric}` (not counted):", ""]
        out += [f"- {r.agent}, replicate {r.replicate} (`{md.where(r.path, c.out_dir)}`)"
                for r in no_value]  # fmt: skip
    return out


def _improvements(c: AppContent) -> list[str]:
    out = [
        f"P(X > Y): the probability that a run of X has a higher `{c.metric}` than a run of Y "
        "(Mann–Whitney, ties count one half), with its 95% bootstrap CI. 0.5 means no "
        "difference; a CI that excludes 0.5 is a difference the data support. Higher is taken "
        "as better: for a loss, P(X > Y) above 0.5 says X is worse.",
        "",
        *md.improvement_table(c.improvements, SPEC),
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


def _comparisons(c: AppContent) -> list[str]:
    seeds = {"seeds": lambda x: c.seeds[(x.a, x.b)]}
    return [
        f"A − B: difference of the mean `{c.metric}`. Runs pair by replicate index (and root): "
        "replicate r of A with replicate r of B. seeds: `shared` when every pair drew the same "
        "shared seeds (only agent-side keys, `rlsweep.Keys(agent=...)`, differ between A and "
        "B: common random numbers, which sharpen the comparison), `independent` when their "
        "seeds differ. Paired rows give the bootstrap CI of the mean paired difference, the "
        "two-sided Wilcoxon signed-rank p-value, that p-value Holm-adjusted over every paired "
        "test in this table, and the correlation r between paired values. Unpaired rows fall "
        "back to independent bootstrap CIs.",
        "",
        *md.comparison_table(c.comparisons, SPEC, seeds, first=False),
        *md.comparison_notes(c.comparisons, lambda _: "", _REASONS),
    ]


def render_app_report(c: AppContent) -> str:
    """The Markdown text of the report (a pure function of its content)."""
    parts = [*_intro(c), "", *_groups_section(c)]
    if c.metric is not None:
        parts += [
            "",
            *md.section(
                "Probability of improvement",
                c.improvements,
                "No comparison: fewer than two groups with a completed run.",
                lambda: _improvements(c),
            ),
            "",
            *md.section(
                "Paired comparisons",
                c.comparisons,
                "No comparison: fewer than two groups with completed runs.",
                lambda: _comparisons(c),
            ),
        ]
    caption = (
        f"IQM of `{c.metric}` over completed runs against the step it was logged at "
        "(metrics.csv), with a pointwise 95% bootstrap CI band; one colour per group."
    )
    parts += [
        "",
        *md.curves_section(c.plot_names, caption, c.curves_note),
        "",
        *md.jobs_section(c, GRID),
        "",
        *md.data_section("(job, row of its metrics.csv)", c.columns),
    ]
    return "\n".join(parts) + "\n"
