"""The statistics: pure functions on arrays, shared by the report, the search and the
comparison. Numpy only: no module of this package imports any other part of rlsweep, so any
layer may use it.

- :mod:`rlsweep.stats.estimates`: point statistics (mean, IQM, optimality gap, P(X > Y),
  performance profiles).
- :mod:`rlsweep.stats.paired`: two samples pair by pair: differences, correlation, the
  Wilcoxon signed-rank test, Holm's correction.
- :mod:`rlsweep.stats.bootstrap`: their seeded percentile-bootstrap intervals.
- :mod:`rlsweep.stats.adastop`: AdaStop, the group-sequential permutation test deciding every
  pair of arms with as few seeds as it can.

``from rlsweep import stats`` names the point statistics and the paired tests
(``stats.iqm``, ``stats.holm``).
"""

from __future__ import annotations

from rlsweep.stats.estimates import (
    FloatArray,
    iqm,
    mean,
    median,
    normalize_scores,
    optimality_gap,
    performance_profile,
    probability_of_improvement,
    std,
)
from rlsweep.stats.paired import correlation, holm, paired_differences, wilcoxon_signed_rank

__all__ = [
    "FloatArray",
    "correlation",
    "holm",
    "iqm",
    "mean",
    "median",
    "normalize_scores",
    "optimality_gap",
    "paired_differences",
    "performance_profile",
    "probability_of_improvement",
    "std",
    "wilcoxon_signed_rank",
]
