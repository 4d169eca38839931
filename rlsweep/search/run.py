"""A search as a sweep :class:`~rlsweep.sweep.drive.Driver`: trials proposed as results
arrive, every trial run as ``replicates`` jobs, its objective an aggregate over them.

Trial ``k`` is proposed once trials ``0 .. k - in_flight`` are complete, from their
results only; with halving, trial ``k`` runs its other replicates once the first replicates
of trials ``0 .. k`` are known. Both depend on results, never on the order jobs end in, so
the same command gives the same trials serially, on joblib, on SLURM and after a resume.
Trial ``k``'s replicate ``r`` is job number ``k * replicates + r``, its overrides the
command's fixed ones, the trial's values and ``<replicate key>=r``.

The outcome is ``search.json`` in the sweep directory (the trials, their values per
replicate, the best trial); the report adds its table and progress plot.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.override_parser.types import Override
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig, OmegaConf

from rlsweep.launch.jobs import error_line
from rlsweep.search.objective import job_numbers, metric_name
from rlsweep.search.samplers import import_optuna, propose
from rlsweep.search.settings import SearchSettings
from rlsweep.search.space import Dimension, overrides, space
from rlsweep.search.trials import Trial, earns_replicates, known
from rlsweep.store import SEARCH_FILE, atomic_write_json
from rlsweep.sweep.drive import Release, split_overrides
from rlsweep.task_api import TaskHooks

FORMAT = 1


@dataclass
class Search:
    settings: SearchSettings
    dims: list[Dimension]
    # Overrides every job gets (the command's, without the sweeper's own settings).
    fixed: list[str]
    replicate_key: str
    root: int
    trials: list[Trial] = field(default_factory=list)
    # A released job's overrides -> (trial, replicate).
    jobs: dict[tuple[str, ...], tuple[int, int]] = field(default_factory=dict)
    # Trials 0..decided-1 have had their halving decision.
    decided: int = 0
    metric: str | None = None

    @classmethod
    def create(
        cls,
        settings: SearchSettings,
        sweep_overrides: Sequence[Override],
        config: DictConfig,
        hooks: TaskHooks,
    ) -> Search:
        key = hooks.replicate_key("search.trials")
        chooses = (
            "a search chooses itself: every trial runs replicates 0..search.replicates-1 "
            "(set search.replicates instead)"
        )
        fixed, swept = split_overrides(sweep_overrides, config, key, chooses)
        root = OmegaConf.select(config, hooks.keys.root) if hooks.keys.root else 0
        if settings.sampler.value == "tpe":
            import_optuna()  # a missing extra is said before any job runs
        return cls(settings, space(swept), fixed, key, int(root or 0), metric=settings.metric)

    @property
    def maximize(self) -> bool:
        return self.settings.direction.value == "maximize"

    @property
    def total(self) -> int:
        assert self.settings.trials is not None
        return self.settings.trials

    # ------------------------------------------------------------ the Driver protocol

    def start(self) -> list[Release]:
        s = self.settings
        print(
            f"[rlsweep] search: {s.trials} trials x {s.replicates} replicates, "
            f"{s.sampler.value} sampler, {s.objective.value} of "
            f"{self.metric or 'the result'} ({s.direction.value}); "
            + "; ".join(d.describe() for d in self.dims),
            file=sys.stderr,
            flush=True,
        )
        return self._propose()

    def done(self, ret: JobReturn) -> list[Release]:
        k, r = self.jobs[tuple(ret.overrides or ())]
        trial = self.trials[k]
        if ret.status == JobStatus.COMPLETED:
            result = job_numbers(ret, self.metric)
            self.metric = metric_name(result, self.metric, "search.metric")
            trial.values[r] = float(result[self.metric])
        else:
            trial.errors[r] = error_line(ret) or "failed"
        return self._halve() + self._propose()

    def finish(self, sweep_dir: Path) -> None:
        record = self.record()
        atomic_write_json(sweep_dir / SEARCH_FILE, record)
        print(table(record), file=sys.stderr, flush=True)

    # ------------------------------------------------------------ proposals

    def _propose(self) -> list[Release]:
        """Every trial whose proposal's results are all known, released."""
        out: list[Release] = []
        lag = self.settings.in_flight
        while len(self.trials) < self.total:
            k = len(self.trials)
            upto = max(0, k - lag + 1)  # trial k is proposed from trials 0 .. k - lag
            if not all(t.complete for t in self.trials[:upto]):
                break
            params = propose(
                self.settings.sampler.value,
                self.dims,
                self.root,
                k,
                known(self.trials, upto, self.settings.objective.value),
                maximize=self.maximize,
                startup=self.settings.startup_trials,
            )
            halving = self.settings.halving is not None and self.settings.replicates > 1
            first = 1 if halving else self.settings.replicates
            self.trials.append(Trial(k, params, first, decided=not halving))
            out += self._release(k, range(first))
        return out

    def _release(self, k: int, replicates: range) -> list[Release]:
        out: list[Release] = []
        n = self.settings.replicates
        for r in replicates:
            job = [*self.fixed, *overrides(self.dims, self.trials[k].params)]
            job.append(f"{self.replicate_key}={r}")
            self.jobs[tuple(job)] = (k, r)
            out.append((k * n + r, job))
        return out

    def _halve(self) -> list[Release]:
        """Halving decisions, in trial order, for trials whose first replicates (and those
        of every trial before them) are known."""
        out: list[Release] = []
        eta = self.settings.halving
        while eta is not None and self.decided < len(self.trials):
            trial = self.trials[self.decided]
            if trial.decided:
                self.decided += 1
                continue
            firsts = [t.values.get(0) for t in self.trials[: self.decided + 1]]
            if any(t.ended == 0 for t in self.trials[: self.decided + 1]):
                break
            trial.promoted = earns_replicates(firsts, eta, self.maximize)
            trial.decided = True
            if trial.promoted:
                trial.released = self.settings.replicates
                out += self._release(trial.number, range(1, self.settings.replicates))
            self.decided += 1
        return out

    # ------------------------------------------------------------ outcome

    def best(self) -> Trial | None:
        """The complete trial with the best objective (the first on a tie)."""
        kind = self.settings.objective.value
        scored: list[tuple[float, Trial]] = []
        for t in self.trials:
            value = t.objective(kind)
            if value is not None and t.status(self.settings.replicates) == "complete":
                scored.append((value if self.maximize else -value, t))
        if not scored:
            return None
        return max(scored, key=lambda vt: (vt[0], -vt[1].number))[1]

    def record(self) -> dict[str, Any]:
        s = self.settings
        kind = s.objective.value
        best = self.best()
        return {
            "format": FORMAT,
            "settings": {
                "trials": s.trials,
                "replicates": s.replicates,
                "sampler": s.sampler.value,
                "objective": kind,
                "direction": s.direction.value,
                "in_flight": s.in_flight,
                "startup_trials": s.startup_trials,
                "halving": s.halving,
            },
            "metric": self.metric,
            "root": self.root,
            "replicate_key": self.replicate_key,
            "space": [d.describe() for d in self.dims],
            "fixed_overrides": self.fixed,
            "trials": [t.to_json(kind, s.replicates) for t in self.trials],
            "best": None if best is None else best.number,
            "jobs_run": sum(t.released for t in self.trials),
        }


def table(record: dict[str, Any]) -> str:
    """The trials, one line each, and the best, as the end of a search prints them."""
    kind = record["settings"]["objective"]
    lines = [f"[rlsweep] search: {len(record['trials'])} trials ({kind} of {record['metric']})"]
    for t in record["trials"]:
        values = ", ".join("-" if v is None else f"{v:.4g}" for v in t["values"])
        objective = "-" if t["objective"] is None else f"{t['objective']:.4g}"
        params = " ".join(f"{k}={v}" for k, v in t["params"].items())
        mark = " <- best" if t["number"] == record["best"] else ""
        lines.append(  # the replicates' own values, labelled (not an interval)
            f"  #{t['number']:<3} {t['status']:<8} {objective:>10}  {params}  "
            f"replicates: [{values}]{mark}"
        )
    return "\n".join(lines)
