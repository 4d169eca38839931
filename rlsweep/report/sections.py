"""The optional sections of report.md: scores normalised across envs (rlsweep's own agents),
the probability of improvement and the paired comparisons with the groups they leave out, and
a grid's view (its top groups, the metric against each swept key). Pure functions of the
report's :class:`~rlsweep.report.markdown.Content`."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rlsweep.report import markdown as md
from rlsweep.report.analysis import AGGREGATES
from rlsweep.report.comparisons import Comparison
from rlsweep.report.jobfiles import show
from rlsweep.report.markdown import Content
from rlsweep.report.ranking import COMPARED, TOP, Compared

__all__ = [
    "across_envs",
    "curves_cap",
    "grid_view",
    "improvement_section",
    "left_out",
    "paired_section",
]


def left_out(compared: Compared) -> list[str]:
    """The sentence on the groups a pairwise section leaves out (none if it leaves none)."""
    parts = []
    if compared.single:
        parts.append(
            f"{compared.single} group(s) with fewer than two runs are left out: a comparison "
            "of single runs says nothing about their groups."
        )
    if compared.capped:
        parts.append(
            f"Compared: the {COMPARED} groups of highest IQM among the "
            f"{len(compared.groups) + compared.capped} with two runs or more "
            f"({compared.capped} left out; every group is in the table above)."
        )
    return [" ".join(parts), ""] if parts else []


def curves_cap(c: Content) -> str:
    """The caption's words on the groups the learning curves leave out, if any."""
    drawn = len({g.group for g in c.groups})
    if drawn <= COMPARED or "curves" not in c.plot_names:
        return ""
    return f" The {COMPARED} groups of highest IQM are drawn, of {drawn}."


# --------------------------------------------------------------------------------------------
# rlsweep's agents: across environments


def _baselines_table(c: Content) -> list[str]:
    rows = [[env, md.fmt_num(lo), md.fmt_num(hi), "yes" if env in c.matrices.envs else "no"]
            for env, (lo, hi) in sorted(c.baselines.items())]  # fmt: skip
    rows += [[env, "–", "–", f"no: {why}"] for env, why in sorted(c.reasons.items())]
    return md.markdown_table(["env", "random", "reference", "in the aggregate"], sorted(rows))


def _improvements_of_agents(c: Content) -> list[str]:
    if not c.improvements:
        return []
    return [
        "",
        "### Probability of improvement",
        "",
        "P(X > Y): the probability that a run of X scores higher than a run of Y on an env "
        "drawn at random (Mann–Whitney, ties count one half), averaged over envs. 0.5 means "
        "no difference; a CI that excludes 0.5 is a difference the data support.",
        "",
        *left_out(c.improved),
        *md.improvement_table(c.improvements, ".3f"),
        "",
        f"![probability of improvement]({c.plot_names['improvement']})",
    ]


def _aggregate(v: tuple[float, float, float]) -> str:
    return f"{md.fmt_num(v[0], '.3f')} {md.fmt_interval(v[1], v[2], '.3f')}"


def across_envs(c: Content) -> list[str]:
    """Scores normalised per env by its random and reference scores, aggregated."""
    notes = c.matrices.notes
    out = [
        "## Across environments (normalised scores)",
        "",
        "Each final return is normalised per env as (return − random) / (reference − random), "
        "with the random and reference scores of the env's config: 0 is a random policy, 1 "
        "the reference.",
        "",
        *_baselines_table(c),
        "",
        *(f"- {note}" for note in notes),
        *([""] if notes else []),
    ]
    if not c.aggregates:
        return [*out, "No aggregate: no env has baselines and a completed run of every agent."]
    rows = [
        [a.group, f"{a.runs} x {a.envs}", *map(_aggregate, a.values.values())] for a in c.aggregates
    ]
    out += [
        f"Aggregates over {len(c.matrices.envs)} env(s) ({', '.join(c.matrices.envs)}), each "
        "with its 95% stratified bootstrap CI (runs resampled within each env). Optimality "
        "gap: mean of max(1 − score, 0), lower is better.",
        "",
        *md.markdown_table(["agent", "runs x envs", *AGGREGATES], rows),
    ]
    if "profiles" in c.plot_names:
        out += [
            "",
            f"![performance profiles]({c.plot_names['profiles']})",
            "",
            "Performance profile: the fraction of runs (over all envs) whose normalised score "
            "exceeds τ, with pointwise 95% CI bands; a curve above another is better everywhere.",
        ]
    return out + _improvements_of_agents(c)


# --------------------------------------------------------------------------------------------
# Pairwise sections


def _improvements_of_groups(c: Content) -> list[str]:
    out = [
        f"P(X > Y): the probability that a run of X has a higher `{c.metric.name}` than a run "
        "of Y (Mann–Whitney, ties count one half), with its 95% bootstrap CI. 0.5 means no "
        "difference; a CI that excludes 0.5 is a difference the data support. Higher is taken "
        "as better: for a loss, P(X > Y) above 0.5 says X is worse.",
        "",
        *left_out(c.improved),
        *md.improvement_table(c.improvements, ".4g"),
    ]
    if "improvement" in c.plot_names:
        out += ["", f"![probability of improvement]({c.plot_names['improvement']})"]
    if "profiles" in c.plot_names:
        out += [
            "",
            f"![performance profiles]({c.plot_names['profiles']})",
            "",
            f"Performance profile: the fraction of a group's runs whose `{c.metric.name}` "
            "exceeds τ, with pointwise 95% CI bands.",
        ]
    return out


def improvement_section(c: Content) -> list[str]:
    """Any app's probability of improvement between its groups."""
    none = "No comparison: fewer than two groups with a completed run."
    if not c.improvements and (c.improved.single or c.improved.capped):
        none = " ".join([*left_out(c.improved)[:1], "No comparison is left."])
    return md.section(
        "Probability of improvement", c.improvements, none, lambda: _improvements_of_groups(c)
    )


def _paired_intro(c: Content) -> str:
    if c.sweep.built_in:
        return (
            "A − B: difference of mean final returns on each env. Under common random numbers "
            "(the default seeding), replicate r of A and replicate r of B saw the same "
            "environment seeds; runs pair when both seeds.json say common_random_numbers is "
            "true and their root and replicate match. Paired rows give the bootstrap CI of the "
            "mean paired difference, the two-sided Wilcoxon signed-rank p-value, that p-value "
            "Holm-adjusted over every paired test in this table (family-wise error control "
            "across agents and envs), and the correlation r between paired returns (the higher, "
            "the more pairing sharpens the comparison). Unpaired rows fall back to independent "
            "bootstrap CIs."
        )
    return (
        f"A − B: difference of the mean `{c.metric.name}`. Runs pair by replicate index (and "
        "root): replicate r of A with replicate r of B. seeds: `shared` when every pair drew "
        "the same shared seeds (only agent-side keys, `rlsweep.Keys(agent=...)`, differ "
        "between A and B: common random numbers, which sharpen the comparison), `independent` "
        "when their seeds differ. Paired rows give the bootstrap CI of the mean paired "
        "difference, the two-sided Wilcoxon signed-rank p-value, that p-value Holm-adjusted "
        "over every paired test in this table, and the correlation r between paired values. "
        "Unpaired rows fall back to independent bootstrap CIs."
    )


def paired_section(c: Content, reasons: Mapping[str, str]) -> list[str]:
    """The paired comparisons (A − B by replicate) of the groups compared: rlsweep's agents'
    on each env (its column first), any app's with whether pairs shared their seeds."""
    built_in = c.sweep.built_in
    columns: dict[str, Callable[[Comparison], str]] = (
        {"env": lambda x: x.task} if built_in else {"seeds": lambda x: c.seeds[(x.a, x.b)]}
    )
    intro = [_paired_intro(c), "", *left_out(c.paired)]
    table = [
        *md.comparison_table(c.comparisons, ".2f" if built_in else ".4g", columns,
                             first=built_in),
        *md.comparison_notes(c.comparisons, lambda x: f"{x.task}, " if built_in else "",
                             {} if built_in else reasons),
    ]  # fmt: skip
    if built_in:
        none = "No comparison: fewer than two agents with completed runs on a shared env."
        return ["## Paired comparisons", "", *intro, *(table if c.comparisons else [none])]
    none = "No comparison: fewer than two groups with completed runs."
    if not c.comparisons and (c.paired.single or c.paired.capped):
        none = " ".join([*left_out(c.paired)[:1], "No comparison is left."])
    return md.section("Paired comparisons", c.comparisons, none, lambda: [*intro, *table])


# --------------------------------------------------------------------------------------------
# A grid's view


def _top(c: Content) -> list[str]:
    spec = ".4g"
    rows = [
        [str(i), g.group, str(g.completed), md.fmt_num(g.iqm, spec),
         md.fmt_interval(*g.iqm_ci, spec), md.fmt_num(g.mean, spec)]
        for i, g in enumerate(c.top, start=1)
    ]  # fmt: skip
    return [
        "## Top groups",
        "",
        f"The {len(rows)} groups of highest IQM of `{c.metric.name}` (of {len(c.groups)}; "
        "higher is taken as better). With few runs a group's rank is luck as much as merit: "
        "read the intervals.",
        "",
        *md.markdown_table(["rank", "group", "n", "IQM", "IQM 95% CI", "mean"], rows),
        "",
    ]


def _keys(c: Content) -> list[str]:
    spec = ".4g"
    if len(c.keys) == 1:  # one key: its values are the groups, in the table below
        (key,) = c.keys
        intro = (
            f"`{c.metric.name}` against `{key}`: the mean over each value's runs with its 95% "
            "bootstrap CI (the numbers are those of the table of groups below)."
        )
    else:
        intro = (
            f"For each value of each swept key: the mean `{c.metric.name}` over the runs of "
            "every group with that value (pooled over the other keys) with its 95% bootstrap "
            "CI, and the best group there by IQM."
        )
    out = ["## The metric against each swept key", "", intro, ""]
    if "keys" in c.plot_names:
        out += [f"![metric against each swept key]({c.plot_names['keys']})", ""]
    if len(c.keys) == 1:
        return out
    for key, values in c.keys.items():
        rows = [
            [show(v.value), str(v.groups), str(v.runs), md.fmt_num(v.mean, spec),
             md.fmt_interval(v.low, v.high, spec), v.best, md.fmt_num(v.best_iqm, spec)]
            for v in values
        ]  # fmt: skip
        header = [key, "groups", "runs", "mean", "95% CI", "best group", "its IQM"]
        out += [*md.markdown_table(header, rows), ""]
    return out


def grid_view(c: Content) -> list[str]:
    """A grid of more than :data:`TOP` groups: its top groups; a grid of several swept keys,
    or of one with three values or more: the metric against each."""
    out: list[str] = []
    if c.metric.name is not None and len(c.groups) > TOP and c.top:
        out += _top(c)
    if c.metric.name is not None and c.keys:
        out += _keys(c)
    return out
