"""The end-of-sweep summary: a table per (agent, env) and a learning-curve plot.

It reads the sweep directory (not the launcher's return values), so it covers every job
ever run into that directory, and it is reproducible: the bootstrap draws from a numpy
Generator with a fixed seed.
"""

from __future__ import annotations

import csv
import io
import math
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from rlsweep import stats
from rlsweep.store import JobRecord, atomic_write_json, atomic_write_text, read_metrics, read_sweep

SUMMARY_MD = "summary.md"
SUMMARY_CSV = "summary.csv"
SUMMARY_JSON = "summary.json"
CURVES_PNG = "learning_curves.png"
BOOTSTRAP_SEED = 0
BOOTSTRAP_REPS = 2000


@dataclass(frozen=True)
class CellSummary:
    """Final evaluation return over the replicates of one (agent, env) cell."""

    agent: str
    env: str
    completed: int
    failed: int
    incomplete: int
    mean: float
    median: float
    iqm: float
    ci_low: float
    ci_high: float

    def row(self) -> dict[str, object]:
        return {
            "agent": self.agent,
            "env": self.env,
            "completed": self.completed,
            "failed": self.failed,
            "incomplete": self.incomplete,
            "mean": self.mean,
            "median": self.median,
            "iqm": self.iqm,
            "iqm_ci95_low": self.ci_low,
            "iqm_ci95_high": self.ci_high,
        }


def summarize_cell(agent: str, env: str, records: list[JobRecord]) -> CellSummary:
    finals = np.array([r.final_return for r in records if r.status == "completed"], dtype=float)
    count = {s: sum(r.status == s for r in records) for s in ("completed", "failed", "incomplete")}
    if finals.size == 0:
        nan = math.nan
        return CellSummary(
            agent, env, 0, count["failed"], count["incomplete"], nan, nan, nan, nan, nan
        )
    point, low, high = stats.bootstrap_ci(
        finals, stats.iqm, reps=BOOTSTRAP_REPS, confidence=0.95, seed=BOOTSTRAP_SEED
    )
    return CellSummary(
        agent=agent,
        env=env,
        completed=count["completed"],
        failed=count["failed"],
        incomplete=count["incomplete"],
        mean=float(stats.mean(finals)),
        median=float(stats.median(finals)),
        iqm=float(point),
        ci_low=float(low),
        ci_high=float(high),
    )


def _fmt(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.2f}"


def table_text(cells: list[CellSummary]) -> str:
    """A Markdown table, aligned so it also reads well in a terminal."""
    header = ("agent", "env", "done", "failed", "incomplete", "mean", "median", "IQM", "IQM 95% CI")
    rows = [
        (
            c.agent,
            c.env,
            str(c.completed),
            str(c.failed),
            str(c.incomplete),
            _fmt(c.mean),
            _fmt(c.median),
            _fmt(c.iqm),
            "-" if math.isnan(c.ci_low) else f"[{c.ci_low:.2f}, {c.ci_high:.2f}]",
        )
        for c in cells
    ]
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]

    def line(cols: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)) + " |"

    out = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)


def learning_curve_data(
    records: list[JobRecord],
) -> dict[str, dict[str, list[tuple[np.ndarray, np.ndarray]]]]:
    """env -> agent -> one (steps, eval return) pair per completed replicate."""
    curves: dict[str, dict[str, list[tuple[np.ndarray, np.ndarray]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in records:
        if r.status != "completed":
            continue
        rows = read_metrics(r.path)
        if rows:
            steps = np.array([row["step"] for row in rows])
            returns = np.array([row["eval_return_mean"] for row in rows])
            curves[r.env][r.agent].append((steps, returns))
    return {env: dict(agents) for env, agents in curves.items()}


@dataclass(frozen=True)
class SweepSummary:
    cells: list[CellSummary]
    failed: list[JobRecord]
    incomplete: list[JobRecord]
    text: str
    plot: Path | None


def summarize(sweep_dir: Path, *, echo: bool = True, stream: TextIO | None = None) -> SweepSummary:
    """Summarise every job in ``sweep_dir``; write summary.{md,csv,json} and the plot."""
    records = read_sweep(sweep_dir)
    groups: dict[tuple[str, str], list[JobRecord]] = defaultdict(list)
    for r in records:
        groups[(r.agent, r.env)].append(r)
    cells = [summarize_cell(agent, env, recs) for (agent, env), recs in sorted(groups.items())]
    failed = [r for r in records if r.status == "failed"]
    incomplete = [r for r in records if r.status == "incomplete"]

    parts = [
        f"# Sweep summary: {sweep_dir}",
        "",
        f"{len(records)} jobs: {sum(c.completed for c in cells)} completed, {len(failed)} failed, "
        f"{len(incomplete)} incomplete. Final evaluation return over replicates; "
        f"95% CI: percentile bootstrap of the IQM ({BOOTSTRAP_REPS} resamples, seed {BOOTSTRAP_SEED}).",
        "",
        table_text(cells),
    ]
    for title, group in (("Failed jobs", failed), ("Incomplete jobs (no result.json)", incomplete)):
        if group:
            parts += ["", f"## {title}", ""]
            for r in group:
                first = (r.error or "").strip().splitlines()[-1:] or [""]
                parts.append(f"- {r.path.name}: {first[0]}  (traceback: {r.path / 'error.txt'})")
                if r.error:
                    parts += ["", "```", r.error.rstrip(), "```", ""]

    plot_path: Path | None = None
    curves = learning_curve_data(records)
    if curves:
        from rlsweep.plots import learning_curves

        plot_path = sweep_dir / CURVES_PNG
        learning_curves(curves, plot_path, title=f"{sweep_dir.name}: evaluation return")
        parts += ["", f"![learning curves]({CURVES_PNG})"]
    text = "\n".join(parts) + "\n"
    atomic_write_text(sweep_dir / SUMMARY_MD, text)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CellSummary.__dataclass_fields__))
    writer.writeheader()
    for c in cells:
        writer.writerow(c.__dict__)
    atomic_write_text(sweep_dir / SUMMARY_CSV, buf.getvalue())
    atomic_write_json(
        sweep_dir / SUMMARY_JSON,
        {
            "cells": [c.row() for c in cells],
            "failed": [r.path.name for r in failed],
            "incomplete": [r.path.name for r in incomplete],
        },
    )
    if echo:
        out = stream or sys.stdout
        out.write("\n" + table_text(cells) + "\n")
        if failed:
            out.write(
                f"\n{len(failed)} failed job(s): tracebacks in their error.txt (listed in {sweep_dir / SUMMARY_MD})\n"
            )
        if plot_path is not None:
            out.write(f"Learning curves: {plot_path}\n")
        out.write(f"Summary: {sweep_dir / SUMMARY_MD}\n")
        out.flush()
    return SweepSummary(cells, failed, incomplete, text, plot_path)
