"""A job's number for a search or a comparison, and a trial's number from its replicates.

The number is a value the task returned into ``result.json`` (the public result API: what
an ``@rlsweep.task`` function returns). Which one: ``metric`` if given; else
``final_return`` (rlsweep's agents); else ``return`` (a task that returns a plain number);
else the only number returned. A job whose result lacks it is refused by name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlsweep.errors import ConfigError
from rlsweep.stats import iqm, mean, std

# The main result of rlsweep's own agents, then of a task that returns a plain number.
DEFAULT_METRICS = ("final_return", "return")


def numbers(result: Mapping[str, Any]) -> list[str]:
    """The names of a result's finite numbers (booleans are not numbers)."""
    return sorted(
        str(k)
        for k, v in result.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    )


def metric_name(result: Mapping[str, Any], metric: str | None, key: str) -> str:
    """The name of the number a search or comparison reads from ``result`` (``key``: the
    setting that chooses it, for messages)."""
    names = numbers(result)
    if metric is not None:
        if metric not in names:
            raise ConfigError(
                f"{key}={metric}: the job's result.json has no number by that name (its "
                f"numbers: {', '.join(names) or 'none'}). Choose one of them."
            )
        return metric
    for name in DEFAULT_METRICS:
        if name in names:
            return name
    if len(names) == 1:
        return names[0]
    raise ConfigError(
        f"{key} is not set and the job returned several numbers ({', '.join(names) or 'none'}):"
        f" set {key}=<one of them>."
    )


def metric_value(result: Mapping[str, Any], metric: str | None, key: str) -> float:
    """The number a search or comparison reads from one job's ``result``."""
    return float(result[metric_name(result, metric, key)])


def aggregate(values: Sequence[float], objective: str) -> float:
    """A trial's number from its replicates: ``iqm`` (interquartile mean: the mean with
    int(n/4) values dropped at each end, so the mean below 4 replicates), ``mean``, or
    ``lcb`` (the mean minus one standard error; the mean of one replicate)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("a trial's number needs at least one replicate")
    if objective == "iqm":
        return iqm(x)
    if objective == "mean":
        return mean(x)
    if objective == "lcb":
        return mean(x) - (std(x) / math.sqrt(x.size) if x.size > 1 else 0.0)
    raise ValueError(f"unknown objective {objective!r}: iqm, mean or lcb")
