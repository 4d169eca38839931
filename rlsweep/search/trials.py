"""A search's trials: their values, their replicates' results, their objective, and which
trials a proposal or a halving decision may use."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rlsweep.search.objective import aggregate
from rlsweep.search.samplers import Known
from rlsweep.search.space import Value


@dataclass
class Trial:
    """Trial ``number``: its values, and the results of the replicates it ran."""

    number: int
    params: dict[str, Value]
    # Replicates released so far (1 while halving has not decided, else all).
    released: int
    # Replicate index -> the job's number (its metric), or its error's first line.
    values: dict[int, float] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    # Halving: whether its first replicate earned the others (None: undecided, or no halving).
    promoted: bool | None = None
    # Whether it will release no more replicates (halving decides after the first).
    decided: bool = True

    @property
    def ended(self) -> int:
        return len(self.values) + len(self.errors)

    @property
    def complete(self) -> bool:
        """Every replicate it will run has ended (a trial halving stopped runs one)."""
        return self.decided and self.ended == self.released

    @property
    def failed(self) -> bool:
        return bool(self.errors)

    def objective(self, kind: str) -> float | None:
        """Its number (None while incomplete, or if a replicate failed)."""
        if not self.complete or self.failed:
            return None
        return aggregate([self.values[r] for r in sorted(self.values)], kind)

    def status(self, replicates: int) -> str:
        if self.failed:
            return "failed"
        if not self.complete:
            return "running"
        return "complete" if len(self.values) == replicates else "stopped"

    def to_json(self, kind: str, replicates: int) -> dict[str, Any]:
        return {
            "number": self.number,
            "params": self.params,
            "status": self.status(replicates),
            "objective": self.objective(kind),
            "values": [self.values.get(r) for r in range(self.released)],
            "errors": {str(r): e for r, e in sorted(self.errors.items())},
        }


def known(trials: list[Trial], upto: int, kind: str) -> list[Known]:
    """What trial ``upto - 1 + in_flight`` is proposed from: trials ``0 .. upto - 1`` with
    an objective (failed trials are left out)."""
    out = []
    for t in trials[:upto]:
        value = t.objective(kind)
        if value is not None and math.isfinite(value):
            out.append(Known(t.params, value))
    return out


def earns_replicates(firsts: list[float | None], eta: int, maximize: bool) -> bool:
    """Successive halving: whether the last of ``firsts`` (the first replicates' numbers
    of trials 0..k, None for a failed one) is in the best ``ceil((k + 1) / eta)`` of them."""
    mine = firsts[-1]
    if mine is None:
        return False
    keep = math.ceil(len(firsts) / eta)
    better = sum(1 for x in firsts[:-1] if x is not None and (x > mine if maximize else x < mine))
    return better < keep
