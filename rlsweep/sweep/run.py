"""A sweep from lock to summary: its batches through the launcher, interrupts, the
end-of-sweep hook, and the report of failed jobs."""

from __future__ import annotations

import contextlib
import errno
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.override_parser.types import Override
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig, OmegaConf

from rlsweep.code import code_fingerprint
from rlsweep.errors import ConfigError
from rlsweep.identity import Identity, setting_changes
from rlsweep.launch.jobs import error_line
from rlsweep.store import (
    HYDRA_DIR,
    recorded_choices,
    recorded_identity,
    sweep_dir_of,
    sweep_lock,
)
from rlsweep.sweep.code_changes import is_stale, ran_other_code, same_but_code_field
from rlsweep.sweep.drive import Driver, Feeder
from rlsweep.sweep.legacy import legacy_change
from rlsweep.sweep.plan import Plan, Planner, sweep_level_keys
from rlsweep.sweep.preload import REPORT_MODULES, WATCHED_JOBS, Preload, job_started
from rlsweep.sweep.record import start_line, sweep_record, write_sweep_record
from rlsweep.task_api import TaskHooks
from rlsweep.trace import event


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised like a KeyboardInterrupt so that the same clean-up runs."""

    def __init__(self, signum: int = int(signal.SIGTERM)) -> None:
        super().__init__(signum)
        self.signum = signum


# How a sweep stopped by a signal says it (the exit code is 128 + the signal's number).
_STOPPED: dict[int, str] = {
    signal.SIGTERM: "terminated (SIGTERM)",
    signal.SIGHUP: "hung up (SIGHUP: its terminal or ssh session closed)",
}


def stopped_by(exc: KeyboardInterrupt | Terminated) -> tuple[int, str]:
    """The signal that stopped a sweep (SIGINT for Ctrl-C) and how the sweep says it."""
    signum = exc.signum if isinstance(exc, Terminated) else int(signal.SIGINT)
    return signum, _STOPPED.get(signum, "interrupted")


@dataclass
class SweepRun:
    """One sweep: ``launcher`` is Hydra's (rlsweep's, or any other: then every job runs)."""

    launcher: Any
    config: DictConfig
    hooks: TaskHooks
    rerun: str
    # Whether the sweep ends with rlsweep's summary and report (``hydra.sweeper.report``).
    report: bool = True
    # The sweep's parsed overrides, and the keys it varies (its jobs' names): sweep.json.
    overrides: Sequence[Override] = ()
    varying: Sequence[str] = ()
    # The metric of that report (``hydra.sweeper.metric``; None: the report chooses).
    metric: str | None = None
    sweep_dir: Path = field(init=False)
    # Results recorded without group choices (an older rlsweep's), found to be their job's
    # and recorded again with its choices (rlsweep.sweep.legacy).
    rerecorded: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.sweep_dir = sweep_dir_of(self.config)

    def run(self, batches: list[list[list[str]]]) -> list[list[JobReturn]]:
        """Run every batch under the sweep's lock; exit 130/143 on Ctrl-C/SIGTERM."""
        return self._locked(lambda: self._run(batches))

    def drive(self, driver: Driver) -> list[list[JobReturn]]:
        """Run the jobs a search or comparison releases, under the sweep's lock (as
        :meth:`run`); the driver records its outcome before the end-of-sweep hook."""
        return self._locked(lambda: self._drive(driver))

    def _locked(self, body: Callable[[], list[list[JobReturn]]]) -> list[list[JobReturn]]:
        try:
            with sweep_lock(self.sweep_dir), terminate_as_interrupt():
                return body()
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            raise ConfigError(
                f"No space left on the device of {self.sweep_dir} (writing {exc.filename or 'a file'}"
                "). Finished jobs are kept: free some space and run the same command again to "
                "resume."
            ) from None
        except (KeyboardInterrupt, Terminated) as exc:
            signum, what = stopped_by(exc)
            code = 128 + signum
            print(
                f"\n[rlsweep] {what}: running jobs were stopped; finished jobs are kept in "
                f"{self.sweep_dir}. Run the same command again to resume: completed jobs are "
                "skipped, the rest run again.",
                file=sys.stderr,
                flush=True,
            )
            raise SystemExit(code) from None

    def _record(self, batches: list[list[list[str]]] | None = None) -> None:
        """What the sweep is (multirun.yaml, sweep.json), written once it is accepted; with
        its grid's job directories when ``batches`` (every job, planned) name them."""
        OmegaConf.save(self.config, self.sweep_dir / "multirun.yaml")
        jobs = None if batches is None else self._grid(batches)
        record = sweep_record(self.overrides, self.hooks, self.varying, jobs)
        write_sweep_record(self.sweep_dir, record)

    def _grid(self, batches: list[list[list[str]]]) -> list[str] | None:
        """The names of the jobs' directories, each in the sweep directory; None when the
        launcher cannot say, or one is elsewhere (``hydra.sweep.subdir`` with a slash)."""
        prepared_job = getattr(self.launcher, "prepared_job", None)
        if prepared_job is None:
            return None
        names = []
        for overrides in (o for batch in batches for o in batch):
            directory = Path(prepared_job(overrides).directory)
            if directory.parent.resolve() != self.sweep_dir.resolve():
                return None
            names.append(directory.name)
        return names

    def _run(self, batches: list[list[list[str]]]) -> list[list[JobReturn]]:
        plan = self._planner().plan(batches)
        self._say_rerecorded()
        self._say_code(plan.skipped)
        self._record(batches)
        if plan.running:
            jobs = sum(len(batch) for batch in batches)
            line = start_line(self.overrides, self.hooks, jobs, self.config)
            print(line, file=sys.stderr, flush=True)
        preload = self._preload(plan)
        returns: list[list[JobReturn]] = []
        for start, to_run in plan.batches:
            if to_run:
                returns.append(list(self.launcher.launch(to_run, initial_job_idx=start)))
        flat = [r for batch_returns in returns for r in batch_returns]
        if preload is not None:
            preload.wait()
        self._end(flat)
        if plan.skipped:
            returns.append(plan.skipped)
        return returns

    def _drive(self, driver: Driver) -> list[list[JobReturn]]:
        self._record()
        planner = self._planner()
        planner.quiet = True
        feeder = Feeder(self.launcher, driver, planner)
        feeder.run()
        planner.say_removed()
        self._say_rerecorded()
        self._say_code(feeder.skipped)
        if feeder.skipped:
            print(
                f"[rlsweep] resuming {self.sweep_dir}: {len(feeder.skipped)} job(s) already "
                f"complete (skipped), {len(feeder.returns)} run",
                file=sys.stderr,
                flush=True,
            )
        driver.finish(self.sweep_dir)
        self._end(feeder.returns)
        return [feeder.returns + feeder.skipped]

    def _end(self, ran: list[JobReturn]) -> None:
        """The end-of-sweep hook; exit 1 naming the failed jobs, if any."""
        self._on_end()
        failed = [r for r in ran if r.status != JobStatus.COMPLETED]
        if failed:  # said here: Hydra would add a hint to set HYDRA_FULL_ERROR for a trace
            print(failure_message(failed, len(ran)), file=sys.stderr, flush=True)
            raise SystemExit(1)
        event("sweep-end")

    def _preload(self, plan: Plan) -> Preload | None:
        """The report's imports in a thread while the jobs run in other processes (None:
        the task's own end-of-sweep hook, jobs in this process, or none to run)."""
        jobs = [overrides for _, to_run in plan.batches for overrides in to_run]
        prepared_job = getattr(self.launcher, "prepared_job", None)
        where = getattr(self.launcher, "jobs_elsewhere", None)
        elsewhere = where is not None and where(len(jobs))
        if not (jobs and elsewhere and prepared_job and self.report and writes_summary(self.hooks)):
            return None
        dirs = [prepared_job(overrides).directory for overrides in jobs[:WATCHED_JOBS]]
        preload = Preload(REPORT_MODULES, job_started(dirs))
        preload.start()
        return preload

    def _planner(self) -> Planner:
        prepared_job = getattr(self.launcher, "prepared_job", None)

        def prepared(overrides: list[str]) -> tuple[Path, Identity]:
            job = prepared_job(overrides)  # type: ignore[misc]
            return job.directory, job.identity

        return Planner(
            self.sweep_dir,
            self.rerun,
            None if prepared_job is None else prepared,
            self._is_record,
            self._changed,
            identify_dir=self._identify_dir,
            rerun_all=self._rerun_all(),
            stale=lambda identity, done: is_stale(identity, done.return_value),
        )

    def _rerun_all(self) -> str:
        """How this app's command line asks for every job again."""
        built_in = "rerun" in sweep_level_keys(self.config)
        return "rerun=all" if built_in else "hydra.sweeper.rerun=all"

    def _say_code(self, skipped: Sequence[JobReturn]) -> None:
        """Say how many completed jobs kept ran other code than the app's now."""
        function = getattr(self.launcher, "task_function", None)
        if not skipped or self.hooks.keys.code or function is None:
            return
        line = ran_other_code(
            [r.return_value for r in skipped], code_fingerprint(function), self._rerun_all()
        )
        if line is not None:
            print(line, file=sys.stderr, flush=True)

    def _say_rerecorded(self) -> None:
        if self.rerecorded:
            print(
                f"[rlsweep] {self.rerecorded} completed job(s) recorded before config-group "
                "choices were part of a job: their choices, read from each job's "
                ".hydra/hydra.yaml, are the ones chosen now; result.json recorded again with "
                "them (the numbers unchanged)",
                file=sys.stderr,
                flush=True,
            )

    def _identify_dir(self, job_dir: Path) -> str | None:
        """The lookup digest of the job whose config a directory's ``.hydra/`` holds (a job
        an earlier run named otherwise, that left no result), or None."""
        path = job_dir / HYDRA_DIR / "config.yaml"
        choices = recorded_choices(job_dir / HYDRA_DIR / "hydra.yaml") or {}
        try:
            cfg = OmegaConf.load(path)
            if not isinstance(cfg, DictConfig):
                return None
            return self.hooks.identify(cfg, choices=choices).lookup_digest
        except Exception:
            return None

    def _is_record(self, done: JobReturn) -> bool:
        """Whether a completed job's result.json is rlsweep's record (or, for an app that
        checks its own results, one it can compare)."""
        recorded = recorded_identity(done.return_value)
        return recorded is not None or self.hooks.changed_since is not None

    def _changed(self, overrides: list[str], identity: Identity, done: JobReturn) -> str | None:
        """What differs between a completed job's recorded identity and its identity now
        (None: it is the same job)."""
        recorded = recorded_identity(done.return_value)
        if recorded is not None and recorded[0] == identity.digest:
            return None
        if is_stale(identity, done.return_value) or same_but_code_field(
            identity, done.return_value
        ):  # kept by rerun=failed, or recorded without the code in its identity
            return None
        legacy = legacy_change(Path(str(done.working_dir)), identity, done.return_value)
        if legacy is None:
            self.rerecorded += 1
        if legacy != "":  # recorded without choices (an older rlsweep's result)
            return legacy
        then = recorded[1].get("numerics", "native") if recorded is not None else "native"
        if then != identity.numerics:  # (not a key of the job's config)
            return f"numerics: {then!r} then, {identity.numerics!r} now"
        check = self.hooks.changed_since
        if check is not None:
            job_keys = getattr(self.launcher, "job_keys", None)
            return None if job_keys is None else check(job_keys(overrides), done.return_value)
        if recorded is None:
            raise RuntimeError(f"{overrides}: a result without rlsweep's record was not rerun")
        return setting_changes(recorded[1].get("config", {}), dict(identity.config)) or (
            "how its seeds are derived (the replicate, root or agent-side keys, or what the "
            "task reads at its replicate key: hydra.launcher.identity.replicate_value)"
        )

    def _on_end(self) -> None:
        """The task's end-of-sweep hook, or the summary of every job (none when the sweep
        asked for no report)."""
        if not self.report and writes_summary(self.hooks):
            print(
                f"[rlsweep] no summary or report (report=false): python -m rlsweep.report "
                f"{self.sweep_dir} writes them.",
                file=sys.stderr,
                flush=True,
            )
            return
        event("summary-start")
        if self.hooks.on_sweep_end is not None:
            self.hooks.on_sweep_end(self.sweep_dir)
        else:
            from rlsweep.summary import summarize, summarize_at_end

            summarize_at_end(self.sweep_dir, summarize, metric=self.metric)
        event("summary-end")


def check_report(report: object) -> bool:
    """``hydra.sweeper.report`` is true or false, or a ConfigError says so."""
    if not isinstance(report, bool):
        raise ConfigError(
            f"report (hydra.sweeper.report)={report!r} is not allowed; choose true (the sweep "
            "ends with its summary and report) or false (it ends with its last job)."
        )
    return report


def writes_summary(hooks: TaskHooks) -> bool:
    """Whether the sweep ends with rlsweep's summary and report (no hook of the task's
    own, or the built-in app's)."""
    hook = hooks.on_sweep_end
    return hook is None or (
        getattr(hook, "__module__", None) == "rlsweep.app"
        and getattr(hook, "__qualname__", None) == "on_sweep_end"
    )


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the sweep runs, SIGTERM and SIGHUP (a closed terminal or ssh session) stop it
    like Ctrl-C does (exit codes 143 and 129), saying how to resume; a SIGHUP the sweep was
    told to ignore (``nohup``) stays ignored."""

    def handler(signum: int, frame: object) -> None:
        raise Terminated(signum)

    previous: dict[int, Any] = {}
    try:
        for stop in (signal.SIGTERM, signal.SIGHUP):
            if stop == signal.SIGHUP and signal.getsignal(stop) == signal.SIG_IGN:
                continue
            previous[stop] = signal.signal(stop, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        for number, handler_before in previous.items():
            signal.signal(number, handler_before)


@contextlib.contextmanager
def planning_interruptible() -> Iterator[None]:
    """Ctrl-C (or SIGTERM) while the jobs are checked, before anything is written: the
    usual short message and exit code, not a traceback."""
    try:
        with terminate_as_interrupt():
            yield
    except (KeyboardInterrupt, Terminated) as exc:
        signum, what = stopped_by(exc)
        print(
            f"\n[rlsweep] {what} while checking the sweep's jobs: nothing was run or written.",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(128 + signum) from None


def failure_message(failed: list[JobReturn], total: int) -> str:
    lines = [f"{len(failed)} of {total} jobs failed:"]
    for r in failed[:20]:
        where = r.hydra_cfg.hydra.runtime.output_dir if r.hydra_cfg is not None else "?"
        first = error_line(r)
        lines.append(f"  {' '.join(r.overrides or [])}: {first}\n    traceback: {where}/error.txt")
    if len(failed) > 20:
        lines.append(f"  ... and {len(failed) - 20} more (see the summary).")
    return "\n".join(lines)
