"""Paired comparisons: A − B on each task, pairing runs that saw the same environment seeds.

Under common random numbers (the default seeding), replicate r of group A and replicate r of
group B saw the same environment seeds: the paired difference removes the seeds' luck. Paired
rows get the bootstrap CI of the mean paired difference, the Wilcoxon signed-rank p-value
Holm-adjusted over the family, and the pairing correlation; unpaired rows fall back to
independent bootstrap CIs. Pure functions of the runs table, seeded as
:func:`rlsweep.report.analysis.statistic_rng`; the groups compared on each task are those
:func:`rlsweep.report.ranking.compared` chooses.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rlsweep import stats
from rlsweep.report.analysis import BOOTSTRAP_REPS, CONFIDENCE, statistic_rng
from rlsweep.report.runs import Run, by_cell, groups_of, run_order, tasks_of, values_of
from rlsweep.stats.bootstrap import paired_bootstrap_ci, unpaired_bootstrap_ci

__all__ = ["Comparison", "match_pairs", "paired_comparisons", "shared_seeds"]


def match_pairs(a_runs: Sequence[Run], b_runs: Sequence[Run]) -> tuple[list[tuple[Run, Run]], str]:
    """Pairs (replicate r of A, replicate r of B) that saw the same environment seeds.

    Two runs pair when both seeds.json say ``common_random_numbers: true`` and their root and
    replicate match. Returns the pairs in (root, replicate) order and, when there are none,
    why.
    """

    def keyed(runs: Sequence[Run]) -> dict[tuple[int, int], Run]:
        out: dict[tuple[int, int], Run] = {}
        for r in sorted(runs, key=run_order):
            if r.common_random_numbers and r.root is not None and r.replicate is not None:
                out.setdefault((r.root, r.replicate), r)
        return out

    ka, kb = keyed(a_runs), keyed(b_runs)
    pairs = [(ka[k], kb[k]) for k in sorted(ka.keys() & kb.keys())]
    if pairs:
        return pairs, ""
    every = [*a_runs, *b_runs]
    if all(r.common_random_numbers is None for r in every):
        return [], "no seeds.json"
    if not ka or not kb:
        return [], "common random numbers off (seeding.common_random_numbers: false)"
    if not {k[0] for k in ka} & {k[0] for k in kb}:
        return [], "different seeding roots"
    return [], "no replicate index in common"


@dataclass(frozen=True)
class Comparison:
    """The metric of group A minus group B on one task."""

    task: str  # the env (any app: its metric)
    a: str
    b: str
    paired: bool
    n_a: int
    n_b: int
    n_pairs: int
    difference: float  # mean(A) - mean(B), over the pairs when paired
    low: float
    high: float
    correlation: float  # Pearson r of the pairs (NaN when unpaired or undefined)
    p_value: float  # Wilcoxon signed-rank, two-sided (NaN when unpaired)
    p_holm: float  # Holm-adjusted over every paired test of the report
    note: str


def _compare(
    task: str, pair: tuple[str, str], runs: tuple[Sequence[Run], Sequence[Run]], metric: str,
    seed: int, reps: int,
) -> Comparison:  # fmt: skip
    (a, b), (a_runs, b_runs) = pair, runs
    pairs, reason = match_pairs(a_runs, b_runs)
    rng = statistic_rng(seed, "paired", task, a, b)
    nan = math.nan
    if len(pairs) >= 2:
        xa = values_of((p for p, _ in pairs), metric)
        xb = values_of((q for _, q in pairs), metric)
        point, low, high = paired_bootstrap_ci(
            xa, xb, stats.mean, reps=reps, confidence=CONFIDENCE, seed=rng
        )
        unmatched = len(a_runs) + len(b_runs) - 2 * len(pairs)
        note = f"{unmatched} run(s) without a partner left out" if unmatched else ""
        p = stats.wilcoxon_signed_rank(stats.paired_differences(xa, xb))
        r = stats.correlation(xa, xb)
        return Comparison(
            task, a, b, True, len(a_runs), len(b_runs), len(pairs), point, low, high, r, p, p, note
        )
    if len(pairs) == 1:
        reason = "only one pair"
    xa, xb = values_of(a_runs, metric), values_of(b_runs, metric)
    if min(xa.size, xb.size) >= 2:
        point, low, high = unpaired_bootstrap_ci(
            xa, xb, stats.mean, reps=reps, confidence=CONFIDENCE, seed=rng
        )
    else:
        point, low, high = stats.mean(xa) - stats.mean(xb), nan, nan
    return Comparison(
        task, a, b, False, xa.size, xb.size, 0, point, low, high, nan, nan, nan, reason
    )


def paired_comparisons(
    runs: Sequence[Run],
    metric: str | None,
    compared: Mapping[str, Sequence[str]] | None = None,
    *,
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
) -> list[Comparison]:
    """A - B for every pair of the groups ``compared[task]`` (default: every group; A before
    B in the report's group order) on every task both completed with a value.

    Paired (bootstrap CI of the mean paired difference, Wilcoxon signed-rank p-value, pairing
    correlation) when at least two pairs match (:func:`match_pairs`), otherwise an unpaired
    bootstrap CI of the difference of means. The p-values are Holm-adjusted over every paired
    test in the list (the family). A task of one (any app's, ``""``) is named by the metric.
    """
    if metric is None:
        return []
    done = [r for r in runs if r.status == "completed" and r.value(metric) is not None]
    cells, everyone = by_cell(done), groups_of(runs)
    out: list[Comparison] = []
    for task in tasks_of(runs):
        chosen = set(everyone if compared is None else compared.get(task, ()))
        groups = [g for g in everyone if g in chosen]
        for i, a in enumerate(groups):
            for b in groups[i + 1 :]:
                a_runs, b_runs = cells.get((a, task), []), cells.get((b, task), [])
                if a_runs and b_runs:
                    pair = (a_runs, b_runs)
                    out.append(_compare(task or metric, (a, b), pair, metric, seed, reps))
    tested = [i for i, c in enumerate(out) if c.paired]
    adjusted = stats.holm([out[i].p_value for i in tested])
    for i, p in zip(tested, adjusted, strict=True):
        out[i] = dataclasses.replace(out[i], p_holm=float(p))
    return out


def shared_seeds(comparison: Comparison, runs: Sequence[Run], task: str = "") -> str:
    """Whether a comparison's paired runs drew the same shared seeds (common random numbers):
    ``shared``, ``independent``, ``mixed``, or ``–`` when unpaired."""
    if not comparison.paired:
        return "–"
    cells = by_cell(r for r in runs if r.status == "completed")
    a_runs = cells.get((comparison.a, task), [])
    b_runs = cells.get((comparison.b, task), [])
    pairs, _ = match_pairs(a_runs, b_runs)
    same = {p.shared == q.shared for p, q in pairs}
    return "shared" if same == {True} else "independent" if same == {False} else "mixed"
