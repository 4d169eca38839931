"""report.md of a sweep of rlsweep's own agents: per (agent, env) statistics of the final
evaluation return, normalised aggregates across envs, the probability of improvement, paired
comparisons, learning curves, and the failed, incomplete and missing jobs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rlsweep.report.analysis import AGGREGATES, AggregateStats, CellStats, ScoreMatrices
from rlsweep.report.markdown import (
    Content,
    Grid,
    bootstrap_note,
    comparison_notes,
    comparison_table,
    curves_section,
    data_section,
    fmt_interval,
    fmt_num,
    header,
    improvement_table,
    jobs_section,
    markdown_table,
)
from rlsweep.report.runs import cells_of
from rlsweep.report.tidy import TIDY_COLUMNS

__all__ = ["AgentsContent", "cell_values", "render_report"]

GRID = Grid(name=lambda agent, env: f"{agent} on {env}", cells="agent x env", same="agent, env")


@dataclass(frozen=True)
class AgentsContent(Content):
    """Everything the Markdown shows."""

    sweeps: tuple[Path, ...]
    cells: tuple[CellStats, ...]
    baselines: dict[str, tuple[float, float]]
    reasons: dict[str, str]
    matrices: ScoreMatrices
    aggregates: tuple[AggregateStats, ...]


def cell_values(c: CellStats) -> dict[str, str]:
    """A cell's row, by column: agent, env, n, failed, incomplete, missing, mean, its CI,
    median, IQM, its CI, std."""
    return {
        "agent": c.agent,
        "env": c.env,
        "n": str(c.completed),
        "failed": str(c.failed),
        "incomplete": str(c.incomplete),
        "missing": str(c.missing),
        "mean": fmt_num(c.mean),
        "mean 95% CI": fmt_interval(*c.mean_ci),
        "median": fmt_num(c.median),
        "IQM": fmt_num(c.iqm),
        "IQM 95% CI": fmt_interval(*c.iqm_ci),
        "std": fmt_num(c.std),
    }


def _cells_section(cells: Sequence[CellStats]) -> list[str]:
    values = [cell_values(c) for c in cells]
    rows = [list(v.values()) for v in values]
    return [
        "## Final return per agent and environment",
        "",
        "Final evaluation return of each completed run (the mean over its final evaluation "
        "episodes). n counts completed runs only; failed, incomplete and missing runs are "
        "counted apart and listed at the end. IQM: mean of the middle 50% of runs. std: sample "
        "standard deviation. CIs: percentile bootstrap over runs (none with fewer than 2 runs).",
        "",
        *(markdown_table(list(values[0]), rows) if rows else ["No (agent, env) cell."]),
    ]


def _baselines_table(c: AgentsContent) -> list[str]:
    rows = [[env, fmt_num(lo), fmt_num(hi), "yes" if env in c.matrices.envs else "no"]
            for env, (lo, hi) in sorted(c.baselines.items())]  # fmt: skip
    rows += [[env, "–", "–", f"no: {why}"] for env, why in sorted(c.reasons.items())]
    return markdown_table(["env", "random", "reference", "in the aggregate"], sorted(rows))


def _aggregate_section(c: AgentsContent) -> list[str]:
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
        [a.agent, f"{a.runs} x {a.envs}"]
        + [f"{fmt_num(v[0], '.3f')} {fmt_interval(v[1], v[2], '.3f')}" for v in a.values.values()]
        for a in c.aggregates
    ]
    out += [
        f"Aggregates over {len(c.matrices.envs)} env(s) ({', '.join(c.matrices.envs)}), each "
        "with its 95% stratified bootstrap CI (runs resampled within each env). Optimality "
        "gap: mean of max(1 − score, 0), lower is better.",
        "",
        *markdown_table(["agent", "runs x envs", *AGGREGATES], rows),
        "",
        f"![performance profiles]({c.plot_names['profiles']})",
        "",
        "Performance profile: the fraction of runs (over all envs) whose normalised score "
        "exceeds τ, with pointwise 95% CI bands; a curve above another is better everywhere.",
    ]
    if c.improvements:
        out += [
            "",
            "### Probability of improvement",
            "",
            "P(X > Y): the probability that a run of X scores higher than a run of Y on an env "
            "drawn at random (Mann–Whitney, ties count one half), averaged over envs. 0.5 means "
            "no difference; a CI that excludes 0.5 is a difference the data support.",
            "",
            *improvement_table(c.improvements, ".3f"),
            "",
            f"![probability of improvement]({c.plot_names['improvement']})",
        ]
    return out


def _paired_section(c: AgentsContent) -> list[str]:
    out = [
        "## Paired comparisons",
        "",
        "A − B: difference of mean final returns on each env. Under common random numbers (the "
        "default seeding), replicate r of A and replicate r of B saw the same environment "
        "seeds; runs pair when both seeds.json say common_random_numbers is true and their "
        "root and replicate match. Paired rows give the bootstrap CI of the mean paired "
        "difference, the two-sided Wilcoxon signed-rank p-value, that p-value Holm-adjusted "
        "over every paired test in this table (family-wise error control across agents and "
        "envs), and the correlation r between paired returns (the higher, the more pairing "
        "sharpens the comparison). Unpaired rows fall back to independent bootstrap CIs.",
        "",
    ]
    if not c.comparisons:
        return [*out, "No comparison: fewer than two agents with completed runs on a shared env."]
    table = comparison_table(c.comparisons, ".2f", {"env": lambda x: x.env}, first=True)
    return out + table + comparison_notes(c.comparisons, lambda x: f"{x.env}, ", {})


def render_report(c: AgentsContent) -> str:
    """The Markdown text of the report (a pure function of its content)."""
    replicates = len({r.replicate for r in c.runs if r.replicate is not None})
    *title, counts = header(c.sweeps, c)
    parts = [
        *title,
        f"{counts} ({len(cells_of(c.runs))} agent-env cells x {replicates} replicates). "
        + bootstrap_note(c, "cell"),
        "",
        *_cells_section(c.cells),
        "",
        *_aggregate_section(c),
        "",
        *_paired_section(c),
        "",
        *curves_section(
            c.plot_names,
            "IQM of the evaluation return over completed runs against environment steps, with "
            "a pointwise 95% bootstrap CI band; one panel per env, one colour per agent.",
            "No completed run logged evaluations.",
        ),
        "",
        *jobs_section(c, GRID),
        "",
        *data_section("(job, evaluation step)", TIDY_COLUMNS),
    ]
    return "\n".join(parts) + "\n"
