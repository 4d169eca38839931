"""The arms of a comparison, from the sweep's overrides: every point of the grid of the swept
keys is an arm (the cartesian product, in the order Hydra's basic sweeper gives), every other
override goes to every job, and the replicate key is the comparison's to choose.

Overrides of what the sweeper reads through the app's aliases (``compare.rounds=4`` when the
app's ``hydra.sweeper.compare`` is ``${compare}``) are left out of the jobs' overrides: a
comparison's job is then the same job (directory, identity, result) as in a plain grid, and a
comparison and a grid in the same sweep directory share their jobs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from hydra.core.override_parser.types import Override
from omegaconf import DictConfig

from rlsweep.errors import ConfigError
from rlsweep.sweep.drive import split_overrides


@dataclass(frozen=True)
class Arm:
    """One grid point: its name (``agent=ppo``, several keys joined by ``,``) and its
    overrides, as a job of Hydra's basic sweeper would have them."""

    name: str
    overrides: tuple[str, ...]


@dataclass(frozen=True)
class Arms:
    """The arms, and the overrides every job gets (before its arm's and its replicate's)."""

    arms: tuple[Arm, ...]
    fixed: tuple[str, ...]

    def job(self, arm: int, replicate_key: str, replicate: int) -> list[str]:
        """The overrides of replicate ``replicate`` of arm number ``arm``."""
        return [*self.fixed, *self.arms[arm].overrides, f"{replicate_key}={replicate}"]


def arms_of(overrides: Sequence[Override], config: DictConfig, replicate_key: str) -> Arms:
    """The arms of the sweep ``overrides``; a ConfigError for a replicate key set on the
    command line, a sweep that is not a list of values, fewer than two arms, or an arm
    given twice."""
    fixed, sweeps = split_overrides(overrides, config, replicate_key, _CHOOSES)
    swept: dict[str, list[tuple[str, str]]] = {}  # key -> its (name, override) choices
    for o in sweeps:
        key, element = o.key_or_group, o.get_key_element()
        if not o.is_discrete_sweep():
            raise ConfigError(
                f"compare: '{o.input_line}' sweeps '{key}' over a range of values; a "
                f"comparison's arms are a list of values, e.g. '{key}=a,b'."
            )
        swept[element] = [(f"{key}={v}", f"{element}={v}") for v in o.sweep_string_iterator()]
    arms = tuple(_arm(point) for point in itertools.product(*swept.values()))
    _check(arms, list(swept))
    return Arms(arms, tuple(fixed))


def _arm(point: Sequence[tuple[str, str]]) -> Arm:
    return Arm(",".join(name for name, _ in point if name), tuple(o for _, o in point))


def _check(arms: Sequence[Arm], swept: Sequence[str]) -> None:
    if len(arms) < 2 or not swept:
        raise ConfigError(
            "compare.rounds is set but the sweep has "
            f"{'one arm' if not swept else f'{len(arms)} arm'}: a comparison's arms are the "
            "points of the grid of the swept keys; sweep at least one key over two or more "
            "values, e.g. agent=ppo,a2c."
        )
    names = [a.name for a in arms]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(
            f"compare: the arm {repeated[0]} is given more than once; list every value of "
            f"{', '.join(swept)} once."
        )


# How a comparison chooses its replicates, for the refusal of a replicate key given.
_CHOOSES = (
    "a comparison chooses itself: round r runs replicates r*per_round..(r+1)*per_round-1 of "
    "every undecided arm (set compare.rounds, at most that many rounds, and "
    "compare.per_round, replicates per round, instead)"
)
