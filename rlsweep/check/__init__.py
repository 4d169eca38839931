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

What the two runs wrote is matched before it is compared (:mod:`rlsweep.check.runs`): a
run folder named by time or hash, as BenchMARL and TorchRL's loggers name theirs, is
compared with the other run's whatever its name. Logged series, ``result.json`` and the
other files are compared by content; plain-text logs (``MUJOCO_LOG.TXT``, ``*.log``, ...)
are not the job's numbers and only said to be the same or not
(:mod:`rlsweep.check.diff`). The report says what was compared (series, values, result
values, files), which folders were matched under other names, and what one run wrote that
nothing of the other's matched.

The runs are written to a new ``rlsweep-check-*`` folder in the temporary directory
(``TMPDIR``), removed at the end, whatever the outcome, unless ``keep`` (``--keep``: the
report says where it is, to look into); a ``work_dir`` (``--work-dir``) is the caller's,
never removed.

The command comes from the sweep directory, so it runs only when that directory is the
user's alone to write: the directory, its ``sweep.json``, the job's directory and its
``.hydra/hydra.yaml`` owned by the user and writable neither by their group nor by others
(as OpenSSH judges a key file). Anything else (a sweep directory shared with a group) is
refused with the command shown, until ``trust`` (``--trust``) says to run it. The command
is shown (``show``; the command line prints it) before it runs.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from collections.abc import Callable
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
    # Where the two runs are (None: removed).
    kept: Path | None = None

    @property
    def same(self) -> bool:
        return self.comparison.difference is None

    def report(self) -> str:
        """What a person reads: the runs, the first difference or none, what was compared,
        matched and left out, and where the runs are."""
        lines = [f"The same job run twice, each in a fresh process: {self.job}"]
        for i, run in enumerate(self.runs, 1):
            how = "finished" if run.finished else "stopped at the budget"
            where = f" ({run.job_dir})" if self.kept is not None else ""
            lines.append(f"  run {i}: {how} after {run.seconds:.1f} s{where}")
        c = self.comparison
        if c.difference is not None:
            lines += [f"First difference: {c.difference}", f"Compared: {self._compared()}."]
        else:
            lines.append(f"No difference found in {self._compared()}.")
        renamed = [f"{a} (run 1) = {b} (run 2)" for a, b in c.matching.renamed]
        if c.matching.renamed_files:
            renamed.append(f"{len(c.matching.renamed_files)} file(s)")
        lines += _listed("Matched under other names", renamed)
        lines += _listed(
            "Text logs, not compared as results", [f"{p} ({how})" for p, how in c.text_logs]
        )
        for n, only in enumerate(c.matching.only, 1):
            lines += _listed(f"Written by run {n} only (nothing of the other run matched)", only)
        lines += _listed("Left out as timings (they differ between any two runs)", c.timing)
        if self.kept is not None:
            lines.append(f"The two runs are kept in {self.kept} (run1/, run2/).")
        elif not self.same:
            lines.append("The two runs were removed (--keep keeps them, to look into).")
        return "\n".join(lines)

    def _compared(self) -> str:
        c = self.comparison
        upto = f" up to step {self.limit:g}" if self.limit is not None else ""
        compared = [f"{c.series} logged series ({c.values} values{upto})"]
        if c.results is not None:
            compared.append(f"{c.results} result value(s)")
        if c.files is not None:
            compared.append(f"{c.files} other file(s)")
        if not all(r.finished for r in self.runs):
            compared.append("no result or other file (a run stopped at the budget)")
        return ", ".join(compared[:-1]) + " and " * (len(compared) > 1) + compared[-1]


def _listed(title: str, items: list[str], most: int = 6) -> list[str]:
    """A report's line listing ``items`` (none: no line), the first ``most`` of them."""
    if not items:
        return []
    more = f" ... ({len(items)} in all)" if len(items) > most else ""
    return [f"{title}: {', '.join(items[:most])}{more}"]


def check_job(
    sweep_dir: Path,
    job: str | None = None,
    budget: Budget | None = None,
    work_dir: Path | None = None,
    keep: bool = False,
    *,
    trust: bool = False,
    show: Callable[[str], None] | None = None,
) -> CheckResult:
    """Run one job of ``sweep_dir`` twice and compare (see the module docstring): in
    ``work_dir``, else in a temporary folder removed at the end unless ``keep``. The
    command is passed to ``show`` before it runs; it runs only if ``sweep_dir`` is the
    user's alone to write, or if ``trust`` (else :class:`~rlsweep.check.runs.Untrusted`)."""
    budget = budget or Budget()
    job_dir = pick_job(sweep_dir, job)
    work = Path(work_dir or tempfile.mkdtemp(prefix="rlsweep-check-")).resolve()
    try:
        out_dirs = [work / "run1", work / "run2"]
        command, cwd = job_command(sweep_dir, job_dir, out_dirs[0], trust=trust)
        if show is not None:
            show(f"Running, twice, in {cwd}: {shlex.join(command)}")
        first, second = run_twice(command, cwd, out_dirs, budget)
        finished = first.finished and second.finished
        comparison = compare_jobs(
            first.job_dir, second.job_dir, limit=budget.steps, finished=finished
        )
    finally:
        if work_dir is None and not keep:
            shutil.rmtree(work, ignore_errors=True)  # a folder left is said below
    kept = work if work.exists() else None
    return CheckResult(job_dir, (first, second), comparison, comparison.limit, kept)
