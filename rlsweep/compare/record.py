"""A comparison's outcome: ``compare.json`` in the sweep directory (written atomically, a
pure function of the jobs' results, so a resumed comparison writes the same file) and the
short table printed at the end of the sweep. The report reads the file
(:mod:`rlsweep.report.markdown_compare`)."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsweep.compare.arms import Arms
from rlsweep.report.markdown import fmt_num, markdown_table
from rlsweep.report.markdown_compare import decision_words
from rlsweep.stats.adastop import AdaStop, Interim
from rlsweep.store import COMPARE_FILE, atomic_write_json

FORMAT = 1


@dataclass(frozen=True)
class Outcome:
    """What compare.json holds (``data``), and its status: ``decided`` (every pair),
    ``failed`` (a job failed: the pairs undecided then stay undecided)."""

    data: dict[str, Any]

    @classmethod
    def of(
        cls,
        test: AdaStop,
        arms: Arms,
        scores: dict[tuple[int, int], float],
        *,
        metric: str | None,
        replicate_key: str,
        failed: list[tuple[list[str], str]],
        jobs_not_run: int,
    ) -> Outcome:
        """The record of a comparison: AdaStop's ``test``, the ``arms``, every job's score by
        (arm number, replicate), and its ``failed`` jobs (overrides, first error line)."""
        result = test.result()
        config = test.config
        decided_at = {pair: i.round for i in result.interims for pair in i.decided}
        status = "failed" if failed else "decided" if result.done else "stopped"
        arm_records = [
            {
                "name": arm.name,
                "overrides": list(arm.overrides),
                "seeds_spent": result.seeds_spent[arm.name],
                "mean": result.means.get(arm.name),
                "scores": [s for (a, _), s in sorted(scores.items()) if a == number],
            }
            for number, arm in enumerate(arms.arms)
        ]
        pairs = [
            {
                "a": a,
                "b": b,
                "decision": d,
                "round": decided_at.get((a, b), result.rounds if d == "equal" else None),
            }
            for (a, b), d in result.decisions.items()
        ]
        data = {
            "format": FORMAT,
            "status": status,
            "metric": metric,
            "alpha": result.alpha,
            "per_round": config.n_per_round,
            "max_rounds": config.max_rounds,
            "rounds_run": result.rounds,
            "permutations": config.n_permutations,
            "permutation_seed": config.seed,
            "replicate_key": replicate_key,
            "overrides": list(arms.fixed),
            "arms": arm_records,
            "pairs": pairs,
            "seeds_spent": result.seeds_total,
            "fixed_n_per_arm": config.fixed_n_seeds,
            "fixed_n_total": result.fixed_n_total,
            "failed_jobs": [{"overrides": o, "error": e} for o, e in failed],
            # Jobs released but never ended (a rerun mode that left them alone).
            "jobs_not_run": jobs_not_run,
            "interims": [_interim(i) for i in result.interims],
        }
        return cls(data)


def _interim(interim: Interim) -> dict[str, Any]:
    return {
        "round": interim.round,
        "level": interim.level,
        "level_spent": interim.level_spent,
        # inf (no sequence rare enough to reject on) has no JSON number: null.
        "boundary": interim.boundary if math.isfinite(interim.boundary) else None,
        "statistics": [{"a": a, "b": b, "t": t} for (a, b), t in interim.statistics.items()],
        "decided": [list(pair) for pair in interim.decided],
    }


def write_outcome(sweep_dir: Path, outcome: Outcome) -> Path:
    path = sweep_dir / COMPARE_FILE
    atomic_write_json(path, outcome.data)
    return path


def say(outcome: Outcome, sweep_dir: Path) -> None:
    """The outcome as a few lines on stderr."""
    d = outcome.data
    head = (
        f"[rlsweep] comparison of {d['metric'] or '(no result)'} (AdaStop, family-wise error "
        f"{d['alpha']:g}): {d['status']} after {d['rounds_run']} of at most "
        f"{d['max_rounds']} rounds"
    )
    arms = markdown_table(
        ["arm", "seeds", "mean"],
        [
            [a["name"], str(a["seeds_spent"]), "–" if a["mean"] is None else fmt_num(a["mean"])]
            for a in d["arms"]
        ],
    )
    pairs = markdown_table(
        ["pair", "decision", "round"],
        [[f"{p['a']} vs {p['b']}", decision_words(p), str(p["round"] or "–")] for p in d["pairs"]],
    )
    lines = [head, *arms, *pairs]
    lines.append(
        f"Seeds: {d['seeds_spent']} spent; a fixed-N design runs {d['fixed_n_total']} "
        f"({d['fixed_n_per_arm']} per arm)."
    )
    for job in d["failed_jobs"]:
        lines.append(
            f"Stopped: the job {' '.join(job['overrides'])} failed ({job['error']}); the pairs "
            "undecided then stay undecided. Run the same command again to resume."
        )
    if d["status"] == "stopped":
        lines.append(
            f"Stopped before a decision: {d['jobs_not_run']} job(s) of round "
            f"{d['rounds_run'] + 1} did not run (rerun=failed leaves missing jobs alone)."
        )
    lines.append(f"Comparison: {sweep_dir / COMPARE_FILE}")
    print("\n".join(lines), file=sys.stderr, flush=True)
