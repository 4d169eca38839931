"""A job's number for a search or a comparison, and a trial's number from its replicates.

The number is a value the task returned into ``result.json`` (the public result API: what
an ``@rlsweep.task`` function returns), or, for a ``metric`` the job did not return, the
last value of the series it logged under that name (an app as it is, which returns nothing
and logs ``eval/reward`` with its own logger: :mod:`rlsweep.series`, as the report reads
it). Which one: ``metric`` if given; else ``final_return`` (rlsweep's agents); else
``return`` (a task that returns a plain number); else the only number returned. A job that
has none of them is refused by name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from hydra.core.utils import JobReturn
from omegaconf import DictConfig, OmegaConf

from rlsweep.errors import ConfigError
from rlsweep.launch.jobs import CompletedReturn, Returned
from rlsweep.results import result_values
from rlsweep.series import job_series
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


def job_numbers(ret: JobReturn, metric: str | None) -> dict[str, Any]:
    """What a search or comparison reads from a completed job: the values it returned, and,
    when ``metric`` is none of its numbers, the last value of each series it logged (a
    returned number wins over a logged one of the same name). The job's logs are read only
    then: a job that returns its metric costs no file read."""
    result = result_values(ret.return_value)
    if metric is None or metric in numbers(result):
        return result
    directory = job_directory(ret)
    if directory is None:
        return result
    logged = {name: series.last for name, series in job_series(directory).items()}
    return {**logged, **result}


def job_directory(ret: JobReturn) -> Path | None:
    """A job's output directory: rlsweep's launcher knows it (a job run now, or found
    complete); another launcher's JobReturn has it in its Hydra config (None: no config)."""
    if isinstance(ret, Returned | CompletedReturn):
        return ret.directory
    hydra_cfg = ret.hydra_cfg
    if not isinstance(hydra_cfg, DictConfig):
        return None
    output_dir = OmegaConf.select(hydra_cfg, "hydra.runtime.output_dir")
    return Path(output_dir) if output_dir else None


def metric_name(result: Mapping[str, Any], metric: str | None, key: str) -> str:
    """The name of the number a search or comparison reads from ``result`` (``key``: the
    setting that chooses it, for messages)."""
    names = numbers(result)
    if metric is not None:
        if metric not in names:
            raise ConfigError(
                f"{key}={metric}: the job returned no number and logged no series by that "
                f"name (its numbers: {', '.join(names) or 'none'}). Choose one of them."
            )
        return metric
    for name in DEFAULT_METRICS:
        if name in names:
            return name
    if len(names) == 1:
        return names[0]
    if not names:
        raise ConfigError(
            f"{key} is not set and the job returned no number: set {key}=<a number it "
            "returns, or the name of a series it logs (its last value is read)>."
        )
    raise ConfigError(
        f"{key} is not set and the job returned several numbers ({', '.join(names)}):"
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
