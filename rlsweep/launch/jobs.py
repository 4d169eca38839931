"""One job of a sweep, what a launch shares between its jobs, and running a job through
Hydra's ``run_job`` in whatever process the executor chose."""

from __future__ import annotations

import functools
import json
import logging
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from rlsweep.errors import JobError, Preempted
from rlsweep.identity import Identity
from rlsweep.launch.children import ended_with_the_job
from rlsweep.launch.compose import FastComposer, Recipe
from rlsweep.launch.exits import exits_fail_the_job
from rlsweep.slurm_options import SlurmOptions
from rlsweep.store import (
    ERROR_FILE,
    RESULT_FILE,
    LinkRefused,
    atomic_write_text,
    job_claim,
    recorded_identity,
    refuse_link,
    sweep_dir_of,
)
from rlsweep.task_api import as_task
from rlsweep.trace import traced

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LaunchContext:
    """What Hydra gives the launcher at set-up, shared by every job of the launch."""

    hydra_context: HydraContext
    task_function: TaskFunction
    config: DictConfig
    # Composes each job, sharing the work between jobs with the same group choices.
    composer: FastComposer
    # Options of the submitit executors (hydra.launcher.slurm).
    slurm: SlurmOptions

    @property
    def sweep_dir(self) -> Path:
        return sweep_dir_of(self.config)


@dataclass(frozen=True)
class SweepJob:
    """One job of a sweep: its number, its overrides and how to compose its config."""

    idx: int
    overrides: tuple[str, ...]
    # Composes the job's config where it runs (see compose): the parent only checks it.
    recipe: Recipe
    # What the job is (its config values): resume compares it with its result's.
    identity: Identity

    @functools.cached_property
    def directory(self) -> Path:
        """Where it writes; resolved when first needed (a millisecond a job), then kept."""
        return self.recipe.directory(self.idx)

    def compose(self) -> DictConfig:
        """The job's full config, as Hydra's basic launcher would run it."""
        return self.recipe.compose(self.idx)

    @property
    def label(self) -> str:
        """``#<number> (<overrides>)``, for messages."""
        return f"#{self.idx} ({' '.join(self.overrides)})"


def _hydra_cfg(job: SweepJob, config: DictConfig) -> DictConfig:
    """The job's ``hydra`` node as ``run_job`` returns it: with hydra.runtime.output_dir."""
    hydra_cfg = OmegaConf.masked_copy(config, "hydra")
    with read_write(hydra_cfg.hydra.runtime), open_dict(hydra_cfg.hydra.runtime):
        hydra_cfg.hydra.runtime.output_dir = str(job.directory.resolve())
    return hydra_cfg


class Returned(JobReturn):
    """The JobReturn a launch keeps and returns for each job: Hydra's, without its configs.

    ``cfg`` and ``hydra_cfg`` are composed again from the job's recipe each time they are
    read, as ``run_job`` made them (the job's keys; the ``hydra`` node with
    hydra.runtime.output_dir): a worker sends its JobReturn without them
    (:func:`without_configs`). Held for every job, they would make the sweep's process grow
    with the jobs (bench/scale.py measures its memory) and enlarge each pickle both ways. Nothing
    in rlsweep reads them but messages about failed jobs; Hydra's launcher tests do.
    A value assigned to either is kept and returned instead.
    """

    def __init__(self, ret: JobReturn, job: SweepJob) -> None:
        self._job = job
        self._cfg: DictConfig | None = None
        self._hydra_cfg: DictConfig | None = None
        super().__init__(
            overrides=ret.overrides,
            working_dir=ret.working_dir,
            task_name=ret.task_name,
            status=ret.status,
            _return_value=ret._return_value,
        )

    @property
    def directory(self) -> Path:
        """The job's output directory."""
        return self._job.directory

    @property
    def cfg(self) -> DictConfig | None:
        if self._cfg is not None:
            return self._cfg
        config = self._job.compose()
        with read_write(config), open_dict(config):
            del config["hydra"]
        return config

    @cfg.setter
    def cfg(self, value: DictConfig | None) -> None:
        self._cfg = value

    @property
    def hydra_cfg(self) -> DictConfig | None:
        if self._hydra_cfg is not None:
            return self._hydra_cfg
        return _hydra_cfg(self._job, self._job.compose())

    @hydra_cfg.setter
    def hydra_cfg(self, value: DictConfig | None) -> None:
        self._hydra_cfg = value


def without_configs(ret: JobReturn) -> JobReturn:
    """``ret`` with no ``cfg`` and ``hydra_cfg``: what a worker sends back (see Returned)."""
    ret.cfg = ret.hydra_cfg = None
    return ret


def failed_return(job: SweepJob, exc: BaseException, tb: str) -> JobReturn:
    """A FAILED JobReturn for a job that died outside its task (worker crash, time limit,
    SLURM): its error.txt holds ``tb``."""
    job_dir = job.directory
    config = job.compose()
    ret = JobReturn(
        overrides=list(job.overrides),
        hydra_cfg=_hydra_cfg(job, config),
        working_dir=str(job_dir),
        task_name=str(OmegaConf.select(config, "hydra.job.name")),
        status=JobStatus.FAILED,
    )
    ret.return_value = (
        exc if isinstance(exc, JobError) else JobError(f"{type(exc).__name__}: {exc}", tb)
    )
    record_failure_file(job_dir, tb)
    return ret


def record_failure_file(job_dir: Path, tb: str) -> None:
    """Write a failed job's traceback to its error.txt (a job directory that cannot be
    written, or is a symbolic link, is said in the log; the failure itself is still
    reported)."""
    try:
        refuse_link(job_dir)
        atomic_write_text(job_dir / ERROR_FILE, tb)
    except LinkRefused as exc:
        log.warning(f"the job's error.txt not written: {exc}")
    except OSError as exc:
        log.warning(f"could not write {job_dir / ERROR_FILE}: {exc}")


def _finish(ret: JobReturn, *, keep_exception: bool) -> JobReturn:
    """Write a failed job's traceback into its directory; make the error picklable."""
    if ret.status != JobStatus.FAILED:
        return ret
    exc = ret._return_value
    tb = "".join(traceback.format_exception(exc)) if isinstance(exc, BaseException) else str(exc)
    if ret.hydra_cfg is None:
        raise RuntimeError(f"Hydra's run_job returned a failed job without its config: {exc}")
    if not isinstance(exc, Preempted):  # stopped after a checkpoint: not a failure
        record_failure_file(Path(ret.hydra_cfg.hydra.runtime.output_dir), tb)
    if not keep_exception:
        message = f"{type(exc).__name__}: {exc}"
        ret.return_value = JobError(message, tb, preempted=isinstance(exc, Preempted))
    return ret


def execute(
    hydra_context: HydraContext,
    task_function: TaskFunction,
    job: SweepJob,
    *,
    configure_logging: bool = True,
    keep_exception: bool = False,
    config: DictConfig | None = None,
) -> JobReturn:
    """Run one job through Hydra's ``run_job`` (in whatever process this is), composing
    its config here unless the caller already did (``config``). The task runs as an
    rlsweep job (:func:`rlsweep.task_api.as_task`): its own threads and seeds, its result
    recorded with its identity; its ``os._exit`` or ``sys.exit`` fails it
    (:mod:`rlsweep.launch.exits`) instead of ending this process."""
    setup_globals()
    if config is None:
        config = job.compose()
    with job_claim(job.directory) as held:
        done = finished_return(job) if held is not None else None
        if done is not None:  # the run it waited for completed it
            print(
                f"[rlsweep] {job.directory.name}: completed by the other run ({held}): "
                "not run again",
                file=sys.stderr,
                flush=True,
            )
            return done
        # run_job installs the config in HydraConfig itself (a copy of its hydra node, before
        # and after it sets the output directory) and restores the previous one after the
        # job; a third install here, as Hydra's basic launcher does, would add a noticeable
        # share of a trivial sweep's CPU (bench/launcher.py measures the launcher's cost).
        with ended_with_the_job(job.directory.name):  # its processes end with it
            ret = run_job(
                hydra_context=hydra_context,
                task_function=traced(exits_fail_the_job(as_task(task_function))),
                config=config,
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
                configure_logging=configure_logging,
            )
    return _finish(ret, keep_exception=keep_exception)


def error_line(ret: JobReturn) -> str | None:
    """A failed job's error, first line (None if it completed)."""
    if ret.status == JobStatus.COMPLETED:
        return None
    exc = ret._return_value
    if exc is None:
        return "unknown error"
    text = str(exc) if isinstance(exc, JobError) else f"{type(exc).__name__}: {exc}"
    return (text.splitlines() or [type(exc).__name__])[0]


@dataclass
class CompletedReturn(JobReturn):
    """The JobReturn of a job a previous sweep completed, read from its result.json."""

    directory: Path = Path()  # the job's output directory


def completed_return(overrides: list[str], job_dir: Path) -> CompletedReturn | None:
    """The JobReturn of a job a previous sweep completed (read from its result.json), or
    None if that file is not a JSON object (not rlsweep's record)."""
    try:
        result = json.loads((job_dir / RESULT_FILE).read_text())
    except (OSError, ValueError):  # none, or not JSON
        return None
    if not isinstance(result, dict):
        return None
    ret = CompletedReturn(
        overrides=overrides,
        working_dir=str(job_dir),
        status=JobStatus.COMPLETED,
        directory=job_dir,
    )
    ret.return_value = result
    return ret


def finished_return(job: SweepJob) -> JobReturn | None:
    """The job's COMPLETED JobReturn if its directory holds rlsweep's record of this very
    job (it finished, whatever its worker's future says), else None."""
    done = completed_return(list(job.overrides), job.directory)
    recorded = None if done is None else recorded_identity(done.return_value)
    return done if recorded is not None and recorded[0] == job.identity.digest else None
