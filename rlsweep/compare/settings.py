"""The settings of an adaptive comparison (``hydra.sweeper.compare``; the built-in app
aliases them as ``compare.*``): every grid point an arm, replicates run in rounds until
AdaStop decides every pair, at most ``rounds`` rounds. Off by default (the sweep is a
grid). Light: the sweeper's plugin scan imports it."""

from __future__ import annotations

from dataclasses import dataclass

from rlsweep.errors import ConfigError
from rlsweep.settings import at_least


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
        at_least("compare.rounds", self.rounds, 1)
        at_least("compare.per_round", self.per_round, 1)
        at_least("compare.permutations", self.permutations, 100)
        if not 0.0 < float(self.alpha) < 1.0:
            raise ConfigError(f"compare.alpha must be in (0, 1), got {self.alpha}")

    @property
    def on(self) -> bool:
        return self.rounds is not None
