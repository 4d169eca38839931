"""``python -m rlsweep.report SWEEP_DIR [SWEEP_DIR ...] [--out DIR] [--seed N] [--metric NAME]
[--replicate-key KEY]``: write the report of the sweeps (:func:`rlsweep.report.build.write_report`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlsweep.paths import shown
from rlsweep.report.build import write_report

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rlsweep.report",
        description="Write report.md, plots and a tidy table of evaluations for RL sweeps "
        "(rlsweep's agents, or any Hydra app run by rlsweep: grouped by its swept keys).",
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
        "else the first in sorted order; with no number returned, a logged evaluation return "
        "or reward). A name no job has is refused (exit 2), listing those they have",
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
    # Printed as the end of a sweep prints them: relative to the working directory under it.
    print(f"Report: {shown(report.markdown)}")
    print(f"Tidy table: {shown(report.parquet)} and {report.csv.name}")
    for path in report.plots:
        print(f"Plot: {shown(path)}")
    return 0
