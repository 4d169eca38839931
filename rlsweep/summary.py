"""The end-of-sweep summary: the compact table printed when a sweep ends.

:func:`summarize` writes the report first (:func:`rlsweep.report.build.write_report`:
report.md and .html, plots, the tidy table), then renders its statistics: for rlsweep's own
agents one row per (agent, env), and summary.csv the same rows; for any other app one row per
group (the best ones when there are many), summary.csv one row per job with its settings and
the numbers it returned. Failed jobs are listed with their tracebacks; a group whose
replicates all gave the same value is flagged (an app that ignores its replicate). It reads
the sweep directory, not the launcher's return values, so it covers every job ever run into
that directory.

Importing this module is cheap: pyarrow (for evaluations.parquet) and matplotlib (for the
figures) are imported when the report is written, not before; pandas never is.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from rlsweep.paths import shown
from rlsweep.report.analysis import GroupStats
from rlsweep.report.build import Report, write_report
from rlsweep.report.files import REPORT_HTML, REPORT_MD
from rlsweep.report.inputs import inputs_digest
from rlsweep.report.jobfiles import job_overrides
from rlsweep.report.markdown import fmt_num, markdown_table, provenance_note
from rlsweep.report.metrics import metric_lines, metric_words
from rlsweep.report.ranking import identical_groups, top_groups
from rlsweep.report.render import group_values
from rlsweep.report.runs import STATUSES, Run, log_problems, missing_dirs
from rlsweep.store import (
    ERROR_FILE,
    RECORD_KEY,
    JobRecord,
    atomic_write_json,
    atomic_write_text,
    iter_job_dirs,
    read_job,
)

__all__ = ["summarize", "summarize_at_end", "summarize_report"]

SUMMARY_MD = "summary.md"
SUMMARY_CSV = "summary.csv"
SUMMARY_JSON = "summary.json"
# What the last end-of-sweep summary was computed from, and the text it printed.
SUMMARY_STAMP = ".rlsweep_summary.json"
# summary.csv of rlsweep's agents: one row per (agent, env).
COLUMNS = ("agent", "env", "completed", "failed", "incomplete", "mean", "median", "iqm",
           "iqm_ci95_low", "iqm_ci95_high")  # fmt: skip
JOB_COLUMNS = ("job", "status")
SPEC = ".4g"
PRINTED_GROUPS = 50  # more groups than this: the end of a sweep prints the best ones


def _finite(x: float) -> float | None:
    """A statistic for JSON and CSV: NaN (no completed run) as None."""
    return None if math.isnan(x) else x


def _stats_row(x: GroupStats) -> dict[str, object]:
    return {
        "completed": x.completed,
        "failed": x.failed,
        "incomplete": x.incomplete,
        "mean": _finite(x.mean),
        "median": _finite(x.median),
        "iqm": _finite(x.iqm),
        "iqm_ci95_low": _finite(x.iqm_ci[0]),
        "iqm_ci95_high": _finite(x.iqm_ci[1]),
    }


def cell_row(c: GroupStats) -> dict[str, object]:
    return {"agent": c.group, "env": c.task, **_stats_row(c)}


def _write_summary(
    sweep_dir: Path,
    text: str,
    columns: Sequence[str],
    rows: Sequence[dict[str, object]],
    record: dict[str, Any],
) -> None:
    """summary.md, summary.csv (one line per row) and summary.json."""
    atomic_write_text(sweep_dir / SUMMARY_MD, text)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(sweep_dir / SUMMARY_CSV, buf.getvalue())
    atomic_write_json(sweep_dir / SUMMARY_JSON, record)


def _echo_paths(out: TextIO, sweep_dir: Path, report: Report | None) -> None:
    """The files' paths, relative to the working directory when under it, else absolute."""
    plots = [p for p in report.plots if "learning_curves" in p.name] if report else []
    lines = [("Learning curves: ", p) for p in plots] + [("Summary: ", sweep_dir / SUMMARY_MD)]
    if report is not None:
        lines += [("Report:  ", report.markdown), ("Report page: ", report.html)]
    for label, path in lines:
        out.write(f"{label}{shown(path)}\n")
    out.flush()


def summarize_at_end(
    sweep_dir: Path,
    summarize: Callable[..., object],
    *,
    stream: TextIO | None = None,
    metric: str | None = None,
) -> bool:
    """The end of a sweep: ``summarize`` (:func:`summarize`, or a task's own) writes the
    summary and report of ``sweep_dir`` (on ``metric``: ``hydra.sweeper.metric``) and prints
    its table; unless nothing they are computed from changed since the last ones were written
    (:func:`~rlsweep.report.inputs.inputs_digest`: a resume that ran no job), when the table
    printed then is printed again. Returns whether they were written."""
    out = stream or sys.stdout
    digest = f"{inputs_digest(sweep_dir)} metric={metric} cwd={Path.cwd()}"  # printed paths
    try:
        stamp = json.loads((sweep_dir / SUMMARY_STAMP).read_text())
    except (OSError, ValueError):
        stamp = None
    outputs = (SUMMARY_MD, SUMMARY_CSV, SUMMARY_JSON, REPORT_MD, REPORT_HTML)
    if (
        isinstance(stamp, dict)
        and stamp.get("inputs") == digest
        and isinstance(stamp.get("printed"), str)
        and all((sweep_dir / name).is_file() for name in outputs)
    ):
        out.write(stamp["printed"])
        out.write(
            "(No job ran and no result changed since this summary and report were written: "
            "kept as they are. python -m rlsweep.report writes the report again.)\n"
        )
        out.flush()
        return False
    printed = io.StringIO()
    if metric is None:
        summarize(sweep_dir, echo=True, stream=printed)
    else:
        summarize(sweep_dir, echo=True, stream=printed, metric=metric)
    out.write(printed.getvalue())
    out.flush()
    atomic_write_json(sweep_dir / SUMMARY_STAMP, {"inputs": digest, "printed": printed.getvalue()})
    return True


# ------------------------------------------------------------------------ rlsweep's agents


def table_text(cells: Sequence[GroupStats]) -> str:
    """The compact table: one row per (agent, env), aligned for a terminal."""
    columns = ("agent", "env", "n", "failed", "incomplete", "mean", "median", "IQM", "IQM 95% CI")
    return _table(columns, [group_values(c, built_in=True) for c in cells])


def _table(columns: Sequence[str], rows: Sequence[dict[str, str]]) -> str:
    """Some columns of report.md's rows (n as ``done``), aligned for a terminal."""
    header = ["done" if c == "n" else c for c in columns]
    return "\n".join(markdown_table(header, [[row[c] for c in columns] for row in rows]))


def _tracebacks(failed: Sequence[Run]) -> list[str]:
    parts = []
    for r in failed:
        traceback = (r.path / ERROR_FILE).read_text() if (r.path / ERROR_FILE).is_file() else ""
        parts += [f"### {r.job}", "", f"Traceback in `{r.path / ERROR_FILE}`:", "",
                  "```", traceback.rstrip(), "```", ""]  # fmt: skip
    return parts


def _listed(items: Sequence[str], limit: int = 5) -> str:
    return "; ".join(items[:limit]) + ("; ..." if len(items) > limit else "")


def trust_note(report: Report | None) -> str:
    """Sentences on what the report did not count or read whole: jobs whose result.json is
    damaged or unverified, jobs of the recorded grid with no directory, log files cut or
    damaged (each named); "" when there is none."""
    if report is None:
        return ""
    out = ""
    bad = [r for r in report.runs if r.status in ("damaged", "unverified")]
    if bad:
        out += (
            f" {len(bad)} not counted, their result.json damaged or unverified (not rlsweep's "
            "record of the job): "
            + _listed([f"{r.job} ({r.status}: {r.problem or r.path})" for r in bad])
            + "."
        )
    missing = missing_dirs(report.sweep)
    if missing:
        out += (
            f" {len(missing)} of the grid recorded in sweep.json have no job directory: "
            + _listed([p.name for p in missing])
            + "."
        )
    logs = log_problems(report.runs)
    if logs:
        out += (
            f" {len(logs)} log file(s) cut or damaged, read up to their last whole record: "
            + _listed([f"{r.job}: {text}" for r, text in logs])
            + "."
        )
    return out


def _agents_text(sweep_dir: Path, report: Report) -> str:
    cells = list(report.groups)
    failed = [r for r in report.runs if r.status == "failed"]
    incomplete = [r for r in report.runs if r.status == "incomplete"]
    parts = [
        f"# Sweep summary: {sweep_dir}",
        "",
        f"{len(report.runs)} jobs: {sum(c.completed for c in cells)} completed, {len(failed)} "
        f"failed, {len(incomplete)} incomplete. Final evaluation return over replicates; the "
        "95% CI is a percentile bootstrap of the IQM. Statistics, comparisons and plots: "
        f"[report.md]({report.markdown.name}).{trust_note(report)}",
        "",
        table_text(cells) + provenance_note(report.runs),
    ]
    if failed:
        parts += ["", "## Failed jobs", "", *_tracebacks(failed)]
    if incomplete:
        parts += ["", "## Incomplete jobs (no result.json: killed or still running)", ""]
        parts += [f"- {r.job}" for r in incomplete]
    return "\n".join(parts) + "\n"


def _summarize_agents(sweep_dir: Path, report: Report, out: TextIO | None) -> None:
    cells = list(report.groups)
    failed = [r for r in report.runs if r.status == "failed"]
    rows = [cell_row(c) for c in cells]
    record = {
        "cells": rows,
        "failed": [r.job for r in failed],
        "incomplete": [r.job for r in report.runs if r.status == "incomplete"],
    }
    _write_summary(sweep_dir, _agents_text(sweep_dir, report), COLUMNS, rows, record)
    if out is not None:
        out.write("\n" + table_text(cells) + provenance_note(report.runs) + "\n")
        if trust_note(report):
            out.write(trust_note(report).strip() + "\n")
        for r in failed:
            out.write(f"\nFAILED {r.job}: {r.error}\n  traceback: {r.path / ERROR_FILE}\n")
        _echo_paths(out, sweep_dir, report)


# ------------------------------------------------------------------------ any app's jobs


def _result_values(record: JobRecord) -> dict[str, object]:
    values = dict(record.result or {})
    values.pop(RECORD_KEY, None)
    return {k: v for k, v in values.items() if isinstance(v, int | float | str | bool)}


def job_rows(sweep_dir: Path) -> list[dict[str, object]]:
    """One row per job directory: its name, status, settings (its overrides, without the
    opt-in ``rlsweep=...``) and the values it returned."""
    rows = []
    for job_dir in iter_job_dirs(sweep_dir):
        record = read_job(job_dir)
        row = {"job": job_dir.name, "status": record.status, **job_overrides(job_dir)}
        rows.append({**row, **_result_values(record)})
    return rows


def group_table(report: Report, groups: Sequence[GroupStats] | None = None) -> str:
    """The compact grouped table of any app's sweep: n done / failed, mean, IQM and its CI
    of the report's metric per group, aligned for a terminal."""
    columns = ("group", "n", "failed", "mean", "IQM", "IQM 95% CI")
    chosen = report.groups if groups is None else groups
    return _table(columns, [group_values(g) for g in chosen])


def _identical_text(report: Report) -> list[str]:
    same = identical_groups(report.runs, report.metric.name)
    if not same:
        return []
    key = report.sweep.replicate_key or "its replicate key"
    return [
        f"Warning: every replicate of {len(same)} group(s) gave the same `{report.metric.name}` "
        f"({', '.join(f'{g}: {n} x {fmt_num(v, SPEC)}' for g, n, v in same[:5])}"
        f"{', ...' if len(same) > 5 else ''}): does the app ignore `{key}`? Seed its RNGs "
        "from it, or from rlsweep.current().seeds."
    ]


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return fmt_num(value, ".4f")
    return str(value)


def _metric_words(report: Report) -> list[str]:
    """What the groups' table is of, or why there is none."""
    done = sum(r.status == "completed" for r in report.runs)
    return [metric_words(report.metric, done, report.markdown.name)]


def _jobs_text(
    sweep_dir: Path, report: Report | None, problem: str, header: str, table: str
) -> str:
    parts = [f"# Sweep summary: {sweep_dir}", "", header]
    if report is not None:
        parts += ["", *_metric_words(report)]
        if report.metric.name is not None and report.groups:
            parts += ["", group_table(report)]
        same = _identical_text(report)
        parts += ["", *same] if same else []
        parts += ["", "## Jobs"]
    elif problem:
        parts += ["", f"The report could not be written ({problem})."]
    parts += ["", table]
    return "\n".join(parts)


def _echo_jobs(
    out: TextIO, sweep_dir: Path, report: Report | None, problem: str, jobs: str
) -> None:
    """The groups' table (the best ones when there are many), else ``jobs`` (the jobs'
    table, or their count when there are many)."""
    if report is None or report.metric.name is None or not report.groups:
        out.write(f"\n{jobs}\n")
        if problem:
            out.write(f"The report could not be written ({problem}).\n")
        elif report is not None:
            out.write(f"{_metric_words(report)[0].split(' Report: ')[0]}\n")
        return
    if len(report.groups) > PRINTED_GROUPS:
        best = top_groups(report.groups, 10)
        out.write(f"\n{group_table(report, best)}\n")
        out.write(f"(The {len(best)} groups of highest IQM, of {len(report.groups)}: "
                  f"every group is in {sweep_dir / SUMMARY_MD}.)\n")  # fmt: skip
    else:
        out.write(f"\n{group_table(report)}\n")
    out.write(metric_lines(report.metric, sweep_dir))
    for line in _identical_text(report):
        out.write(f"{line}\n")


def unplaced_note(report: Report | None) -> str:
    """A sentence on the completed jobs no group counts (another job holds their group and
    replicate), or ""."""
    if report is None or not report.unplaced:
        return ""
    n = len(report.unplaced)
    return (
        f" {n} of them no group counts: another job (another identity) holds their group "
        f"and replicate ({', '.join(r.job for r in report.unplaced[:3])}"
        f"{', ...' if n > 3 else ''}); listed in {report.markdown.name}."
    )


def _summarize_jobs(
    sweep_dir: Path, report: Report | None, problem: str, out: TextIO | None
) -> None:
    """summary.{md,csv,json} of any app's sweep (summary.csv: one row per job); the table of
    groups printed (of jobs, if the report could not be written)."""
    rows = job_rows(sweep_dir)
    columns = list(dict.fromkeys(k for row in [dict.fromkeys(JOB_COLUMNS), *rows] for k in row))
    counts = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
    header = (
        f"{len(rows)} job{'s' if len(rows) != 1 else ''}: {counts['completed']} completed, "
        f"{counts['failed']} failed, {counts['incomplete']} incomplete."
        + unplaced_note(report)
        + trust_note(report)
        + provenance_note(report.runs if report is not None else [])
    )
    table = "\n".join(
        markdown_table(columns, [[_cell(row.get(c)) for c in columns] for row in rows])
    )
    failed = [sweep_dir / str(r["job"]) for r in rows if r["status"] == "failed"]
    parts = [_jobs_text(sweep_dir, report, problem, header, table)]
    for job_dir in failed:
        parts += ["", f"## Failed: {job_dir.name}", "", "```"]
        parts += [(job_dir / ERROR_FILE).read_text().rstrip(), "```"]
    record = {
        "jobs": rows,
        "failed": [d.name for d in failed],
        **counts,
        "metric": None if report is None else report.metric.name,
        "groups": []
        if report is None or report.metric.name is None
        else [{"group": g.group, **_stats_row(g)} for g in report.groups],
        "identical_replicates": []
        if report is None
        else [g for g, _, _ in identical_groups(report.runs, report.metric.name)],
    }
    _write_summary(sweep_dir, "\n".join(parts) + "\n", columns, rows, record)
    if out is not None:
        _echo_jobs(out, sweep_dir, report, problem, table if len(rows) <= 50 else header)
        for job_dir in failed:
            out.write(f"FAILED {job_dir.name}: traceback in {job_dir / ERROR_FILE}\n")
        out.write(f"{header}\n")
        _echo_paths(out, sweep_dir, report)


def summarize(
    sweep_dir: Path,
    *,
    echo: bool = True,
    stream: TextIO | None = None,
    metric: str | None = None,
) -> Report | None:
    """Write the report and summary.{md,csv,json} of ``sweep_dir`` (on ``metric``, if given);
    print its table. Returns the report (None if it could not be written: the summary then
    lists the jobs, and says why)."""
    try:
        report: Report | None = write_report(
            [sweep_dir], metric=metric, metric_by="hydra.sweeper.metric"
        )
        problem = ""
    except Exception as exc:  # the summary and the sweep's end never fail for the report
        report, problem = None, f"{type(exc).__name__}: {exc}"
    _summary(sweep_dir, report, problem, (stream or sys.stdout) if echo else None)
    return report


def _summary(sweep_dir: Path, report: Report | None, problem: str, out: TextIO | None) -> None:
    if report is not None and report.sweep.built_in:
        _summarize_agents(sweep_dir, report, out)
    else:
        _summarize_jobs(sweep_dir, report, problem, out)


def summarize_report(sweep_dir: Path, report: Report) -> Path:
    """summary.{md,csv,json} of ``sweep_dir`` from ``report``, written into it on its metric
    (``python -m rlsweep.report DIR --metric NAME``); the end-of-sweep stamp is dropped, so
    the next end of a sweep writes both again. Returns summary.md's path."""
    _summary(sweep_dir, report, "", None)
    (sweep_dir / SUMMARY_STAMP).unlink(missing_ok=True)
    return sweep_dir / SUMMARY_MD
