"""Does AdaStop hold its error level, and how many seeds does it save? On synthetic scores.

    nice -n 19 python bench/adastop_calibration.py                # the table, in Markdown
    nice -n 19 python bench/adastop_calibration.py --repetitions 200 --permutations 2000

Each row runs ``--repetitions`` simulated comparisons with :func:`rlsweep.stats.adastop.run_adastop`
at the reference implementation's defaults (5 seeds a round, at most 5 rounds, 10,000
permutation sequences, here alpha 5%), every repetition its own permutation seed and fresh
scores, and reports how often it declared a difference (for agents all alike: the family-wise
false-positive rate, which should stay near or below alpha; with a shift: the power), the mean
seeds it spent in all against a fixed-N design's at the maximum, and its time. Scores:

- ``normal``: N(0, 1) per seed;
- ``solved-or-not``: RL-like, bimodal and skewed: 70% of the seeds solve the task (N(450, 40)),
  the others fail (N(120, 60)).

``tests/test_adastop.py`` runs :func:`simulate` smaller (4 rounds, 2,000 sequences).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlsweep.stats.adastop import AdaStopConfig, run_adastop

Scores = Callable[[np.random.Generator, int], np.ndarray]


def normal(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.normal(size=n)


def solved_or_not(rng: np.random.Generator, n: int) -> np.ndarray:
    solved = rng.random(n) < 0.7
    return np.where(solved, rng.normal(450, 40, n), rng.normal(120, 60, n))


@dataclass(frozen=True)
class Case:
    scores: str
    shifts: tuple[float, ...]  # one per agent: its scores are the distribution's plus this


CASES = [
    Case("normal", (0.0, 0.0)),
    Case("solved-or-not", (0.0, 0.0)),
    Case("normal", (0.0, 0.0, 0.0)),
    Case("normal", (0.0, 0.0, 0.0, 0.0)),
    Case("normal", (0.0, 1.0)),
    Case("normal", (0.0, 1.5)),
    Case("solved-or-not", (0.0, 100.0)),
    Case("solved-or-not", (0.0, 200.0)),
]
DRAWS: dict[str, Scores] = {"normal": normal, "solved-or-not": solved_or_not}


@dataclass(frozen=True)
class Simulation:
    declared: float  # the fraction of repetitions that declared any pair different
    mean_seeds: float
    fixed_n: int
    seconds: float


def simulate(
    case: Case,
    repetitions: int,
    *,
    n_per_round: int = 5,
    max_rounds: int = 5,
    permutations: int = 10_000,
    alpha: float = 0.05,
    seed: int = 2024,
) -> Simulation:
    """``repetitions`` comparisons of ``case`` (permutation seeds 0, 1, ...; scores from ``seed``)."""
    draw, agents = DRAWS[case.scores], tuple(f"agent{i}" for i in range(len(case.shifts)))
    shift = dict(zip(agents, case.shifts, strict=True))
    rng = np.random.default_rng(seed)
    declared = seeds = 0
    start = time.perf_counter()
    for repetition in range(repetitions):
        config = AdaStopConfig(
            agents, n_per_round, max_rounds, alpha, n_permutations=permutations, seed=repetition
        )
        result = run_adastop(config, lambda agent, n: draw(rng, n) + shift[agent])
        declared += any(d != "equal" for d in result.decisions.values())
        seeds += result.seeds_total
    seconds = time.perf_counter() - start
    return Simulation(declared / repetitions, seeds / repetitions, config.fixed_n_total, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=1000)
    parser.add_argument("--n-per-round", type=int, default=5)
    parser.add_argument("--max-rounds", type=int, default=5)
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=2024, help="of the simulated scores")
    args = parser.parse_args()
    print(
        f"{args.repetitions} repetitions a row, {args.n_per_round} seeds a round, at most "
        f"{args.max_rounds} rounds, {args.permutations} permutation sequences, "
        f"alpha {args.alpha:g}\n"
    )
    print("| scores | agents' shifts | declared a difference | mean seeds | fixed N | s |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for case in CASES:
        r = simulate(
            case,
            args.repetitions,
            n_per_round=args.n_per_round,
            max_rounds=args.max_rounds,
            permutations=args.permutations,
            alpha=args.alpha,
            seed=args.seed,
        )
        shifts = ", ".join(f"{s:g}" for s in case.shifts)
        print(
            f"| {case.scores} | {shifts} | {r.declared:.1%} | {r.mean_seeds:.1f} | "
            f"{r.fixed_n} | {r.seconds:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
