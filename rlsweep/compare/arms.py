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
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf

from rlsweep.errors import ConfigError

# ``${key}`` in a config string: the keys it reads.
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.]*)\}")


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


def sweeper_keys(config: DictConfig) -> set[str]:
    """The app's keys that ``hydra.sweeper`` interpolates (``compare``, ``search``,
    ``rerun`` for the built-in app): settings of the sweep, not of a job."""
    node = OmegaConf.select(config, "hydra.sweeper")
    if node is None:
        return set()
    text = json.dumps(OmegaConf.to_container(node, resolve=False), default=str)
    return {k.split(".")[0] for k in _INTERPOLATION.findall(text) if not k.startswith("hydra.")}


def arms_of(overrides: Sequence[Override], config: DictConfig, replicate_key: str) -> Arms:
    """The arms of the sweep ``overrides``; a ConfigError for a replicate key set on the
    command line, a sweep that is not a list of values, fewer than two arms, or an arm
    given twice."""
    dropped = sweeper_keys(config)
    fixed: dict[str, str] = {}  # key -> its override, for every job
    swept: dict[str, list[tuple[str, str]]] = {}  # key -> its (name, override) choices
    for o in overrides:
        key = o.key_or_group
        if key.split(".")[0] in dropped:
            continue
        if key == replicate_key:
            raise ConfigError(_replicate_message(o, replicate_key))
        element = o.get_key_element()
        swept.pop(element, None)
        fixed.pop(element, None)
        if not o.is_sweep_override():
            fixed[element] = f"{element}={o.get_value_element_as_str()}"
        elif o.is_discrete_sweep():
            swept[element] = [(f"{key}={v}", f"{element}={v}") for v in o.sweep_string_iterator()]
        else:
            raise ConfigError(
                f"compare: '{o.input_line}' sweeps '{key}' over a range of values; a "
                f"comparison's arms are a list of values, e.g. '{key}=a,b'."
            )
    arms = tuple(_arm(point) for point in itertools.product(*swept.values()))
    _check(arms, list(swept))
    return Arms(arms, tuple(fixed.values()))


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


def _replicate_message(o: Override, key: str) -> str:
    return (
        f"compare: '{o.input_line}' sets the replicate key '{key}', which a comparison "
        f"chooses itself: round r runs replicates r*per_round..(r+1)*per_round-1 of every "
        f"undecided arm. Leave '{key}' out and set compare.rounds (at most that many rounds) "
        "and compare.per_round (replicates per round) instead."
    )
