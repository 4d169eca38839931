"""Which metric a report is on, and why: a number the task returned, or a series it logged.

A job's value of a metric is the number it returned under that name, else the last value of
the series it logged under that name (:meth:`rlsweep.report.runs.Run.value`). ``--metric``
(``hydra.sweeper.metric`` at a sweep's end) names any of them; a name that no job has is
refused, listing what exists. Without one: ``return``, else the only number returned, else
the first in sorted order.

When the task returns no number, the default is the logged series that the *default rule*
ranks first (:func:`ranked_series`: a pure function of the names, ties broken by sorted
order). A name is read as words (split at ``/``, ``_``, ``.``, ``-``, spaces, digits and
camelCase: ``eval/agent_0/reward/episode_reward_max`` is eval, agent, 0, reward, episode,
reward, max; ``AverageTestEpRet`` is average, test, ep, ret), and ranked by these criteria,
each deciding only between names alike in the ones before it:

1. a return or reward over anything else (losses, lengths, timings, rates, counters): a
   name with ``return``, ``reward``, ``rew`` or ``ret`` in it, unless it names a loss or
   error (``reward_loss``) or, after its last such word, a length or a time
   (``eval/reward/episode_len_mean``);
2. an evaluation over training: ``eval``, ``evaluation``, ``test``, ``val``, ``validation``;
3. an episode's return or reward over a per-step one: ``episode``, ``episodic``, ``ep``, or
   a return;
4. a mean (``mean``, ``avg``, ``average``) over no reduction named, over any other
   reduction (``max``, ``min``, ``std``, ``var``, ``median``, ``sum``, ``count``, ``best``);
5. all agents over a group of agents over one agent: a name with ``agent``, ``agents``,
   ``player`` or ``adversary`` is of a group, of one agent when a number follows
   (``agent_0``); a name with none of them is of all agents.

So TorchRL's examples are reported on ``eval/reward``; a multi-agent benchmark (BenchMARL)
on its evaluation's global ``eval/reward/episode_reward_mean`` (``eval_reward_...`` as it
writes it to CSV and TensorBoard), else its agents' ``eval/agents/reward/episode_reward_mean``;
Stable-Baselines3 on ``eval/mean_reward`` (its ``EvalCallback``), else
``rollout/ep_rew_mean``; CleanRL on ``eval/episodic_return``, else
``charts/episodic_return``; Lightning on ``val_reward`` or ``val/reward`` over
``train_reward``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from rlsweep.report.runs import Run

__all__ = [
    "BUILT_IN_METRIC",
    "Metric",
    "SeriesRank",
    "choose_metric",
    "curve_series",
    "metric_lines",
    "metric_names",
    "metric_words",
    "other_names_note",
    "ranked_series",
    "series_rank",
]

BUILT_IN_METRIC = "final_return"
# The words of a name: runs of capitals (SPS), capitalised or lower-case words, numbers.
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_RETURN = frozenset({"return", "returns", "ret", "reward", "rewards", "rew", "rews"})
_LOSS = frozenset({"loss", "losses", "error", "errors", "mse", "mae"})
# Said after a return or reward, a quantity of it that is not one (its episode's length).
_AFTER_A_RETURN = frozenset({"len", "length", "lengths", "time", "fps", "sps", "speed"})
_EVALUATION = frozenset(
    {"eval", "evaluation", "evaluate", "test", "testing", "val", "validation", "valid"}
)
_EPISODE = frozenset({"episode", "episodes", "episodic", "ep", "return", "returns", "ret"})
_MEAN = frozenset({"mean", "avg", "average"})
_REDUCTION = frozenset(
    {
        "max",
        "maximum",
        "min",
        "minimum",
        "std",
        "stddev",
        "var",
        "variance",
        "median",
        "sum",
        "count",
        "best",
        "worst",
    }
)
_AGENTS = frozenset({"agent", "agents", "player", "players", "adversary", "adversaries"})
_SCOPES = ("of one agent", "of a group of agents", "of all agents")


class SeriesRank(NamedTuple):
    """Where a logged name stands by the default rule (the module docstring): compared field
    by field, higher first."""

    reward: bool  # a return or reward, not a loss, length or time
    evaluation: bool  # of an evaluation
    episode: bool  # a return or reward of an episode, not of a step
    reduction: int  # 2: a mean, 1: no reduction named, 0: another (max, min, std, ...)
    scope: int  # 2: of all agents (none named), 1: of a group of agents, 0: of one agent


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORDS.findall(name)]


def _is_reward(words: Sequence[str]) -> bool:
    last = max((i for i, w in enumerate(words) if w in _RETURN), default=None)
    if last is None or any(w in _LOSS for w in words):
        return False
    return not any(w in _AFTER_A_RETURN for w in words[last + 1 :])


def _scope(words: Sequence[str]) -> int:
    scopes = [
        0 if i + 1 < len(words) and words[i + 1].isdigit() else 1
        for i, w in enumerate(words)
        if w in _AGENTS
    ]
    return min(scopes, default=2)


def series_rank(name: str) -> SeriesRank:
    """``name``'s rank by the default rule (the module docstring)."""
    words = _words(name)
    reward = _is_reward(words)
    reduction = 0 if _REDUCTION.intersection(words) else 2 if _MEAN.intersection(words) else 1
    return SeriesRank(
        reward=reward,
        evaluation=bool(_EVALUATION.intersection(words)),
        episode=reward and bool(_EPISODE.intersection(words)),
        reduction=reduction,
        scope=_scope(words),
    )


def ranked_series(names: Sequence[str]) -> list[str]:
    """``names`` best first by the default rule (ties in sorted order): the first is the
    metric of a report on jobs that returned no number and logged these series."""
    return sorted(names, key=lambda n: (tuple(-int(x) for x in series_rank(n)), n))


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


def other_names_note(metric: Metric, where: str) -> str:
    """How many other names the report could be on, and ``where`` they are listed
    (``"; 35 other names the jobs returned or logged, listed in report.md"``); empty when
    there is none."""
    n = len(metric.others)
    if not n:
        return ""
    return f"; {n} other name{'' if n == 1 else 's'} the jobs returned or logged, listed {where}"


def metric_lines(metric: Metric, sweep_dir: Path) -> str:
    """The lines the end of a sweep prints on its metric: which, why, how many other names
    there are, and how to choose another."""
    text = f"Metric: {metric.name}, {metric.reason}{other_names_note(metric, 'in report.md')}\n"
    if metric.others:
        text += (
            f"  another: python -m rlsweep.report {sweep_dir} --metric NAME "
            "(or hydra.sweeper.metric=NAME when sweeping)\n"
        )
    return text


def metric_words(metric: Metric, completed: int, report_name: str) -> str:
    """summary.md's words on what the groups' table is of (``completed`` jobs), or why there
    is none; ``report_name`` the report it links to."""
    if metric.name is None:
        return (
            f"{completed} completed, returned nothing: no job returned a number or logged a "
            'series (return a number, e.g. `return {"score": score}`, or log one per step with '
            f"`rlsweep.current().log(step, score=score)`). Report: [{report_name}]({report_name})."
        )
    return (
        f"Per group, `{metric.name}` over replicates ({metric.reason}"
        f"{other_names_note(metric, f'in {report_name}')}); the 95% CI is a percentile "
        f"bootstrap of the IQM. Statistics, comparisons and plots: [{report_name}]({report_name})."
    )


def _refused(setting: str, returned: Sequence[str], logged: Sequence[str]) -> ValueError:
    parts = [
        f"returned: {', '.join(returned)}" if returned else "no number returned",
        f"logged: {', '.join(logged)}" if logged else "no series logged",
    ]
    return ValueError(
        f"{setting}: no job returned or logged a number by that name ({'; '.join(parts)})"
    )


def _traits(name: str, logged: Sequence[str]) -> str:
    """What the default rule saw in ``name``, criterion by criterion (each is true of every
    name ranked alike in the criteria before it)."""
    rank = series_rank(name)
    noun = "return or reward" if rank.reward else "series"
    parts = ["a return or reward" if rank.reward else "no return or reward logged"]
    parts.append("of an evaluation" if rank.evaluation else f"no evaluation {noun} logged")
    if rank.episode:
        parts.append("of an episode")
    if rank.reduction == 2:
        parts.append("a mean")
    elif rank.reduction == 0:
        parts.append(f"a {next(w for w in _words(name) if w in _REDUCTION)}")
    if any(series_rank(n).scope < 2 for n in logged):
        parts.append(_SCOPES[rank.scope])
    alike = sum(series_rank(n) == rank for n in logged)
    if alike > 1:
        parts.append(f"the first in sorted order of {alike} alike")
    return ", ".join(parts)


def _from_series(logged: Sequence[str]) -> tuple[str, str]:
    name = ranked_series(logged)[0]
    return name, (
        "the last value of a series the jobs logged, ranked first by the default rule for a "
        f"task that returns no number: {_traits(name, logged)}"
    )


def _default(returned: Sequence[str], logged: Sequence[str]) -> tuple[str | None, str]:
    if not returned:
        if logged:
            return _from_series(logged)
        return None, "no completed job returned or logged a number"
    if "return" in returned:
        return "return", "the number the task function returned as `return`"
    if len(returned) == 1:
        return returned[0], "the only number the task function returned"
    return returned[0], (
        f"the first in sorted order of the {len(returned)} numbers the task function returned"
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
    one a report without a returned number would be on (the default rule's first); None
    when the jobs logged nothing."""
    if metric.name in metric.logged:
        return metric.name
    return ranked_series(metric.logged)[0] if metric.logged else None
