"""Markdown of report.md: number formats, tables, what a report shows (:class:`Content`), and
the sections every report has: the header, the probability of improvement and paired
comparison tables, learning curves, failed, incomplete and missing jobs, the data files.
Pure functions of the numbers they are given; :mod:`rlsweep.report.render` puts them together.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlsweep.report.analysis import AggregateStats, GroupStats, ImprovementStats, ScoreMatrices
from rlsweep.report.comparisons import Comparison
from rlsweep.report.files import EVALUATIONS_CSV, EVALUATIONS_PARQUET, parquet_available
from rlsweep.report.metrics import Metric
from rlsweep.report.ranking import Compared, KeyValue
from rlsweep.report.runs import (
    STATUSES,
    Run,
    Sweep,
    fresh_entropy,
    log_problems,
    mixed_code,
    mixed_numerics,
    run_order,
)

__all__ = [
    "Content",
    "Grid",
    "fmt_interval",
    "fmt_num",
    "markdown_table",
]


def fmt_num(x: float, spec: str = ".2f") -> str:
    """``x`` in the format ``spec`` (``.2f``, ``.4g``), without a minus sign on zero; ``–`` for
    NaN."""
    if math.isnan(x):
        return "–"
    text = format(x, spec)
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


def fmt_interval(low: float, high: float, spec: str = ".2f") -> str:
    if math.isnan(low) or math.isnan(high):
        return "–"
    return f"[{fmt_num(low, spec)}, {fmt_num(high, spec)}]"


def pvalue(p: float) -> str:
    if math.isnan(p):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def table_cell(text: str) -> str:
    """A table cell's text on one line: a line break as ``\\n`` and ``|`` escaped (a
    config value or a group label with either would break the table)."""
    if not any(c in text for c in "|\n\r"):
        return text
    return text.replace("|", "\\|").replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table, padded so it also reads well as plain text (each cell on one line:
    :func:`table_cell`)."""
    header = [table_cell(h) for h in header]
    rows = [[table_cell(c) for c in r] for r in rows]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]

    def line(cols: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)) + " |"

    return [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)]


def where(path: Path, out_dir: Path) -> str:
    """``path`` relative to the report's directory (as Markdown links resolve it)."""
    return Path(os.path.relpath(path, out_dir)).as_posix()


@dataclass(frozen=True)
class Content:
    """What a report.md shows."""

    sweep: Sweep
    runs: tuple[Run, ...]  # deduplicated
    superseded: tuple[Run, ...]
    unplaced: tuple[Run, ...]  # completed, another job's at a kept run's place: not counted
    missing: tuple[tuple[str, str, int], ...]
    metric: Metric
    groups: tuple[GroupStats, ...]  # one per (group, task)
    improvements: tuple[ImprovementStats, ...]
    improved: Compared  # the groups the probabilities of improvement compare
    comparisons: tuple[Comparison, ...]
    paired: Compared  # the groups the paired comparisons compare (the first task's)
    seeds: dict[tuple[str, str], str]  # any app's (A, B) -> shared / independent / mixed / –
    plot_names: dict[str, str]  # plots written, by role
    curves_note: str  # why there are no learning curves
    columns: tuple[str, ...]  # of the tidy table
    out_dir: Path
    seed: int
    reps: int
    # rlsweep's agents: scores normalised per env, and their aggregates.
    baselines: dict[str, tuple[float, float]]
    reasons: dict[str, str]
    matrices: ScoreMatrices
    aggregates: tuple[AggregateStats, ...]
    # A grid's view: its top groups, and the metric against each swept key.
    top: tuple[GroupStats, ...]
    keys: dict[str, tuple[KeyValue, ...]]
    # The job directories of the grids the sweeps recorded (sweep.json) that hold no job;
    # grid_recorded: every sweep recorded its grid (missing jobs known, not inferred).
    missing_dirs: tuple[Path, ...] = ()
    grid_recorded: bool = False


@dataclass(frozen=True)
class Grid:
    """How a report names the cells of its grid: (agent, env), or any app's groups."""

    name: Callable[[str, str], str]  # (agent, env) -> "ppo on CartPole-v1", or the group
    cells: str  # what the grid crosses with the replicates: "agent x env", "group"
    same: str  # what a run shares with the one it duplicates: "agent, env", "group"


# --------------------------------------------------------------------------------------------
# Sections


def section(
    title: str, items: Sequence[object], none: str, body: Callable[[], list[str]]
) -> list[str]:
    """``## title``, then ``body()``, or the sentence ``none`` when there are no ``items``."""
    return [f"## {title}", "", *(body() if items else [none])]


def header(sweeps: Sequence[Path], c: Content) -> list[str]:
    """The title, the sweep directories and the first words of the count of jobs."""
    counts = {s: sum(r.status == s for r in c.runs) for s in STATUSES}
    listed = ", ".join(f"`{s}`" for s in sweeps)
    not_counted = counts["damaged"] + counts["unverified"]
    return [
        "# Sweep report",
        "",
        f"Sweep director{'y' if len(sweeps) == 1 else 'ies'}: {listed}.",
        "",
        f"{len(c.runs)} jobs: {counts['completed']} completed, {counts['failed']} failed, "
        f"{counts['incomplete']} incomplete"
        + (
            f", {not_counted} whose result.json is not counted ({counts['damaged']} damaged, "
            f"{counts['unverified']} unverified: listed at the end)"
            if not_counted
            else ""
        )
        + (
            f", and {len(c.unplaced)} completed not placed in a group (listed at the end)"
            if c.unplaced
            else ""
        )
        + f"; {missing_count(c)} missing from the grid",
    ]


def missing_count(c: Content) -> int:
    """Jobs of the grid with no directory: those of the recorded grids, else inferred."""
    return len(c.missing_dirs) + (0 if c.grid_recorded else len(c.missing))


def bootstrap_note(c: Content, unit: str) -> str:
    return (
        f"All CIs are 95% percentile bootstrap intervals ({c.reps} resamples; numpy "
        f"Generators seeded from seed {c.seed} and the statistic's name, so this file is "
        f"reproducible byte for byte). With few runs per {unit} (under about 10) percentile "
        "bootstrap intervals are too narrow: read them as rough."
    )


def improvement_table(improvements: Sequence[ImprovementStats], spec: str) -> list[str]:
    rows = [[f"P({p.x} > {p.y})", fmt_num(p.point, spec), fmt_interval(p.low, p.high, spec)]
            for p in improvements]  # fmt: skip
    return markdown_table(["comparison", "estimate", "95% CI"], rows)


def comparison_table(
    comparisons: Sequence[Comparison],
    spec: str,
    columns: Mapping[str, Callable[[Comparison], str]],
    *,
    first: bool,
) -> list[str]:
    """The paired comparisons: A − B, runs, n, difference, its CI, the Wilcoxon and Holm
    p-values, r, and ``columns`` (before them if ``first``, else after)."""
    n_tests = sum(c.paired for c in comparisons)
    header = ["A − B", "runs", "n", "difference", "95% CI", "Wilcoxon p",
              f"Holm p ({n_tests} tests)", "r"]  # fmt: skip
    rows = []
    for c in comparisons:
        cells = [
            f"{c.a} − {c.b}",
            "paired" if c.paired else "unpaired",
            str(c.n_pairs) if c.paired else f"{c.n_a} / {c.n_b}",
            fmt_num(c.difference, spec),
            fmt_interval(c.low, c.high, spec),
            pvalue(c.p_value),
            pvalue(c.p_holm),
            fmt_num(c.correlation, spec),
        ]
        more = [value(c) for value in columns.values()]
        rows.append([*more, *cells] if first else [*cells, *more])
    return markdown_table([*columns, *header] if first else [*header, *columns], rows)


def comparison_notes(
    comparisons: Sequence[Comparison],
    prefix: Callable[[Comparison], str],
    reasons: Mapping[str, str],
) -> list[str]:
    """A line per comparison with a note (why it is not paired, runs left out)."""
    notes = [
        f"- {prefix(c)}{c.a} − {c.b}: "
        + (
            c.note
            if c.paired
            else f"not paired ({reasons.get(c.note, c.note)}): unpaired CI, no test."
        )
        for c in comparisons
        if c.note
    ]
    return ["", *notes] if notes else []


def curves_section(plot_names: Mapping[str, str], caption: str, otherwise: str) -> list[str]:
    out = ["## Learning curves", ""]
    if "curves" not in plot_names:
        return [*out, otherwise]
    return [*out, caption, "", f"![learning curves]({plot_names['curves']})"]


def _problems(c: Content, grid: Grid) -> list[str]:
    out: list[str] = []
    for title, status in (
        ("Failed (the traceback is in the job's error.txt)", "failed"),
        ("Incomplete (started, no result.json: killed or still running)", "incomplete"),
    ):
        group = [r for r in c.runs if r.status == status]
        if group:
            out += [f"{title}:", ""]
            out += [
                f"- {grid.name(r.group, r.task)}, replicate {r.replicate}"
                + (f": {r.error}" if r.error else "")
                + f" (`{where(r.path, c.out_dir)}`)"
                for r in sorted(group, key=lambda r: (r.group, r.task, *run_order(r)))
            ]
            out.append("")
    return out


def _not_counted(c: Content) -> list[str]:
    """The jobs whose result.json is not counted, and the log files read only in part."""
    out: list[str] = []
    bad = [r for r in c.runs if r.status in ("damaged", "unverified")]
    if bad:
        out += [
            "Not counted: result.json damaged (not readable as a JSON object) or unverified "
            "(not rlsweep's record of this job: no identity, an identity that does not match "
            "its SHA-256, or another job's). Each job is run again by resuming the sweep:",
            "",
            *(
                f"- `{where(r.path / 'result.json', c.out_dir)}`: {r.status}: {_reason(r)}"
                for r in sorted(bad, key=run_order)
            ),
            "",
        ]
    logs = log_problems(c.runs)
    if logs:
        out += [
            "Log files cut or damaged, read up to their last whole record (a series from one "
            "ends at the step said):",
            "",
            *(f"- `{where(r.path, c.out_dir)}`: {text}" for r, text in logs),
            "",
        ]
    return out


def _reason(r: Run) -> str:
    """Why a job's result.json is not counted, without the path said before it."""
    text = r.problem or r.status
    prefix = f"{r.path / 'result.json'}: "
    return table_cell(text[len(prefix) :] if text.startswith(prefix) else text)


def _missing(c: Content, grid: Grid) -> list[str]:
    """The grid's jobs with no directory: those of the grids the sweeps recorded, and, but
    when every sweep recorded its grid, those inferred."""
    out: list[str] = []
    if c.missing_dirs:
        out += [
            "Missing (in the grid the sweep recorded in sweep.json, no job directory: "
            "deleted, or never started):",
            "",
            *(f"- `{where(path, c.out_dir)}`" for path in c.missing_dirs),
            "",
        ]
    if c.missing and not c.grid_recorded:
        out += [
            f"Missing (no job directory; the grid is every {grid.cells} x replicate index seen):",
            "",
            *(f"- {grid.name(a, e)}, replicate {k}" for a, e, k in c.missing),
            "",
        ]
    return out


def jobs_section(c: Content, grid: Grid) -> list[str]:
    out = ["## Failed, incomplete and missing jobs", ""]
    if all(r.status == "completed" for r in c.runs) and not (
        missing_count(c) or c.superseded or c.unplaced or log_problems(c.runs)
    ):
        return [*out, "None: every job of the grid completed."]
    out += _problems(c, grid)
    out += _not_counted(c)
    out += _missing(c, grid)
    if c.unplaced:
        out += [
            f"Not placed in any group, not counted ({len(c.unplaced)} completed): another job "
            f"(another identity in its result.json) holds the same {grid.same}, root and "
            "replicate. Their numbers are not merged with that job's; report them apart "
            "(their own sweep directory) or run them under their own settings:",
            "",
            *(f"- `{where(r.path, c.out_dir)}`" for r in c.unplaced),
            "",
        ]
    if c.superseded:
        out += [
            f"The same job found again (its identity, or the same {grid.same}, root and "
            "replicate; the completed or first one is used), counted once:",
            "",
            *(f"- `{where(r.path, c.out_dir)}` ({r.status})" for r in c.superseded),
            "",
        ]
    return out[:-1] if out[-1] == "" else out


def provenance_note(runs: Sequence[Run]) -> str:
    """:func:`provenance_warnings` as paragraphs after a text ("" when there is none)."""
    return "".join(f"\n{line}\n" for line in provenance_warnings(runs))


def _cells(mixed: Sequence[tuple[str, str, int]], what: str, unit: str = "") -> str:
    """``the jobs of 1 group <what> (ppo on E: 2<unit>)``: the cells, the first five named."""
    cells = ", ".join(f"{g}{' on ' + t if t else ''}: {n}{unit}" for g, t, n in mixed[:5])
    groups = "1 group" if len(mixed) == 1 else f"{len(mixed)} groups"
    return f"the jobs of {groups} {what} ({cells}{', ...' if len(mixed) > 5 else ''})"


def provenance_warnings(runs: Sequence[Run]) -> list[str]:
    """A warning for the groups whose completed jobs ran under different numerics
    fingerprints, for those that ran different versions of the app's code, and for those
    with jobs that started sub-processes fresh (not reproducible); or none."""
    out = []
    numerics = mixed_numerics(runs)
    if numerics:
        out.append(
            f"Warning: {_cells(numerics, 'ran under different numerics fingerprints')}. Each "
            "job's is in its result.json under rlsweep.numerics: other CPUs or libraries "
            "choose other floating-point kernels, so the same job may give other numbers "
            "under each. numerics=portable (hydra.launcher.numerics) pins the kernels."
        )
    code = mixed_code(runs)
    if code:
        versions = sorted({r.code_text or "?" for r in runs if r.code is not None})
        out.append(
            f"Warning: {_cells(code, 'ran different versions of the app code')}: "
            f"{', '.join(versions[:4])}{', ...' if len(versions) > 4 else ''}. Each job's "
            "is in its result.json under rlsweep.code: the code changed between jobs of one "
            "group, so its numbers may not come from one program. "
            "hydra.launcher.identity.code=true runs jobs again when the code changes."
        )
    fresh = fresh_entropy(runs)
    if fresh:
        out.append(
            f"Warning: {_cells(fresh, 'started sub-processes fresh', ' job(s)')} with "
            "multiprocessing's spawn or forkserver: rlsweep cannot give those their own streams, so randomness they leave unseeded "
            "drew fresh OS entropy, and those jobs may give other numbers on every run (each "
            "job's seeds.json counts them; python -m rlsweep.check runs a job twice to see). "
            "Seed them from rlsweep.current().seeds, or start them with fork."
        )
    return out


def data_section(rows: str, columns: Sequence[str]) -> list[str]:
    """The tidy table's files: one row per ``rows``, with ``columns`` (the Parquet file only
    where pyarrow is installed, as only then it is written)."""
    if not parquet_available():
        return [
            "## Data",
            "",
            f"`{EVALUATIONS_CSV}`: one row per {rows}, columns {', '.join(columns)}. Load with "
            f'`pd.read_csv("{EVALUATIONS_CSV}")` (`{EVALUATIONS_PARQUET}` too with the '
            "`parquet` extra: `pip install 'rlsweep[parquet]'`).",
        ]
    return [
        "## Data",
        "",
        f"`{EVALUATIONS_PARQUET}` and `{EVALUATIONS_CSV}`: one row per {rows}, columns "
        f'{", ".join(columns)}. Load with `pd.read_parquet("{EVALUATIONS_PARQUET}")`.',
    ]
