"""report.md: one render for every sweep, with optional sections.

Every report has its header, the metric per group (and task), the pairwise sections (the
probability of improvement, paired comparisons), learning curves, the failed, incomplete and
missing jobs, and its data files; any app's report, every name its jobs returned or logged
(its "Metrics", listed there alone). rlsweep's own agents' report adds scores normalised per env
(:func:`~rlsweep.report.sections.across_envs`); a grid of many groups adds its top groups and
the metric against each swept key (:mod:`rlsweep.report.sections`). rlsweep's own agents'
returns read in two decimals, any app's metric in four significant digits (its own scale).
"""

from __future__ import annotations

from collections.abc import Sequence

from rlsweep.report import markdown as md
from rlsweep.report import sections
from rlsweep.report.analysis import GroupStats
from rlsweep.report.figures import log_hint
from rlsweep.report.markdown import Content
from rlsweep.report.metrics import curve_series, other_names_note
from rlsweep.report.runs import cells_of

__all__ = ["AGENTS_GRID", "APP_GRID", "grid_of", "group_values", "render_report", "spec_of"]

AGENTS_GRID = md.Grid(
    name=lambda agent, env: f"{agent} on {env}", cells="agent x env", same="agent, env"
)
APP_GRID = md.Grid(name=lambda group, _: group, cells="group", same="group")
_REASONS = {
    "no seeds.json": "no recorded identity",
    "common random numbers off (seeding.common_random_numbers: false)": (
        "common random numbers off in the recorded identity"
    ),
}


def grid_of(c: Content) -> md.Grid:
    return AGENTS_GRID if c.sweep.built_in else APP_GRID


def spec_of(c: Content) -> str:
    return ".2f" if c.sweep.built_in else ".4g"


def group_values(g: GroupStats, *, built_in: bool = False) -> dict[str, str]:
    """A row of the table of groups, by column. rlsweep's agents: agent, env, n, failed,
    incomplete, missing, mean, its CI, median, IQM, its CI, std; any app: group, n, failed,
    incomplete, missing, mean, its CI, median, its CI, IQM, its CI, std."""
    spec = ".2f" if built_in else ".4g"
    first = {"agent": g.group, "env": g.task} if built_in else {"group": g.group}
    values = {**first, "n": str(g.completed), "failed": str(g.failed),
              "incomplete": str(g.incomplete), "missing": str(g.missing)}  # fmt: skip
    estimates = [("mean", g.mean, g.mean_ci), ("median", g.median, g.median_ci),
                 ("IQM", g.iqm, g.iqm_ci)]  # fmt: skip
    for name, point, ci in estimates:
        values[name] = md.fmt_num(point, spec)
        if not (built_in and name == "median"):
            values[f"{name} 95% CI"] = md.fmt_interval(*ci, spec)
    values["std"] = md.fmt_num(g.std, spec)
    return values


# --------------------------------------------------------------------------------------------
# The top of the report


def _metric_sentence(c: Content) -> str:
    m = c.metric
    if m.name is None:
        return f"No statistics: {m.reason}."
    text = f"Metric: `{m.name}`, {m.reason}{other_names_note(m, 'under Metrics')}."
    if m.others:
        text += (
            " Another: `python -m rlsweep.report SWEEP_DIR --metric NAME`, or "
            "`hydra.sweeper.metric=NAME` on the sweep's command line."
        )
    return text


def _metrics_section(c: Content) -> list[str]:
    """Every name the completed jobs returned or logged, once each (none: no section)."""
    m = c.metric
    only_logged = [n for n in m.logged if n not in m.returned]
    total = len(m.returned) + len(only_logged)
    if not total:
        return []

    def listed(names: Sequence[str]) -> str:
        notes = {
            n: [
                *(["the metric"] if n == m.name else []),
                *(["also logged"] if n in m.returned and n in m.logged else []),
            ]
            for n in names
        }
        return ", ".join(
            f"`{n}`" + (f" ({'; '.join(notes[n])})" if notes[n] else "") for n in names
        )

    items = [
        (m.returned, f"- returned ({len(m.returned)}, a number in `result.json`): "),
        (only_logged, f"- logged ({len(only_logged)}, a series: a job's value is its last): "),
    ]
    return [
        "## Metrics",
        "",
        (
            "The one name the completed jobs returned or logged."
            if total == 1
            else f"The {total} names the completed jobs returned or logged, each once: the "
            "report is on any of them with `python -m rlsweep.report SWEEP_DIR --metric NAME`, "
            "or `hydra.sweeper.metric=NAME` on the sweep's command line."
        )
        + " A job's value of a name it returned and logged is the number it returned.",
        "",
        *[intro + listed(names) for names, intro in items if names],
        "",
    ]


def _replicates_sentence(c: Content) -> str:
    key = c.sweep.replicate_key
    if key is None:
        return "Replicates: none (the sweep has no replicate key): every job is a group of its own."
    recorded = c.sweep.replicate_from in ("result.json", "sweep.json")
    where = "the replicate key the sweep recorded" if recorded else "the replicate index "
    where += "" if recorded else "recorded with each job"
    root = (
        f" `{c.sweep.root_key}` is the root seed: runs of every root are pooled."
        if c.sweep.root_key
        else ""
    )
    return f"Replicates: the values of `{key}` ({where}).{root}"


def _intro(c: Content) -> list[str]:
    replicates = len({r.replicate for r in c.runs if r.replicate is not None})
    *title, counts = md.header(c.sweep.sweeps, c)
    if c.sweep.built_in:
        return [
            *title,
            f"{counts} ({len(cells_of(c.runs))} agent-env cells x {replicates} replicates). "
            + md.bootstrap_note(c, "cell"),
        ]
    keys = c.sweep.group_keys
    if keys:
        groups = (
            f"Groups: the jobs with the same values of the swept keys "
            f"{', '.join(f'`{k}`' for k in keys)} (the keys whose values differ between the "
            f"jobs, other than the replicate key)."
        )
    else:
        groups = "No key but the replicate differs between the jobs: one group, `all`."
    if c.sweep.constant:
        shared = ", ".join(f"`{k}={v}`" for k, v in sorted(c.sweep.constant.items()))
        groups += f" Every job was run with {shared} (the sweep's sweep.json)."
    n = len(c.groups)
    return [
        *title,
        f"{counts} ({n} group{'' if n == 1 else 's'} x {replicates} "
        f"replicate{'' if replicates == 1 else 's'}).",
        "",
        f"{groups} {_replicates_sentence(c)} {_metric_sentence(c)}",
        "",
        md.bootstrap_note(c, "group"),
    ]


def _groups_section(c: Content) -> list[str]:
    values = [group_values(g, built_in=c.sweep.built_in) for g in c.groups]
    rows = [list(v.values()) for v in values]
    if c.sweep.built_in:
        return [
            "## Final return per agent and environment",
            "",
            "Final evaluation return of each completed run (the mean over its final "
            "evaluation episodes). n counts completed runs only; failed, incomplete and missing "
            "runs are counted apart and listed at the end. IQM: mean of the middle 50% of runs. "
            "std: sample standard deviation. CIs: percentile bootstrap over runs (none with "
            "fewer than 2 runs).",
            "",
            *(md.markdown_table(list(values[0]), rows) if rows else ["No (agent, env) cell."]),
        ]
    name = f"`{c.metric.name}`" if c.metric.name is not None else "The metric"
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
    no_value = [r for r in c.runs if r.status == "completed" and r.value(c.metric.name) is None]
    if no_value and c.metric.name is not None:
        out += ["", f"Completed without a finite `{c.metric.name}` (not counted):", ""]
        out += [f"- {r.group}, replicate {r.replicate} (`{md.where(r.path, c.out_dir)}`)"
                for r in no_value]  # fmt: skip
    return out


def render_report(c: Content) -> str:
    """The Markdown text of the report (a pure function of its content)."""
    parts = [*_intro(c), ""]
    if not c.sweep.built_in:
        parts += [*sections.grid_view(c)]
    parts += [*_groups_section(c), ""]
    if md.provenance_warnings(c.runs):
        parts += [*md.provenance_warnings(c.runs), ""]
    if c.sweep.built_in:
        parts += [*sections.across_envs(c), "", *sections.paired_section(c, _REASONS), ""]
        rows, columns = "(job, evaluation step)", c.columns
        caption = (
            "IQM of the evaluation return over completed runs against environment steps, with "
            "a pointwise 95% bootstrap CI band; one panel per env, one colour per agent."
        )
    else:
        if c.metric.name is not None:
            parts += [*sections.improvement_section(c), "",
                      *sections.paired_section(c, _REASONS), ""]  # fmt: skip
        # One column per logged series: the names are listed once, under Metrics.
        logged = set(c.metric.logged)
        rows, columns = "(job, logged step)", tuple(n for n in c.columns if n not in logged)
        if logged:
            columns += (f"then one per logged series (the {len(logged)} under Metrics)",)
        series = curve_series(c.metric)
        caption = (
            f"IQM of `{series}` over completed runs against the step it was logged at, "
            "with a pointwise 95% bootstrap CI band; one colour per group."
        )
        if series != c.metric.name:
            caption += (
                f" The jobs logged no series named `{c.metric.name}`: these are the curves of "
                f"`{series}`, a series they logged (`{log_hint(c.metric.name or 'value')}` "
                "logs the metric per step)."
            )
    parts += [
        *md.curves_section(c.plot_names, caption + sections.curves_cap(c), c.curves_note),
        "",
        *md.jobs_section(c, grid_of(c)),
        "",
        *([] if c.sweep.built_in else _metrics_section(c)),
        *md.data_section(rows, columns),
    ]
    return "\n".join(parts) + "\n"
