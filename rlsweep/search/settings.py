"""The settings of rlsweep's two seed-aware sweep modes, as the sweeper's config holds them
(``hydra.sweeper.search`` and ``hydra.sweeper.compare``; the built-in app aliases them as
``search.*`` and ``compare.*``).

- **search** (``search.trials=N``): a hyperparameter search, every trial run as
  ``replicates`` jobs (identity seeds), its objective an aggregate over them.
- **compare** (``compare.rounds=N``): every grid point an arm, replicates run in rounds
  until a sequential test decides every pair (AdaStop), at most ``rounds`` rounds.

Both are off by default (the sweep is a grid). Each checks its values and names the key and
what is allowed (:class:`~rlsweep.errors.ConfigError`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

from rlsweep.errors import ConfigError


class Sampler(str, Enum):
    """How a search proposes trials."""

    # Independent draws from the space (no optional dependency).
    random = "random"
    # Optuna's tree-structured Parzen estimator (``pip install 'rlsweep[optuna]'``).
    tpe = "tpe"


class Objective(str, Enum):
    """How a trial's replicates reduce to its one number."""

    # Interquartile mean (the mean of the middle half; the mean below 4 replicates).
    iqm = "iqm"
    mean = "mean"
    # Mean minus one standard error: prefers trials that are good on every seed.
    lcb = "lcb"


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
        _at_least("search.trials", self.trials, 1)
        _at_least("search.replicates", self.replicates, 1)
        _at_least("search.in_flight", self.in_flight, 1)
        _at_least("search.startup_trials", self.startup_trials, 1)
        _at_least("search.halving", self.halving, 2)

    @property
    def on(self) -> bool:
        return self.trials is not None


@dataclass
class CompareSettings:
    # Rounds of replicates at most; null: no comparison (the sweep is a grid).
    rounds: int | None = None
    # Replicates of every undecided arm per round.
    per_round: int = 4
    # Family-wise error level over all pairs of arms.
    alpha: float = 0.05
    # The result compared (as search.metric); null: the app's main result.
    metric: str | None = None
    # Random permutations per interim when there are more than this many to enumerate.
    permutations: int = 10_000

    def check(self) -> None:
        _at_least("compare.rounds", self.rounds, 1)
        _at_least("compare.per_round", self.per_round, 1)
        _at_least("compare.permutations", self.permutations, 100)
        if not 0.0 < float(self.alpha) < 1.0:
            raise ConfigError(f"compare.alpha must be in (0, 1), got {self.alpha}")

    @property
    def on(self) -> bool:
        return self.rounds is not None


def _at_least(key: str, value: Any, low: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{key} must be an integer >= {low} (or null), got {value!r}")


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


def plain_defaults(cls: type) -> dict[str, Any]:
    """A settings class's defaults as plain YAML values (the sweeper's config node)."""
    return {
        f.name: (v.value if isinstance(v, Enum) else v)
        for f in fields(cls)
        for v in [getattr(cls(), f.name)]
    }


def settings_of(search: Any, compare: Any) -> tuple[SearchSettings, CompareSettings]:
    """The sweeper's ``search`` and ``compare`` nodes (DictConfigs, dicts or None) as
    checked settings; at most one of the two modes on."""
    out = (_typed(SearchSettings, search, "search"), _typed(CompareSettings, compare, "compare"))
    for s in out:
        s.check()
    if out[0].on and out[1].on:
        raise ConfigError(
            "search.trials and compare.rounds are both set: a sweep either searches or "
            "compares. Run the search, then compare its best configurations in a second sweep."
        )
    return out


def _typed(cls: type, node: Any, prefix: str) -> Any:
    if isinstance(node, cls):
        return node
    if node is None:
        return cls()
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if not isinstance(plain, dict):
        raise ConfigError(f"{prefix} must hold settings, got {plain!r}")
    allowed = [f.name for f in fields(cls)]
    for key in plain:
        if key not in allowed:
            raise ConfigError(
                f"Unknown config key '{prefix}.{key!s}'. Allowed keys in {prefix}: "
                f"{', '.join(allowed)}"
            )
    return cls(**{str(k): (v.value if isinstance(v, Enum) else v) for k, v in plain.items()})
