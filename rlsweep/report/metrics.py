"""Which metric a report is on, and why: a number the task returned, or a series it logged.

A job's value of a metric is the number it returned under that name, else the last value of
the series it logged under that name (:meth:`rlsweep.report.runs.Run.value`). ``--metric``
(``hydra.sweeper.metric`` at a sweep's end) names any of them; a name that no job has is
refused, listing what exists. Without one: ``return``, else the only number returned, else
the first in sorted order; when the task returns no number, a logged evaluation return or
reward, else the first logged series in sorted order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rlsweep.report.runs import Run

__all__ = ["BUILT_IN_METRIC", "Metric", "choose_metric", "curve_series", "metric_names"]

BUILT_IN_METRIC = "final_return"
# Logged series preferred as the default metric, best first: an evaluation's return or
# reward, then any return or reward.
_PREFERRED = (
    re.compile(r"(^|[/._ -])(eval|evaluation|test)([/._ -]|$).*(return|reward)", re.I),
    re.compile(r"(return|reward)", re.I),
)


@dataclass(frozen=True)
class Metric:
    """The metric chosen, why, and the names a report could be on instead."""

    name: str | None  # None: no job returned or logged a number
    reason: str
    returned: tuple[str, ...]  # names of the numbers completed jobs returned, sorted
    logged: tuple[str, ...]  # names of the series completed jobs logged, sorted

    @property
    def others(self) -> tuple[str, ...]:
        """Every other name the report could be on."""
        return tuple(n for n in sorted({*self.returned, *self.logged}) if n != self.name)


def metric_names(runs: Sequence[Run]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(returned, logged): the names of the numbers completed runs returned and of the
    series they logged, each sorted."""
    done = [r for r in runs if r.status == "completed"]
    returned = tuple(sorted({k for r in done for k in r.values}))
    logged = tuple(sorted({k for r in done for k in r.series}))
    return returned, logged


def _listed(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _refused(setting: str, returned: Sequence[str], logged: Sequence[str]) -> ValueError:
    parts = [
        f"returned: {', '.join(returned)}" if returned else "no number returned",
        f"logged: {', '.join(logged)}" if logged else "no series logged",
    ]
    return ValueError(
        f"{setting}: no job returned or logged a number by that name ({'; '.join(parts)})"
    )


def _from_series(logged: Sequence[str]) -> tuple[str, str]:
    for rank, pattern in enumerate(_PREFERRED):
        matching = [n for n in logged if pattern.search(n)]
        if matching:
            kind = "an evaluation's return or reward" if rank == 0 else "a return or reward"
            return matching[0], (
                f"the last value of the series the jobs logged ({kind}; no job returned a "
                f"number; logged: {_listed(logged)})"
            )
    return logged[0], (
        f"the last value of the first series the jobs logged, in sorted order (no job "
        f"returned a number; logged: {_listed(logged)})"
    )


def _default(returned: Sequence[str], logged: Sequence[str]) -> tuple[str | None, str]:
    if not returned:
        if logged:
            return _from_series(logged)
        return None, "no completed job returned or logged a number"
    if "return" in returned:
        more = f" (the numbers returned: {_listed(returned)})" if len(returned) > 1 else ""
        return "return", f"the number the task function returned{more}"
    if len(returned) == 1:
        return returned[0], "the only number the task function returned"
    return returned[0], (
        f"the first in sorted order of the numbers the task function returned: {_listed(returned)}"
    )


def choose_metric(
    runs: Sequence[Run],
    requested: str | None = None,
    *,
    built_in: bool = False,
    by: str = "--metric",
) -> Metric:
    """The metric of a report on ``runs``; ValueError for a ``requested`` name that no job
    returned or logged (rlsweep's own agents: any name but ``final_return``). ``by`` names
    the setting that requested it (``--metric``, ``hydra.sweeper.metric``)."""
    returned, logged = metric_names(runs)
    if built_in:
        if requested not in (None, BUILT_IN_METRIC):
            raise ValueError(
                f"{by} {requested}: the report of rlsweep's own agents is on their "
                f"{BUILT_IN_METRIC}"
            )
        return Metric(BUILT_IN_METRIC, "their final evaluation return", returned, logged)
    if requested is not None:
        if requested not in returned and requested not in logged:
            raise _refused(f"{by} {requested}", returned, logged)
        return Metric(requested, f"chosen with {by}", returned, logged)
    name, reason = _default(returned, logged)
    return Metric(name, reason, returned, logged)


def curve_series(metric: Metric) -> str | None:
    """The series the learning curves draw: the metric's, when the jobs logged it; else the
    one a report without a returned number would be on (a logged evaluation return or
    reward first); None when the jobs logged nothing."""
    if metric.name in metric.logged:
        return metric.name
    return _from_series(metric.logged)[0] if metric.logged else None
