"""A search's space, read from the sweep's overrides (on the command line or in
``hydra.sweeper.params``), in Hydra's override grammar:

- ``key=interval(a,b)``: a float in [a, b]; log-uniform when ``0 < a`` and ``b / a >= 100``
  (a learning rate), else uniform; ``tag(log, interval(a,b))`` / ``tag(linear, ...)`` choose;
  ``tag(int, interval(a,b))``: an integer in [a, b] (``tag(int, log, ...)`` on a log scale);
- ``key=a,b,c``, ``key=choice(a,b,c)``, ``key=range(...)``: one of the values.

A proposed value is written back as an override: floats rounded to 4 significant digits, so
that a trial's job directory stays readable (and the same value is the same job).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hydra.core.override_parser.types import (
    ChoiceSweep,
    IntervalSweep,
    Override,
    RangeSweep,
)

from rlsweep.errors import ConfigError

# An interval this many times wider than its positive lower end is searched on a log scale.
LOG_SPAN = 100.0
SIGNIFICANT_DIGITS = 4
Value = float | int | str


@dataclass(frozen=True)
class Dimension:
    """One searched key: an interval (``low``, ``high``) or ``choices`` (override strings)."""

    key: str
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    integer: bool = False
    choices: tuple[str, ...] = ()

    @property
    def categorical(self) -> bool:
        return bool(self.choices)

    def describe(self) -> str:
        if self.categorical:
            return f"{self.key} in {{{', '.join(self.choices)}}}"
        kind = ("log-" if self.log else "") + ("uniform integer" if self.integer else "uniform")
        return f"{self.key} ~ {kind} on [{self.low:g}, {self.high:g}]"

    def from_unit(self, u: float) -> Value:
        """The value at ``u`` in [0, 1) of the dimension (uniform in its scale)."""
        if self.categorical:
            return self.choices[min(int(u * len(self.choices)), len(self.choices) - 1)]
        if self.log:
            x = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            x = self.low + u * (self.high - self.low)
        return self.snap(x)

    def snap(self, x: float) -> Value:
        """A proposed number as the search runs it: an integer, or 4 significant digits."""
        if self.integer:
            return int(min(max(round(x), math.ceil(self.low)), math.floor(self.high)))
        return min(max(float(f"{x:.{SIGNIFICANT_DIGITS}g}"), self.low), self.high)

    def override(self, value: Value) -> str:
        return f"{self.key}={value!r}" if isinstance(value, float) else f"{self.key}={value}"


def dimension(o: Override) -> Dimension:
    """One swept override as a dimension; a ConfigError for a sweep a search cannot use."""
    value = o.value()
    key = o.key_or_group
    if isinstance(value, IntervalSweep):
        assert value.start is not None and value.end is not None  # the grammar sets both
        low, high = float(value.start), float(value.end)
        tags = set(value.tags or ())
        unknown = tags - {"log", "linear", "int"}
        if unknown or {"log", "linear"} <= tags:
            raise ConfigError(
                f"{o.input_line}: an interval's tags are log or linear, and int; got "
                f"{', '.join(sorted(tags))}"
            )
        if not low < high:
            raise ConfigError(f"{o.input_line}: an interval needs its low end below its high end")
        log = "log" in tags or ("linear" not in tags and low > 0 and high / low >= LOG_SPAN)
        if log and low <= 0:
            raise ConfigError(f"{o.input_line}: a log-scale interval needs a positive low end")
        integer = "int" in tags
        if integer and math.floor(high) < math.ceil(low):
            raise ConfigError(f"{o.input_line}: the interval holds no integer")
        return Dimension(key, low, high, log, integer)
    if isinstance(value, ChoiceSweep | RangeSweep):
        choices = tuple(o.sweep_string_iterator())
        if len(set(choices)) != len(choices) or not choices:
            raise ConfigError(f"{o.input_line}: a searched choice lists distinct values")
        return Dimension(key, choices=choices)
    raise ConfigError(
        f"{o.input_line}: a search takes interval(a,b), a list of values or range(...) for a "
        "key, not a glob"
    )


def space(swept: Sequence[Override]) -> list[Dimension]:
    """The search's dimensions, in the order given; a ConfigError if there are none."""
    dims = [dimension(o) for o in swept]
    if not dims:
        raise ConfigError(
            "search.trials is set but nothing is swept: give the space on the command line, "
            "e.g. 'agent.learning_rate=interval(1e-4,1e-2)' or agent.n_steps=64,128,256"
        )
    return dims


def overrides(dims: Sequence[Dimension], params: Mapping[str, Value]) -> list[str]:
    """A trial's values as overrides, in the dimensions' order."""
    return [d.override(params[d.key]) for d in dims]
