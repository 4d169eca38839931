"""A sweeper's job as several replicates (``hydra.launcher.replicates``), for Hydra's own
sweepers (its Optuna sweeper...), which read each job's return value as a trial's objective.

With ``replicates: R > 1`` every job the sweeper hands the launcher is a trial run as R jobs,
the task's replicate key (``rlsweep.Keys.replicate``, ``seed`` by default) set to 0..R-1:
all launched together through the normal engine (in parallel, identity seeds, each replicate
its own job directory), and one ``JobReturn`` per trial back, COMPLETED with the aggregate
of its replicates' results (:mod:`rlsweep.search.objective`), or FAILED naming the failed
replicates. ``replicates: 1`` (the default) launches the jobs as they are.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from rlsweep.errors import ConfigError, JobError
from rlsweep.launch.jobs import error_line
from rlsweep.search.objective import aggregate, job_numbers, metric_value
from rlsweep.search.settings import Objective

if TYPE_CHECKING:
    from rlsweep.launch.core import Launch

# The setting that names the number aggregated, for messages.
METRIC_KEY = "hydra.launcher.metric"
_ABSENT = object()


@dataclass(frozen=True)
class Replicates:
    """How many replicates a sweeper's job runs as, and how they reduce to its value."""

    count: int = 1
    objective: str = Objective.iqm.value
    metric: str | None = None

    @staticmethod
    def create(count: int, objective: Enum | str, metric: str | None) -> Replicates:
        """The settings, or a ConfigError naming the key and what is allowed."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"hydra.launcher.replicates must be an integer >= 1, got {count!r}.")
        raw = objective.value if isinstance(objective, Enum) else objective
        allowed = [o.value for o in Objective]
        if raw not in allowed:
            raise ConfigError(
                f"hydra.launcher.objective={raw!r} is not allowed; choose one of "
                f"{', '.join(allowed)}."
            )
        if metric is not None and not isinstance(metric, str):
            raise ConfigError(
                f"hydra.launcher.metric must be a result's name or null, got {metric!r}."
            )
        return Replicates(count, str(raw), metric)

    def refuse_own_sweeper(self) -> None:
        """rlsweep's own sweeper runs replicates itself: refuse running each of its jobs R
        times over."""
        if self.count > 1:
            raise ConfigError(
                f"hydra.launcher.replicates={self.count} is for Hydra's own sweepers "
                "(hydra/sweeper=optuna...), whose jobs are trials; rlsweep's sweeper runs "
                "replicates itself: sweep the replicate key ('seed=range(4)') or use "
                "search.replicates, and leave hydra.launcher.replicates at 1."
            )

    def launch(
        self, engine: Launch, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> list[JobReturn]:
        """Run the batch: each job as ``count`` replicates, one JobReturn per job back."""
        if self.count == 1:
            return engine.launch(job_overrides, initial_job_idx)
        key = engine.hooks.keys.replicate
        if key is None:
            raise ConfigError(
                f"hydra.launcher.replicates={self.count} runs each trial as replicates, but the "
                "task has no replicate key: name it with hydra.launcher.identity.replicate=<key>."
            )
        for trial in job_overrides:
            self.check_trial(engine, trial, key)
        jobs = [(*trial, f"{key}={r}") for trial in job_overrides for r in range(self.count)]
        # Trial k's replicates are jobs k*R .. k*R+R-1: numbers stay unique across the
        # sweeper's batches, which count trials.
        returns = engine.launch(jobs, initial_job_idx * self.count)
        n = self.count
        return [
            self.trial_return(list(trial), returns[i * n : (i + 1) * n], key)
            for i, trial in enumerate(job_overrides)
        ]

    def check_trial(self, engine: Launch, trial: Sequence[str], key: str) -> None:
        """A trial must leave its replicate key to the launcher, and the config have it."""
        for override, _ in engine.context.composer.parse(trial):
            if override.key_or_group == key:
                raise ConfigError(
                    f"hydra.launcher.replicates={self.count} sets the replicate key '{key}' "
                    f"to 0..{self.count - 1} in every trial, but this trial sets it itself "
                    f"({override.input_line}): take '{key}' out of the sweeper's parameters, "
                    "or set hydra.launcher.replicates=1."
                )
        if OmegaConf.select(engine.job_keys(trial), key, default=_ABSENT) is _ABSENT:
            raise ConfigError(
                f"hydra.launcher.replicates={self.count} sets the replicate key '{key}' per "
                f"trial, but the config has no '{key}': add '{key}: 0' to it, or declare the "
                "task's replicate key with @rlsweep.task(keys=rlsweep.Keys(replicate=...))."
            )

    def trial_return(self, trial: list[str], returns: Sequence[JobReturn], key: str) -> JobReturn:
        """One trial's JobReturn from its replicates': their aggregate, or FAILED."""
        first = returns[0]
        ret = JobReturn(
            overrides=trial,
            cfg=first.cfg,
            hydra_cfg=first.hydra_cfg,
            working_dir=first.working_dir,
            task_name=first.task_name,
            status=JobStatus.COMPLETED,
        )
        failed = [(r, ret_) for r, ret_ in enumerate(returns) if error_line(ret_) is not None]
        if failed:
            return _failed(ret, *_failure_text(trial, failed, key))
        try:
            values = [
                metric_value(job_numbers(r, self.metric), self.metric, METRIC_KEY) for r in returns
            ]
        except ConfigError as exc:
            # A result without the number: the trial fails, the sweeper decides what next.
            return _failed(ret, f"trial {' '.join(trial)}: {exc}", traceback.format_exc())
        ret.return_value = aggregate(values, self.objective)
        return ret


def _failure_text(
    trial: list[str], failed: list[tuple[int, JobReturn]], key: str
) -> tuple[str, str]:
    """The failed trial's message (its failed replicates, each with its error's first line
    and directory) and the replicates' tracebacks."""
    lines, tracebacks = [], []
    for r, ret in failed:
        lines.append(f"  {key}={r} ({_directory(ret)}): {error_line(ret)}")
        exc = ret._return_value
        tb = exc.remote_traceback if isinstance(exc, JobError) else _format(exc)
        tracebacks.append(f"--- replicate {key}={r} ---\n{tb}")
    message = f"trial {' '.join(trial) or '(no overrides)'}: {len(failed)} replicate(s) failed:"
    return "\n".join([message, *lines]), "\n".join(tracebacks)


def _directory(ret: JobReturn) -> str:
    """A job's own directory (its working_dir is the sweep's when Hydra does not chdir)."""
    out = OmegaConf.select(ret.hydra_cfg, "hydra.runtime.output_dir") if ret.hydra_cfg else None
    return str(out or ret.working_dir)


def _format(exc: object) -> str:
    if isinstance(exc, BaseException):
        return "".join(traceback.format_exception(exc))
    return str(exc)


def _failed(ret: JobReturn, message: str, tb: str) -> JobReturn:
    ret.status = JobStatus.FAILED
    ret.return_value = JobError(message, tb)
    return ret
