"""An adaptive comparison as a sweep's driver (:class:`rlsweep.sweep.drive.Driver`): the
arms are the grid points of the swept keys; round r runs replicates
``r*per_round .. (r+1)*per_round-1`` of every arm AdaStop has not finished with; once every
job of the round has ended, their results (in replicate order) are the round's interim
analysis; the next round runs, or the comparison ends (every pair decided, or ``rounds``
rounds run).

What it decides is a function of the jobs' results alone, never of the order they finish in:
the same on any launcher and after a resume (the sweep skips the jobs a killed run completed
and gives their results back, round by round). A failed job stops the comparison: no decision
is drawn from part of a round, and the sweep exits non-zero naming the job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.override_parser.types import Override
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig

from rlsweep.compare.arms import Arms, arms_of
from rlsweep.compare.record import Outcome, say, write_outcome
from rlsweep.compare.settings import CompareSettings
from rlsweep.launch.jobs import error_line
from rlsweep.search.objective import job_numbers, metric_name, metric_value
from rlsweep.stats.adastop import AdaStop, AdaStopConfig
from rlsweep.sweep.drive import Release
from rlsweep.task_api import TaskHooks

# The seed of AdaStop's random permutations (when there are too many to enumerate): fixed,
# so that the same results give the same decisions.
PERMUTATION_SEED = 0
METRIC_KEY = "compare.metric"

# A job of the comparison: (arm number, replicate index).
Slot = tuple[int, int]


@dataclass
class AdaptiveComparison:
    """The comparison's state: the jobs released, the results so far, AdaStop's test."""

    settings: CompareSettings
    arms: Arms
    replicate_key: str
    test: AdaStop
    metric: str | None = None
    # Every released job by its overrides, and the jobs of the round under way.
    jobs: dict[tuple[str, ...], Slot] = field(default_factory=dict)
    pending: set[Slot] = field(default_factory=set)
    results: dict[Slot, dict[str, Any]] = field(default_factory=dict)
    scores: dict[Slot, float] = field(default_factory=dict)
    # Failed jobs: their overrides and first error line.
    failed: list[tuple[list[str], str]] = field(default_factory=list)

    @classmethod
    def create(
        cls,
        settings: CompareSettings,
        overrides: Sequence[Override],
        config: DictConfig,
        hooks: TaskHooks,
    ) -> AdaptiveComparison:
        """The comparison a sweep's overrides ask for (a ConfigError names what is wrong)."""
        if settings.rounds is None:
            raise ValueError("AdaptiveComparison.create needs compare.rounds")
        key = hooks.replicate_key("compare.rounds")
        arms = arms_of(overrides, config, key)
        adastop = AdaStopConfig(
            agents=tuple(a.name for a in arms.arms),
            n_per_round=settings.per_round,
            max_rounds=settings.rounds,
            alpha=float(settings.alpha),
            n_permutations=settings.permutations,
            seed=PERMUTATION_SEED,
        )
        return cls(settings, arms, key, AdaStop(adastop))

    @property
    def max_replicates(self) -> int:
        return self.settings.per_round * self.test.config.max_rounds

    def start(self) -> list[Release]:
        return self._release()

    def done(self, ret: JobReturn) -> list[Release]:
        slot = self.jobs.get(tuple(ret.overrides or ()))
        if slot is None or slot not in self.pending:
            raise RuntimeError(f"compare: a result for a job it did not start: {ret.overrides}")
        self.pending.discard(slot)
        if ret.status == JobStatus.COMPLETED:
            self.results[slot] = job_numbers(ret, self.settings.metric)
        else:
            self.failed.append((list(ret.overrides or ()), error_line(ret) or "failed"))
        if self.pending or self.failed:
            return []
        self._analyse()
        return [] if self.test.done else self._release()

    def finish(self, sweep_dir: Path) -> None:
        outcome = Outcome.of(
            self.test,
            self.arms,
            self.scores,
            metric=self.metric,
            replicate_key=self.replicate_key,
            failed=self.failed,
            jobs_not_run=len(self.pending),
        )
        write_outcome(sweep_dir, outcome)
        say(outcome, sweep_dir)

    def _release(self) -> list[Release]:
        """The next round's jobs: its replicates of every arm still active, numbered by
        arm and replicate (arm a's replicate r is job a * max_replicates + r)."""
        names = [a.name for a in self.arms.arms]
        first = self.test.round * self.settings.per_round
        releases: list[Release] = []
        for arm in (names.index(n) for n in self.test.active_agents):
            for replicate in range(first, first + self.settings.per_round):
                overrides = self.arms.job(arm, self.replicate_key, replicate)
                self.jobs[tuple(overrides)] = (arm, replicate)
                self.pending.add((arm, replicate))
                releases.append((arm * self.max_replicates + replicate, overrides))
        return sorted(releases)

    def _analyse(self) -> None:
        """The round's interim analysis: every active arm's scores, in replicate order."""
        first = self.test.round * self.settings.per_round
        replicates = range(first, first + self.settings.per_round)
        names = [a.name for a in self.arms.arms]
        slots = {n: [(names.index(n), r) for r in replicates] for n in self.test.active_agents}
        if self.metric is None:  # read from arm 0, replicate 0: not from whichever ended first
            first_slot = min(s for row in slots.values() for s in row)
            self.metric = metric_name(self.results[first_slot], self.settings.metric, METRIC_KEY)
        for slot in (s for row in slots.values() for s in row):
            self.scores[slot] = metric_value(self.results.pop(slot), self.metric, METRIC_KEY)
        self.test.update({n: [self.scores[s] for s in row] for n, row in slots.items()})
