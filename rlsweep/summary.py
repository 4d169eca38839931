"""The end-of-sweep summary: the compact table printed when a sweep ends.

It renders the statistics of :mod:`rlsweep.report` (which it writes first: report.md,
plots, the tidy table) as one row per (agent, env), and lists failed jobs with their full
tracebacks. It reads the sweep directory, not the launcher's return values, so it covers
every job ever run into that directory. For any other app's sweep (:func:`summarize_jobs`)
the rows are its groups (:mod:`rlsweep.app_report`), and summary.csv lists every job.
"""

from __future__ import annotations

import csv
import io
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rlsweep.report import CellStats, Report, fmt_interval, fmt_num, markdown_table, write_report
from rlsweep.store import (
    ERROR_FILE,
    HYDRA_DIR,
    RECORD_KEY,
    JobRecord,
    atomic_write_json,
    atomic_write_text,
    iter_job_dirs,
    read_job,
)

if TYPE_CHECKING:
    from rlsweep.app_report import AppReport, GroupStats

SUMMARY_MD = "summary.md"
SUMMARY_CSV = "summary.csv"
SUMMARY_JSON = "summary.json"
COLUMNS = (
    "agent",
    "env",
    "completed",
    "failed",
    "incomplete",
    "mean",
    "median",
    "iqm",
    "iqm_ci95_low",
    "iqm_ci95_high",
)


def _finite(x: float) -> float | None:
    """A statistic for JSON and CSV: NaN (no completed run) as None."""
    return None if math.isnan(x) else x


def cell_row(c: CellStats) -> dict[str, object]:
    return {
        "agent": c.agent,
        "env": c.env,
        "completed": c.completed,
        "failed": c.failed,
        "incomplete": c.incomplete,
        "mean": _finite(c.mean),
        "median": _finite(c.median),
        "iqm": _finite(c.iqm),
        "iqm_ci95_low": _finite(c.iqm_ci[0]),
        "iqm_ci95_high": _finite(c.iqm_ci[1]),
    }


def table_text(cells: list[CellStats]) -> str:
    """The compact table: one row per (agent, env), aligned for a terminal."""
    header = ("agent", "env", "done", "failed", "incomplete", "mean", "median", "IQM", "IQM 95% CI")
    rows = [
        (
            c.agent,
            c.env,
            str(c.completed),
            str(c.failed),
            str(c.incomplete),
            fmt_num(c.mean),
            fmt_num(c.median),
            fmt_num(c.iqm),
            fmt_interval(*c.iqm_ci),
        )
        for c in cells
    ]
    return "\n".join(markdown_table(header, rows))


def summarize(sweep_dir: Path, *, echo: bool = True, stream: TextIO | None = None) -> Report:
    """Write the report and summary.{md,csv,json} of ``sweep_dir``; print the table."""
    report = write_report([sweep_dir])
    cells = list(report.cells)
    failed = [r for r in report.runs if r.status == "failed"]
    incomplete = [r for r in report.runs if r.status == "incomplete"]
    parts = [
        f"# Sweep summary: {sweep_dir}",
        "",
        f"{len(report.runs)} jobs: {sum(c.completed for c in cells)} completed, {len(failed)} "
        f"failed, {len(incomplete)} incomplete. Final evaluation return over replicates; the "
        "95% CI is a percentile bootstrap of the IQM. Statistics, comparisons and plots: "
        f"[report.md]({report.markdown.name}).",
        "",
        table_text(cells),
    ]
    if failed:
        parts += ["", "## Failed jobs", ""]
        for r in failed:
            traceback = (r.path / ERROR_FILE).read_text() if (r.path / ERROR_FILE).is_file() else ""
            parts += [
                f"### {r.job}",
                "",
                f"Traceback in `{r.path / ERROR_FILE}`:",
                "",
                "```",
                traceback.rstrip(),
                "```",
                "",
            ]
    if incomplete:
        parts += ["", "## Incomplete jobs (no result.json: killed or still running)", ""]
        parts += [f"- {r.job}" for r in incomplete]
    text = "\n".join(parts) + "\n"
    atomic_write_text(sweep_dir / SUMMARY_MD, text)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS)
    writer.writeheader()
    for c in cells:
        writer.writerow(cell_row(c))
    atomic_write_text(sweep_dir / SUMMARY_CSV, buf.getvalue())
    atomic_write_json(
        sweep_dir / SUMMARY_JSON,
        {
            "cells": [cell_row(c) for c in cells],
            "failed": [r.job for r in failed],
            "incomplete": [r.job for r in incomplete],
        },
    )
    if echo:
        out = stream or sys.stdout
        out.write("\n" + table_text(cells) + "\n")
        for r in failed:
            out.write(f"\nFAILED {r.job}: {r.error}\n  traceback: {r.path / ERROR_FILE}\n")
        for plot in report.plots:
            if "learning_curves" in plot.name:
                out.write(f"Learning curves: {plot}\n")
        out.write(f"Summary: {sweep_dir / SUMMARY_MD}\nReport:  {report.markdown}\n")
        out.flush()
    return report


# ------------------------------------------------------------------------ any app's jobs

JOB_COLUMNS = ("job", "status")


def _overrides(job_dir: Path) -> dict[str, str]:
    """The job's overrides as Hydra recorded them (``.hydra/overrides.yaml``), by key."""
    import yaml

    path = job_dir / HYDRA_DIR / "overrides.yaml"
    try:
        lines = yaml.safe_load(path.read_text()) if path.is_file() else []
    except (OSError, yaml.YAMLError):
        lines = []
    out: dict[str, str] = {}
    for line in lines if isinstance(lines, list) else []:
        key, sep, value = str(line).partition("=")
        if sep and not key.startswith("hydra"):
            out[key.lstrip("+~")] = value
    return out


def _result_values(record: JobRecord) -> dict[str, object]:
    values = dict(record.result or {})
    values.pop(RECORD_KEY, None)
    return {k: v for k, v in values.items() if isinstance(v, int | float | str | bool)}


def job_rows(sweep_dir: Path) -> list[dict[str, object]]:
    """One row per job directory: its name, status, overrides and recorded values."""
    rows = []
    for job_dir in iter_job_dirs(sweep_dir):
        record = read_job(job_dir)
        rows.append(
            {
                "job": job_dir.name,
                "status": record.status,
                **_overrides(job_dir),
                **_result_values(record),
            }
        )
    return rows


def group_table(report: AppReport) -> str:
    """The compact grouped table of any app's sweep: n done / failed, mean, IQM and its CI
    of the report's metric per group, aligned for a terminal."""
    from rlsweep.app_report import interval, num

    header = ("group", "done", "failed", "mean", "IQM", "IQM 95% CI")
    rows = [
        (g.group, str(g.completed), str(g.failed), num(g.mean), num(g.iqm), interval(*g.iqm_ci))
        for g in report.groups
    ]
    return "\n".join(markdown_table(header, rows))


def _group_row(g: GroupStats) -> dict[str, object]:
    return {
        "group": g.group,
        "completed": g.completed,
        "failed": g.failed,
        "incomplete": g.incomplete,
        "mean": _finite(g.mean),
        "median": _finite(g.median),
        "iqm": _finite(g.iqm),
        "iqm_ci95_low": _finite(g.iqm_ci[0]),
        "iqm_ci95_high": _finite(g.iqm_ci[1]),
    }


def summarize_jobs(sweep_dir: Path, *, echo: bool = True, stream: TextIO | None = None) -> None:
    """Write the report and summary.{md,csv,json} of any app's sweep (summary.csv: one row
    per job); print the table of groups (of jobs, if the report could not be written)."""
    from rlsweep.app_report import write_app_report

    try:
        report: AppReport | None = write_app_report([sweep_dir])
        problem = ""
    except Exception as exc:  # the summary and the sweep's end never fail for the report
        report, problem = None, f"{type(exc).__name__}: {exc}"
    rows = job_rows(sweep_dir)
    columns = list(dict.fromkeys(k for row in [dict.fromkeys(JOB_COLUMNS), *rows] for k in row))
    counts = {s: sum(r["status"] == s for r in rows) for s in ("completed", "failed", "incomplete")}
    header = (
        f"{len(rows)} jobs: {counts['completed']} completed, {counts['failed']} failed, "
        f"{counts['incomplete']} incomplete."
    )
    table = "\n".join(
        markdown_table(columns, [[_cell(row.get(c)) for c in columns] for row in rows])
    )
    failed = [sweep_dir / str(r["job"]) for r in rows if r["status"] == "failed"]
    parts = [f"# Sweep summary: {sweep_dir}", "", header]
    if report is not None and report.groups:
        parts += [
            "",
            f"Per group, `{report.metric}` over replicates ({report.metric_reason}); the 95% "
            "CI is a percentile bootstrap of the IQM. Statistics, comparisons and plots: "
            f"[report.md]({report.markdown.name}).",
            "",
            group_table(report),
            "",
            "## Jobs",
        ]
    elif problem:
        parts += ["", f"The report could not be written ({problem})."]
    parts += ["", table]
    for job_dir in failed:
        parts += ["", f"## Failed: {job_dir.name}", "", "```"]
        parts += [(job_dir / ERROR_FILE).read_text().rstrip(), "```"]
    atomic_write_text(sweep_dir / SUMMARY_MD, "\n".join(parts) + "\n")
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(sweep_dir / SUMMARY_CSV, buf.getvalue())
    atomic_write_json(
        sweep_dir / SUMMARY_JSON,
        {
            "jobs": rows,
            "failed": [d.name for d in failed],
            **counts,
            "metric": None if report is None else report.metric,
            "groups": [] if report is None else [_group_row(g) for g in report.groups],
        },
    )
    if echo:
        out = stream or sys.stdout
        if report is not None and report.groups:
            out.write(f"\n{group_table(report)}\n")
            if report.metric is not None:
                out.write(f"Metric: {report.metric}, {report.metric_reason}\n")
                if report.sweep is not None and len(report.sweep.numeric) > 1:
                    out.write(f"  another: python -m rlsweep.report {sweep_dir} --metric NAME\n")
        else:
            out.write("\n" + (table if len(rows) <= 50 else header) + "\n")
            if problem:
                out.write(f"The report could not be written ({problem}).\n")
        for job_dir in failed:
            out.write(f"FAILED {job_dir.name}: traceback in {job_dir / ERROR_FILE}\n")
        out.write(f"{header}\n")
        if report is not None:
            for plot in report.plots:
                if "learning_curves" in plot.name:
                    out.write(f"Learning curves: {plot}\n")
        out.write(f"Summary: {sweep_dir / SUMMARY_MD}\n")
        if report is not None:
            out.write(f"Report:  {report.markdown}\n")
        out.flush()


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return fmt_num(value, 4)
    return str(value)
