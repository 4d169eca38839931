"""The settings of a hyperparameter search (``hydra.sweeper.search``; the built-in app
aliases them as ``search.*``): ``search.trials=N`` trials, each run as ``replicates`` jobs
(identity seeds), its objective an aggregate over them. Off by default (the sweep is a
grid). Each value is checked, naming the key and what is allowed
(:class:`~rlsweep.errors.ConfigError`).

:func:`settings_of` checks the sweeper's two seed-aware modes together: this search and the
adaptive comparison (:mod:`rlsweep.compare.settings`), at most one of them on. Light: the
sweeper's plugin scan imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

from rlsweep.compare.settings import CompareSettings
from rlsweep.errors import ConfigError
from rlsweep.settings import Objective, at_least, settings_from


class Sampler(str, Enum):
    """How a search proposes trials."""

    # Independent draws from the space (no optional dependency).
    random = "random"
    # Optuna's tree-structured Parzen estimator (``pip install 'rlsweep[optuna]'``).
    tpe = "tpe"


class Direction(str, Enum):
    maximize = "maximize"
    minimize = "minimize"


@dataclass
class SearchSettings:
    # Trials of the search; null: no search (the sweep is a grid).
    trials: int | None = None
    # Replicates of every trial: jobs at replicate index 0..replicates-1 (identity seeds).
    replicates: int = 3
    # How trials are proposed: random, or tpe (Optuna's TPE; the optuna extra).
    sampler: Sampler = Sampler.random
    # The result (a number the task returns into result.json) the search optimises;
    # null: the app's main result (final_return for rlsweep's agents, else `return`).
    metric: str | None = None
    # The trial's number from its replicates' results: iqm, mean or lcb.
    objective: Objective = Objective.iqm
    # maximize or minimize the objective.
    direction: Direction = Direction.maximize
    # Trials run at once at most: trial k is proposed once trials 0..k-in_flight are
    # complete, from their results only, so that the search proposes the
    # same trials on any launcher, in any order of completion. More keeps more workers busy.
    in_flight: int = 4
    # Trials drawn at random before TPE models the results (sampler=tpe).
    startup_trials: int = 5
    # Successive halving over replicates: a trial runs 1 replicate first, and its other
    # replicates only if its first is in the best 1/halving of the trials proposed before
    # it (null: every trial runs all its replicates).
    halving: int | None = None

    def check(self) -> None:
        _check_enums(self, "search")
        at_least("search.trials", self.trials, 1)
        at_least("search.replicates", self.replicates, 1)
        at_least("search.in_flight", self.in_flight, 1)
        at_least("search.startup_trials", self.startup_trials, 1)
        at_least("search.halving", self.halving, 2)

    @property
    def on(self) -> bool:
        return self.trials is not None


def _check_enums(settings: Any, prefix: str) -> None:
    for f in fields(settings):
        value = getattr(settings, f.name)
        if isinstance(value, Enum):
            continue
        kinds: dict[str, type[Enum]] = {
            "sampler": Sampler,
            "objective": Objective,
            "direction": Direction,
        }
        kind = kinds.get(f.name)
        if kind is None:
            continue
        allowed = [str(m.value) for m in kind]
        if value not in allowed:
            raise ConfigError(
                f"{prefix}.{f.name}={value!r} is not allowed; choose one of {', '.join(allowed)}"
            )
        setattr(settings, f.name, kind(value))


def settings_of(search: Any, compare: Any) -> tuple[SearchSettings, CompareSettings]:
    """The sweeper's ``search`` and ``compare`` nodes (DictConfigs, dicts or None) as
    checked settings; at most one of the two modes on."""
    out = (
        settings_from(SearchSettings, search, "search"),
        settings_from(CompareSettings, compare, "compare"),
    )
    for s in out:
        s.check()
    if out[0].on and out[1].on:
        raise ConfigError(
            "search.trials and compare.rounds are both set: a sweep either searches or "
            "compares. Run the search, then compare its best configurations in a second sweep."
        )
    return out
