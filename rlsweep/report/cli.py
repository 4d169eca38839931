"""``python -m rlsweep.report SWEEP_DIR [SWEEP_DIR ...] [--out DIR] [--seed N] [--metric NAME]
[--replicate-key KEY]``: write the report of the sweeps (:func:`rlsweep.report.build.write_report`).

The report of one sweep directory written into it (no ``--out``, or ``--out`` that directory)
rewrites its summary too (:func:`rlsweep.summary.summarize_report`: summary.md, .csv, .json),
so that summary.md, report.md and report.html are on one metric. A report of several sweeps,
or one written elsewhere, leaves every sweep's summary as it is: each summary stays with the
report.md of its own sweep."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlsweep.paths import shown
from rlsweep.report.build import write_report
from rlsweep.report.runs import unique_dirs
from rlsweep.summary import summarize_report

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rlsweep.report",
        description="Write report.md, plots and a tidy table of evaluations for RL sweeps "
        "(rlsweep's agents, or any Hydra app run by rlsweep: grouped by its swept keys). The "
        "report of one sweep written into its directory rewrites its summary.md (.csv, .json) "
        "too, on the same metric; a report of several sweeps, or written elsewhere (--out), "
        "leaves every sweep's summary as it is.",
    )
    parser.add_argument("sweep_dirs", nargs="+", type=Path, metavar="SWEEP_DIR")
    parser.add_argument(
        "--out", type=Path, default=None, help="output directory (default: the first SWEEP_DIR)"
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    parser.add_argument(
        "--metric",
        default=None,
        help="any app's sweep: the number to compute the statistics on, a name the task "
        "returned or a series it logged (default: `return`, else the only number returned, "
        "else the first in sorted order; with no number returned, the logged series ranked "
        "first by the default rule: a return or reward, of an evaluation, of an episode, a "
        "mean, of all agents; see docs/report.md). A name no job has is refused (exit 2), "
        "listing those they have. The report of one sweep into its own directory rewrites its "
        "summary on this metric too",
    )
    parser.add_argument(
        "--replicate-key",
        default=None,
        help="any app's sweep: the config key of the replicate index (default: the one the "
        "jobs or the sweep recorded, else seed)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Write the report; print where. Returns the exit status (2 for a bad sweep or option)."""
    args = _parser().parse_args(argv)
    try:
        report = write_report(
            args.sweep_dirs,
            args.out,
            seed=args.seed,
            metric=args.metric,
            replicate_key=args.replicate_key,
        )
    except ValueError as exc:
        print(f"rlsweep.report: {exc}", file=sys.stderr)
        return 2
    # One sweep's report written into it: its summary too. Paths are printed as the end of a
    # sweep prints them: relative to the working directory under it.
    sweep, one = args.sweep_dirs[0], len(unique_dirs(args.sweep_dirs)) == 1
    if one and (args.out is None or args.out.resolve() == sweep.resolve()):
        print(f"Summary: {shown(summarize_report(sweep, report))}")
    print(f"Report: {shown(report.markdown)}")
    print(f"Report page: {shown(report.html)}")
    if report.parquet.is_file():
        print(f"Tidy table: {shown(report.parquet)} and {report.csv.name}")
    else:  # (no pyarrow: the parquet extra)
        print(f"Tidy table: {shown(report.csv)}")
    for path in report.plots:
        print(f"Plot: {shown(path)}")
    return 0
