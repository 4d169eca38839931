"""AdaStop: compare agents with as few seeds as the data allow, with family-wise error control.

AdaStop (Mathieu, Della Vecchia, Shilova, Centa de Medeiros, Kohler, Maillard, Preux:
"AdaStop: adaptive statistical testing for sound comparisons of deep RL agents",
arXiv:2306.10882; reference implementation: the ``adastop`` package) is a group-sequential
permutation test. Scores arrive in rounds of ``n_per_round`` per active agent, at most
``max_rounds`` rounds. After each round (an *interim*) every undecided pair ``(a, b)`` has the
statistic ``T = sum(scores of a) - sum(scores of b)`` over all rounds so far, and:

- its permutation distribution permutes the ``2 n`` scores of a and b *within each round*
  (the same permutation sequence for every pair, so the maximum over pairs keeps their
  dependence): every sequence while there are at most ``n_permutations`` of them that no
  earlier interim rejected, else ``n_permutations`` uniform random ones (the first is always
  the identity, so a Monte Carlo test stays valid);
- the boundary of interim k is the smallest value ``b`` with
  ``spent + P(max |T_perm| > b, no earlier rejection) <= alpha * k / max_rounds`` (linear alpha
  spending across interims, the probability over the permutation sequences, those an earlier
  boundary rejected counting as rejected: the group-sequential boundaries of the paper);
- step-down across pairs: while the largest ``|T|`` of the undecided pairs exceeds the
  boundary of the maximum over those pairs, that pair is decided (``"larger"``: its first
  agent scores higher, ``"smaller"``) and the boundary is computed again without it;
- at the last interim every pair still undecided is ``"equal"`` (no difference shown at
  level ``alpha``).

:class:`AdaStop` is the state machine a sweeper drives round by round (:meth:`AdaStop.update`
with the scores of :attr:`AdaStop.active_agents`); :func:`run_adastop` drives it from a
sampling function. Every permutation is drawn from a :class:`numpy.random.Generator` seeded
by ``AdaStopConfig.seed``: the same scores, in the same order within each round, give the
same decisions, so a killed comparison resumes by replaying its recorded rounds into a fresh
:class:`AdaStop`. Pure numpy.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "AdaStop",
    "AdaStopConfig",
    "AdaStopResult",
    "Decision",
    "Interim",
    "Pair",
    "boundary",
    "run_adastop",
]

Decision = Literal["larger", "smaller", "equal", "undecided"]
Pair = tuple[str, str]
FloatArray = npt.NDArray[np.float64]
SignArray = npt.NDArray[np.int8]

# Slack on comparisons of probabilities against the level (sums of floats like 0.05 * k / K).
_LEVEL_TOLERANCE = 1e-12
# Relative gap below which two permutation statistics are the same value (rounding).
_TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class AdaStopConfig:
    """An AdaStop comparison: which agents and pairs, the rounds, the level, the permutations.

    ``comparisons`` defaults to every pair ``(agents[i], agents[j])``, ``i < j``. A fixed-N
    design at the maximum would run ``n_per_round * max_rounds`` seeds of every agent.
    """

    agents: tuple[str, ...]
    n_per_round: int = 5
    max_rounds: int = 5
    alpha: float = 0.05
    comparisons: tuple[Pair, ...] = ()
    n_permutations: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        agents = tuple(self.agents)
        object.__setattr__(self, "agents", agents)
        if len(agents) < 2 or len(set(agents)) != len(agents):
            raise ValueError(f"agents must be two or more distinct names, got {agents}")
        pairs = tuple(tuple(c) for c in self.comparisons) or tuple(
            itertools.combinations(agents, 2)
        )
        object.__setattr__(self, "comparisons", pairs)
        for a, b in pairs:
            if a == b or a not in agents or b not in agents:
                raise ValueError(f"comparison {(a, b)} must pair two distinct known agents")
        if len(set(pairs)) != len(pairs):
            raise ValueError(f"comparisons repeat a pair: {pairs}")
        if self.n_per_round < 1 or self.max_rounds < 1 or self.n_permutations < 2:
            raise ValueError("n_per_round and max_rounds must be >= 1, n_permutations >= 2")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")

    @property
    def fixed_n_seeds(self) -> int:
        """Seeds a fixed-N design at the maximum runs per agent."""
        return self.n_per_round * self.max_rounds

    @property
    def fixed_n_total(self) -> int:
        """Seeds a fixed-N design at the maximum runs in all (every agent of a comparison)."""
        return self.fixed_n_seeds * len({agent for pair in self.comparisons for agent in pair})


@dataclass(frozen=True)
class Interim:
    """One interim analysis: its cumulative level, what it spent, its last boundary."""

    round: int
    level: float
    level_spent: float
    boundary: float
    statistics: dict[Pair, float]
    decided: tuple[Pair, ...]


@dataclass(frozen=True)
class AdaStopResult:
    """What the report states: the decisions, the level, the seeds spent and a fixed-N's."""

    alpha: float
    decisions: dict[Pair, Decision]
    seeds_spent: dict[str, int]
    seeds_total: int
    fixed_n_total: int
    rounds: int
    done: bool
    means: dict[str, float]
    interims: tuple[Interim, ...] = field(default=())


def boundary(values: npt.ArrayLike, n_total: int, budget: float) -> tuple[float, float]:
    """The rejection threshold ``b`` of a permutation test: reject when the statistic is > b.

    ``values`` are the permutation statistics of the sequences not rejected earlier, out of
    ``n_total`` sequences in all; ``b`` is the smallest of them whose tail
    ``#{values > b} / n_total`` is <= ``budget``. Values within ``1e-9`` of the largest
    ``|value|`` count as tied (a permutation and its mirror give the same ``|T|`` up to
    rounding), and ``b`` is returned raised by that much, so ``x > b`` means "clearly above".
    Returns ``b`` and the probability it spends; ``(inf, 0.0)`` when no value is admissible.
    """
    v = np.sort(np.asarray(values, dtype=np.float64))
    if v.size == 0:
        return math.inf, 0.0
    tie = _TIE_TOLERANCE * float(np.max(np.abs(v)))
    tails = v.size - np.searchsorted(v, v + tie, side="right")
    admissible = tails / n_total <= budget + _LEVEL_TOLERANCE
    if not admissible.any():
        return math.inf, 0.0
    first = int(np.argmax(admissible))
    return float(v[first]) + tie, float(tails[first] / n_total)


@functools.lru_cache(maxsize=16)
def _all_signs(n: int) -> SignArray:
    """Every split of ``2 n`` scores into two halves as +-1 rows; row 0 is the identity."""
    rows = list(itertools.combinations(range(2 * n), n))
    signs = -np.ones((len(rows), 2 * n), dtype=np.int8)
    for i, chosen in enumerate(rows):
        signs[i, list(chosen)] = 1
    signs.flags.writeable = False
    return signs


def _random_signs(n: int, rows: int, rng: np.random.Generator) -> SignArray:
    """``rows`` uniform random splits of ``2 n`` scores as +-1 rows; row 0 is the identity."""
    identity = np.repeat(np.array([1, -1], dtype=np.int8), n)
    signs = rng.permuted(np.tile(identity, (rows, 1)), axis=1)
    signs[0] = identity
    return signs


class AdaStop:
    """The AdaStop test as a state machine: :meth:`update` once a round until :attr:`done`.

    >>> test = AdaStop(AdaStopConfig(("ppo", "a2c"), n_per_round=5, max_rounds=4))
    >>> test.update({"ppo": [500.0, 498, 500, 499, 500], "a2c": [90.0, 120, 75, 140, 101]})
    {('ppo', 'a2c'): 'larger'}
    >>> test.done, test.seeds_spent
    (True, {'ppo': 5, 'a2c': 5})
    """

    def __init__(self, config: AdaStopConfig) -> None:
        self.config = config
        self._rng = np.random.default_rng(config.seed)
        self._decisions: dict[Pair, Decision] = dict.fromkeys(config.comparisons, "undecided")
        self._scores: dict[str, list[FloatArray]] = {agent: [] for agent in config.agents}
        self._observed: dict[Pair, float] = {}
        # Permutation statistics of the sequences no earlier interim rejected (same row
        # index = same sequence across pairs), out of _n_total sequences; row 0 the identity.
        self._perm: dict[Pair, FloatArray] = {c: np.zeros(1) for c in config.comparisons}
        self._n_total = 1
        self._exact = True
        self._level_spent = 0.0
        self._interims: list[Interim] = []

    @property
    def round(self) -> int:
        """Rounds analysed so far."""
        return len(self._interims)

    @property
    def done(self) -> bool:
        """Whether every pair is decided (at the latest after ``max_rounds`` rounds)."""
        return "undecided" not in self._decisions.values()

    @property
    def decisions(self) -> dict[Pair, Decision]:
        return dict(self._decisions)

    @property
    def active_agents(self) -> tuple[str, ...]:
        """The agents the next round needs scores of: those of an undecided pair."""
        undecided = {agent for c, d in self._decisions.items() if d == "undecided" for agent in c}
        return tuple(agent for agent in self.config.agents if agent in undecided)

    @property
    def seeds_spent(self) -> dict[str, int]:
        """Scores (seeds, replicates) received per agent."""
        return {agent: sum(len(s) for s in blocks) for agent, blocks in self._scores.items()}

    def result(self) -> AdaStopResult:
        spent = self.seeds_spent
        return AdaStopResult(
            alpha=self.config.alpha,
            decisions=self.decisions,
            seeds_spent=spent,
            seeds_total=sum(spent.values()),
            fixed_n_total=self.config.fixed_n_total,
            rounds=self.round,
            done=self.done,
            means={a: float(np.mean(np.concatenate(b))) for a, b in self._scores.items() if b},
            interims=tuple(self._interims),
        )

    def update(self, scores: Mapping[str, npt.ArrayLike]) -> dict[Pair, Decision]:
        """Analyse one round: ``scores`` maps each of :attr:`active_agents` (exactly those) to
        its ``n_per_round`` new finite scores. Returns the decisions after this interim."""
        if self.done:
            raise RuntimeError("AdaStop is done: every pair is decided")
        block = self._check(scores)
        for agent, values in block.items():
            self._scores[agent].append(values)
        self._extend(block)
        level = self.config.alpha * (self.round + 1) / self.config.max_rounds
        analysed = {c: self._observed[c] for c in self._perm}
        decided, bound, spent, tmax = self._step_down(level)
        for pair in decided:
            self._decisions[pair] = "larger" if self._observed[pair] > 0 else "smaller"
            del self._perm[pair]
        keep = tmax <= bound  # the sequences this interim rejects count as rejected from now on
        self._perm = {c: t[keep] for c, t in self._perm.items()}
        self._level_spent += spent
        self._interims.append(
            Interim(
                round=self.round + 1,
                level=level,
                level_spent=self._level_spent,
                boundary=bound,
                statistics=analysed,
                decided=tuple(decided),
            )
        )
        if self.round == self.config.max_rounds:
            self._decisions.update(dict.fromkeys(self._perm, "equal"))
        return self.decisions

    def _check(self, scores: Mapping[str, npt.ArrayLike]) -> dict[str, FloatArray]:
        active, n = self.active_agents, self.config.n_per_round
        if set(scores) != set(active):
            raise ValueError(f"scores must be given for exactly {active}, got {tuple(scores)}")
        block = {a: np.asarray(scores[a], dtype=np.float64).ravel() for a in active}
        for agent, values in block.items():
            if values.size != n or not np.all(np.isfinite(values)):
                raise ValueError(f"{agent}: need {n} finite scores this round, got {values}")
        return block

    def _extend(self, block: Mapping[str, FloatArray]) -> None:
        """Append this round to the observed statistics and to every permutation sequence."""
        n, cap = self.config.n_per_round, self.config.n_permutations
        rows = next(iter(self._perm.values())).size
        # Centred (each split has n scores a side, so T is unchanged): less cancellation.
        pooled = {c: np.concatenate([block[c[0]], block[c[1]]]) for c in self._perm}
        pooled = {c: z - z.mean() for c, z in pooled.items()}
        if self._exact and math.comb(2 * n, n) * rows <= cap:
            signs = _all_signs(n).astype(np.float64)
            self._perm = {
                c: (t[:, None] + signs @ pooled[c]).ravel() for c, t in self._perm.items()
            }
            self._n_total *= len(signs)
        else:
            self._extend_random(pooled)
        # The observed statistic is the identity's, row 0: the same float as in the ties.
        self._observed.update({c: float(t[0]) for c, t in self._perm.items()})

    def _extend_random(self, pooled: Mapping[Pair, FloatArray]) -> None:
        n, cap = self.config.n_per_round, self.config.n_permutations
        rows = next(iter(self._perm.values())).size
        if self._exact:  # from now on a uniform sample of the sequences, identity first
            self._exact = False
            prefix = self._rng.integers(0, self._n_total, size=cap)
            prefix[0] = 0
            prefix = prefix[prefix < rows]  # those drawn beyond were rejected earlier
            self._perm = {c: t[prefix] for c, t in self._perm.items()}
            self._n_total, rows = cap, prefix.size
        signs = _random_signs(n, rows, self._rng).astype(np.float64)
        self._perm = {c: t + signs @ pooled[c] for c, t in self._perm.items()}

    def _step_down(self, level: float) -> tuple[list[Pair], float, float, FloatArray]:
        """The pairs this interim decides, the last boundary, what it spends, and the
        maximum over the undecided pairs of every sequence's ``|T|``."""
        remaining = list(self._perm)
        decided: list[Pair] = []
        budget = level - self._level_spent
        while True:
            tmax = np.max(np.abs(np.stack([self._perm[c] for c in remaining])), axis=0)
            bound, spent = boundary(tmax, self._n_total, budget)
            worst = max(remaining, key=lambda c: abs(self._observed[c]))
            if abs(self._observed[worst]) <= bound:
                return decided, bound, spent, tmax
            decided.append(worst)
            remaining.remove(worst)
            if not remaining:
                return decided, bound, spent, np.zeros(tmax.size)


def run_adastop(
    config: AdaStopConfig, sample: Callable[[str, int], npt.ArrayLike]
) -> AdaStopResult:
    """Run a comparison to its end: ``sample(agent, n)`` returns ``n`` new scores of ``agent``
    (e.g. trains ``n`` new seeds), called once a round for each active agent."""
    test = AdaStop(config)
    while not test.done:
        test.update({agent: sample(agent, config.n_per_round) for agent in test.active_agents})
    return test.result()
