"""``python -m rlsweep.check SWEEP_DIR [--job NAME] [--steps N | --seconds S] [--trust]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlsweep.check import Budget, check_job
from rlsweep.errors import RLSweepError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rlsweep.check",
        description=(
            "Run one job of a sweep twice, each in a fresh process, and name the first "
            "difference between what the two runs wrote (file, column, step)."
        ),
    )
    parser.add_argument("sweep_dir", type=Path, help="the sweep directory (multirun/<name>)")
    parser.add_argument("--job", help="the job's directory name (default: the first completed)")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=float, help="stop each run once it logged this step")
    budget.add_argument("--seconds", type=float, help="stop each run after this many seconds")
    parser.add_argument(
        "--work-dir",
        type=Path,
        help="where the runs write, kept (default: a new rlsweep-check-* folder in the temp dir)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temp folder of the two runs (default: removed at the end)",
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help=(
            "run the command sweep.json records even though others may write to the sweep "
            "directory (by default only a directory that is yours alone to write is trusted)"
        ),
    )
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        parser.error(f"{args.sweep_dir} is not a directory")
    try:
        result = check_job(
            args.sweep_dir,
            args.job,
            Budget(args.steps, args.seconds),
            args.work_dir,
            args.keep,
            trust=args.trust,
            show=_show,
        )
    except RLSweepError as exc:
        print(f"rlsweep.check: {exc}", file=sys.stderr)
        return 2
    print(result.report())
    return 0 if result.same else 1


def _show(text: str) -> None:
    print(f"rlsweep.check: {text}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
