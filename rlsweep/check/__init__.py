"""The determinism check: one job of a sweep run twice, each in a fresh process, and the
first place where what the two runs wrote differs (file, column, step), or none.

    python -m rlsweep.check multirun/default                     # the first completed job
    python -m rlsweep.check multirun/app --job 'optim.lr=0.001,seed=2' --steps 2000
    python -m rlsweep.check multirun/app --seconds 60            # each run for a minute

A job that gives other numbers on every run (an unseeded source rlsweep cannot reach, a
race between threads, a sub-process started fresh) shows it here, at the first value where
it happens. The runs use the command the sweep was run with (``sweep.json``), the job's own
overrides, the serial executor and a temporary sweep directory; the sweep's own results
are not touched. Exit status: 0 no difference, 1 a difference, 2 the check could not run.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from rlsweep.check.diff import JobDiff, compare_jobs
from rlsweep.check.runs import Budget, Rerun, job_command, pick_job, run_twice

__all__ = ["Budget", "CheckResult", "check_job"]


@dataclass(frozen=True)
class CheckResult:
    """The two runs of a job, and how they compare."""

    job: Path
    runs: tuple[Rerun, Rerun]
    comparison: JobDiff
    # The last step compared (None: everything both runs logged).
    limit: float | None

    @property
    def same(self) -> bool:
        return self.comparison.difference is None

    def report(self) -> str:
        """What a person reads: the runs, then the first difference or what was compared."""
        lines = [f"The same job run twice, each in a fresh process: {self.job}"]
        for i, run in enumerate(self.runs, 1):
            how = "finished" if run.finished else "stopped at the budget"
            lines.append(f"  run {i}: {how} after {run.seconds:.1f} s ({run.job_dir})")
        c = self.comparison
        upto = f" up to step {self.limit:g}" if self.limit is not None else ""
        if c.difference is not None:
            lines.append(f"First difference: {c.difference}")
        else:
            compared = f"{c.series} logged series ({c.values} values{upto})"
            if all(r.finished for r in self.runs):
                compared += f", result.json and {c.files} other file(s)"
            lines.append(f"No difference found in {compared}.")
        if c.timing:
            shown = ", ".join(c.timing[:6]) + (" ..." if len(c.timing) > 6 else "")
            lines.append(f"Left out as timings (they differ between any two runs): {shown}")
        return "\n".join(lines)


def check_job(
    sweep_dir: Path,
    job: str | None = None,
    budget: Budget | None = None,
    work_dir: Path | None = None,
) -> CheckResult:
    """Run one job of ``sweep_dir`` twice and compare (see the module docstring)."""
    budget = budget or Budget()
    job_dir = pick_job(sweep_dir, job)
    work = Path(work_dir or tempfile.mkdtemp(prefix="rlsweep-check-")).resolve()
    out_dirs = [work / "run1", work / "run2"]
    command, cwd = job_command(sweep_dir, job_dir, out_dirs[0])
    first, second = run_twice(command, cwd, out_dirs, budget)
    finished = first.finished and second.finished
    limit = budget.steps
    if limit is None and not finished:
        limit = _common_last_step(first.job_dir, second.job_dir)
    comparison = compare_jobs(first.job_dir, second.job_dir, limit=limit, finished=finished)
    return CheckResult(job_dir, (first, second), comparison, limit)


def _common_last_step(a: Path, b: Path) -> float | None:
    """The last step both runs logged in every series they share (runs stopped by time)."""
    from rlsweep.series import job_series

    first, second = job_series(a), job_series(b)
    lasts = [
        min(float(first[n].steps[-1]), float(second[n].steps[-1]))
        for n in first.keys() & second.keys()
    ]
    return min(lasts) if lasts else None
