"""The report's section on an adaptive comparison (``compare.rounds=N``): read from the
``compare.json`` a comparison leaves in its sweep directory, the decision on every pair, the
error level, and the seeds spent against a fixed-N design's. A report without compare.json
has no such section."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlsweep.report.markdown import fmt_num, markdown_table
from rlsweep.store import COMPARE_FILE

__all__ = [
    "comparison_section",
    "decision_words",
    "read_comparisons",
    "with_comparisons",
]

# The section goes before this one when the report has it, else at the end.
_BEFORE = "## Paired comparisons"
_WORDS = {"larger": "{a} > {b}", "smaller": "{a} < {b}", "equal": "no difference shown"}


def decision_words(pair: dict[str, Any]) -> str:
    """A pair's decision in words: ``a > b``, ``a < b``, ``no difference shown``."""
    words = _WORDS.get(pair["decision"], "undecided")
    return words.format(a=pair["a"], b=pair["b"])


def read_comparisons(sweeps: Sequence[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Every sweep's compare.json (sweeps without one are left out). A file that is not
    a comparison's JSON object raises ValueError naming it."""
    out = []
    for sweep in sweeps:
        path = sweep / COMPARE_FILE
        if not path.is_file():
            continue
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not {"pairs", "arms", "alpha"} <= data.keys():
            raise ValueError(f"{path} is not the record of a comparison")
        out.append((sweep, data))
    return out


def with_comparisons(text: str, sweeps: Sequence[Path]) -> str:
    """``text`` (a report.md) with the section of the sweeps' comparisons, if any."""
    found = read_comparisons(sweeps)
    if not found:
        return text
    section = "\n".join(comparison_section(found)) + "\n\n"
    at = text.find(_BEFORE + "\n")
    if at < 0:
        return text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    return text[:at] + section + text[at:]


def comparison_section(found: Sequence[tuple[Path, dict[str, Any]]]) -> list[str]:
    lines = [
        "## Adaptive comparison (AdaStop)",
        "",
        "Every point of the grid is an arm. Replicates ran in rounds; after each round "
        "AdaStop's group-sequential permutation test decided the pairs it could, with the "
        "family-wise error over all pairs kept at the level alpha, and only the arms of an "
        'undecided pair ran on. A pair still undecided after the last round is "no '
        'difference shown" at that level. A fixed-N design runs every arm at the maximum.',
    ]
    for sweep, data in found:
        lines += ["", *_one(sweep, data)]
    return lines


def _one(sweep: Path, d: dict[str, Any]) -> list[str]:
    head = (
        f"`{sweep.name}/{COMPARE_FILE}`: `{d.get('metric')}`, alpha = {d['alpha']:g}, rounds of "
        f"{d['per_round']} replicates, {d['rounds_run']} of at most {d['max_rounds']} run; "
        f"status **{d['status']}**."
    )
    pairs = markdown_table(
        ["pair", "decision", "decided at round"],
        [
            [
                f"{p['a']} vs {p['b']}",
                decision_words(p),
                "–" if p.get("round") is None else str(p["round"]),
            ]
            for p in d["pairs"]
        ],
    )
    fixed = d["fixed_n_per_arm"]
    arms = markdown_table(
        ["arm", "seeds spent", "fixed-N seeds", "mean"],
        [[a["name"], str(a["seeds_spent"]), str(fixed), _mean(a.get("mean"))] for a in d["arms"]],
    )
    share = d["seeds_spent"] / d["fixed_n_total"] if d["fixed_n_total"] else float("nan")
    total = (
        f"Seeds spent: {d['seeds_spent']} of a fixed-N design's {d['fixed_n_total']} "
        f"({fmt_num(100 * share, '.0f')}%)."
    )
    failed = [
        f"Stopped: the job `{' '.join(j['overrides'])}` failed ({j['error']}); the pairs "
        "undecided then stay undecided (no decision from part of a round)."
        for j in d.get("failed_jobs", [])
    ]
    return [head, "", *pairs, "", *arms, "", total, *(["", *failed] if failed else [])]


def _mean(x: float | None) -> str:
    return "–" if x is None else fmt_num(float(x))
