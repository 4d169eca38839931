"""rlsweep's sweeper: Hydra's basic grid sweeper, with the sweep-level guarantees.

- Every job of every batch is checked and validated before anything is written.
- Sweeping the launcher is refused (Hydra would silently run every job with one launcher).
- A failed job never stops the sweep: all batches run, then the task's end-of-sweep hook
  (``rlsweep.task(on_sweep_end=...)``; by default the summary of every job) runs, then the
  sweep exits non-zero naming the failed jobs and where their tracebacks are.
- Resume: with the rlsweep launcher, running the same command again into the same sweep
  directory skips every job whose ``result.json`` was computed for the same job (its
  identity: its config values); ``rerun`` chooses: ``missing``, ``failed`` or ``all``. A
  result of other settings is never taken for a job's: the sweep is refused, naming what
  changed. A lock keeps two sweeps out of one directory.
"""

import contextlib
import json
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.core.utils import JobReturn, JobStatus
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from rlsweep.errors import ConfigError, SweepFailed
from rlsweep.identity import Identity, setting_changes
from rlsweep.store import (
    RERUN_MODES,
    RESULT_FILE,
    SweepLocked,
    clear_for_rerun,
    job_status,
    recorded_identity,
    should_run,
    sweep_lock,
)
from rlsweep.task import TaskHooks, hooks_of

# Keys that configure the sweep as a whole: Hydra would silently use one value for all jobs.
_LAUNCHER_KEYS = ("launcher", "hydra/launcher", "n_jobs", "name", "rerun")


@dataclass
class RLSweepSweeperConf:
    _target_: str = "hydra_plugins.rlsweep_launcher.rlsweep_sweeper.RLSweepSweeper"
    # Jobs handed to the launcher at once; null = the whole grid in one batch.
    max_batch_size: Optional[int] = None
    # The grid in YAML, one entry per key, written as on the command line:
    # {agent: "a2c,ppo", seed: "range(8)"}.
    params: Optional[Dict[str, str]] = None
    # Which jobs run when the sweep directory already holds results: missing (every job
    # without result.json), failed (only jobs that failed), all (everything, from scratch).
    rerun: str = "missing"


ConfigStore.instance().store(
    group="hydra/sweeper", name="rlsweep", node=RLSweepSweeperConf, provider="rlsweep"
)


def refuse_launcher_sweep(overrides: list[Override]) -> None:
    for o in overrides:
        key = o.key_or_group
        if o.is_sweep_override() and (key in _LAUNCHER_KEYS or key.startswith("hydra.launcher")):
            raise ConfigError(
                f"Sweeping over '{key}' ({o.input_line}) is not supported: a sweep runs with one "
                "launcher, and Hydra would silently run every job with the first value. "
                f"Run one sweep per value instead, e.g. '{key}={o.sweep_string_iterator().__next__()}'."
            )


class RLSweepSweeper(BasicSweeper):
    def __init__(
        self,
        max_batch_size: Optional[int] = None,
        params: Optional[Dict[str, str]] = None,
        rerun: str = "missing",
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)
        if rerun not in RERUN_MODES:
            raise ConfigError(
                f"rerun (hydra.sweeper.rerun)={rerun!r} is not allowed; choose one of "
                f"{', '.join(RERUN_MODES)}: missing runs every job without result.json, "
                "failed only the jobs that failed, all every job from scratch."
            )
        self.rerun = rerun
        self._task_function: Optional[TaskFunction] = None

    def setup(
        self,
        *,
        hydra_context: HydraContext,
        task_function: TaskFunction,
        config: DictConfig,
    ) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self._task_function = task_function

    def sweep(self, arguments: list[str]) -> Any:
        if self.config is None or self.launcher is None or self.hydra_context is None:
            raise RuntimeError("RLSweepSweeper.sweep() called before setup()")
        params_conf = self._parse_config()
        params_conf.extend(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides(params_conf)
        refuse_launcher_sweep(overrides)
        prime = getattr(self.launcher, "prime", None)
        if prime is not None:  # the launcher need not parse each job's overrides again
            prime(overrides)
        self.overrides = self.split_arguments(overrides, self.max_batch_size)
        batches: list[list[list[str]]] = []
        while not self.is_done():
            batches.append([list(job) for job in self.get_job_batch()])

        # Compose and validate every job before writing anything.
        prepare = getattr(self.launcher, "prepare", None)
        start = 0
        for batch in batches:
            if prepare is not None:
                prepare(batch, start)
            else:
                self.validate_batch_is_legal(batch)
            start += len(batch)

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        try:
            with sweep_lock(sweep_dir), terminate_as_interrupt():
                return self._run(sweep_dir, batches)
        except SweepLocked as exc:
            raise ConfigError(str(exc)) from None
        except (KeyboardInterrupt, Terminated) as exc:
            code = 143 if isinstance(exc, Terminated) else 130
            what = "terminated (SIGTERM)" if code == 143 else "interrupted"
            print(
                f"\n[rlsweep] {what}: running jobs were stopped; finished jobs are kept in "
                f"{sweep_dir}. Run the same command again to resume: completed jobs are "
                "skipped, the rest run again.",
                file=sys.stderr,
                flush=True,
            )
            raise SystemExit(code) from None

    def _run(self, sweep_dir: Path, batches: list[list[list[str]]]) -> list[list[JobReturn]]:
        assert self.config is not None and self.launcher is not None
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        plan, skipped = self._plan(sweep_dir, batches)
        returns: list[list[JobReturn]] = []
        for start, to_run in plan:
            if to_run:
                returns.append(list(self.launcher.launch(to_run, initial_job_idx=start)))
        flat = [r for batch_returns in returns for r in batch_returns]
        self._on_end(sweep_dir)
        failed = [r for r in flat if r.status != JobStatus.COMPLETED]
        if failed:
            raise SweepFailed(failure_message(failed, len(flat)))
        if skipped:
            returns.append(skipped)
        return returns

    def _plan(
        self, sweep_dir: Path, batches: list[list[list[str]]]
    ) -> tuple[list[tuple[int, list[list[str]]]], list[JobReturn]]:
        """Which jobs of each batch run (with the batch's first index); the skipped ones."""
        prepared_job = getattr(self.launcher, "prepared_job", None)
        if not _holds_jobs(sweep_dir):  # a new sweep: every job runs, no directory to check
            prepared_job = None
        plan: list[tuple[int, list[list[str]]]] = []
        skipped: list[JobReturn] = []
        changed: list[tuple[list[str], str]] = []  # completed jobs whose settings changed
        to_clear: list[Path] = []  # failed or killed jobs that run again
        start = 0
        for batch in batches:
            to_run = batch
            if prepared_job is not None:
                to_run = []
                for overrides in batch:
                    job = prepared_job(overrides)
                    directory = job.directory
                    status = job_status(directory)
                    done = completed_return(overrides, directory) if status == "completed" else None
                    if status == "completed" and (done is None or not self._is_record(done)):
                        status = "incomplete"  # a result.json rlsweep did not write
                    if should_run(status, self.rerun):
                        if status != "missing":
                            to_clear.append(directory)
                        to_run.append(overrides)
                    elif status == "completed" and done is not None:
                        what = self._changed(overrides, job.identity, done)
                        if what is not None:
                            changed.append((overrides, what))
                        skipped.append(done)
            plan.append((start, to_run))
            start += len(batch)
        if changed:  # refused before any earlier result is touched
            raise ConfigError(changed_message(sweep_dir, changed, len(skipped)))
        for directory in to_clear:
            clear_for_rerun(directory, fresh=self.rerun == "all")
        total = start
        running = sum(len(r) for _, r in plan)
        if running < total:
            left = total - running - len(skipped)
            print(
                f"[rlsweep] resuming {sweep_dir}: {len(skipped)} of {total} jobs already "
                f"complete (skipped), {running} to run"
                + (f", {left} left alone by rerun={self.rerun}" if left else "")
                + ". Use rerun=all to run everything again.",
                file=sys.stderr,
                flush=True,
            )
        return plan, skipped

    @property
    def hooks(self) -> TaskHooks:
        fn = self._task_function
        return (hooks_of(fn) if fn is not None else None) or TaskHooks()

    def _is_record(self, done: JobReturn) -> bool:
        """Whether a completed job's result.json is rlsweep's record (or, for an app that
        checks its own results, one it can compare)."""
        return (
            recorded_identity(done.return_value) is not None or self.hooks.changed_since is not None
        )

    def _changed(self, overrides: list[str], identity: Identity, done: JobReturn) -> str | None:
        """What differs between a completed job's recorded identity and its identity now
        (None: it is the same job)."""
        recorded = recorded_identity(done.return_value)
        if recorded is not None and recorded[0] == identity.digest:
            return None
        check = self.hooks.changed_since
        if check is not None:
            job_keys = getattr(self.launcher, "job_keys", None)
            return None if job_keys is None else check(job_keys(overrides), done.return_value)
        assert recorded is not None
        then = recorded[1]
        return setting_changes(then.get("config", {}), dict(identity.config)) or (
            "how its seeds are derived (the replicate, root or agent-side keys)"
        )

    def _on_end(self, sweep_dir: Path) -> None:
        """The task's end-of-sweep hook, or the summary of every job."""
        on_end = self.hooks.on_sweep_end
        if on_end is not None:
            on_end(sweep_dir)
            return
        from rlsweep.summary import summarize_jobs

        summarize_jobs(sweep_dir, echo=True)


def _holds_jobs(sweep_dir: Path) -> bool:
    """Whether the sweep directory has any sub-directory (a job's, from an earlier run)."""
    try:
        return any(entry.is_dir() for entry in sweep_dir.iterdir())
    except OSError:
        return False


def changed_message(sweep_dir: Path, changed: list[tuple[list[str], str]], completed: int) -> str:
    overrides, what = changed[0]
    return (
        f"{len(changed)} of the {completed} completed jobs in {sweep_dir} were computed with "
        f"other settings than this command gives them now, e.g. {' '.join(overrides)}: "
        f"{what}. (A config file changed since they ran?) Skipping them would mix old and "
        "new results. Nothing was run: use rerun=all to run every job again with the "
        "current settings, or another sweep directory for a separate sweep (name=<new name> "
        "with python -m rlsweep, hydra.sweep.dir=<dir> with any app)."
    )


class Terminated(BaseException):
    """SIGTERM, raised like a KeyboardInterrupt so that the same clean-up runs."""


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the sweep runs, SIGTERM stops it like Ctrl-C does (exit code 143)."""

    def handler(signum: int, frame: object) -> None:
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def completed_return(overrides: list[str], job_dir: Path) -> JobReturn | None:
    """The JobReturn of a job a previous sweep completed (read from its result.json), or
    None if that file is not a JSON object (not rlsweep's record)."""
    try:
        result = json.loads((job_dir / RESULT_FILE).read_text())
    except ValueError:
        return None
    if not isinstance(result, dict):
        return None
    ret = JobReturn(overrides=overrides, working_dir=str(job_dir), status=JobStatus.COMPLETED)
    ret.return_value = result
    return ret


def failure_message(failed: list[JobReturn], total: int) -> str:
    lines = [f"{len(failed)} of {total} jobs failed:"]
    for r in failed[:20]:
        where = r.hydra_cfg.hydra.runtime.output_dir if r.hydra_cfg is not None else "?"
        exc = r._return_value
        first = str(exc).splitlines()[0] if exc is not None else "unknown error"
        lines.append(f"  {' '.join(r.overrides or [])}: {first}\n    traceback: {where}/error.txt")
    if len(failed) > 20:
        lines.append(f"  ... and {len(failed) - 20} more (see the summary).")
    return "\n".join(lines)
