"""The report's section on a hyperparameter search (``search.trials=N``): read from the
``search.json`` a search leaves in its sweep directory, its settings, the best trial with a
bootstrap interval over its replicates, the progress plot and the trials table. A report
without search.json has no such section."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlsweep.report.markdown import fmt_num, markdown_table
from rlsweep.stats import iqm, mean
from rlsweep.stats.bootstrap import bootstrap_ci
from rlsweep.store import SEARCH_FILE

__all__ = ["read_search", "search_section", "with_search"]


def read_search(sweeps: Sequence[Path]) -> dict[str, Any] | None:
    """The first sweep's search.json (None: not a search). A file that is not a search's
    record raises ValueError naming it."""
    for sweep in sweeps:
        path = sweep / SEARCH_FILE
        if path.is_file():
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or not {"trials", "settings"} <= data.keys():
                raise ValueError(f"{path} is not the record of a search")
            return data
    return None


def best_interval(record: dict[str, Any], *, seed: int, reps: int) -> tuple[float, float] | None:
    """A 95% percentile-bootstrap interval of the best trial's objective statistic (IQM,
    or the mean for mean and lcb) over its replicates (None: no best trial)."""
    best = record.get("best")
    if best is None:
        return None
    values = np.asarray(record["trials"][best]["values"], dtype=np.float64)
    statistic = iqm if record["settings"]["objective"] == "iqm" else mean
    _, low, high = bootstrap_ci(values, statistic, reps=reps, seed=seed)
    return low, high


def search_section(record: dict[str, Any], plot: str | None, *, seed: int, reps: int) -> list[str]:
    """The section's markdown lines."""
    s = record["settings"]
    lines = [
        "## Search",
        "",
        f"{len(record['trials'])} of {s['trials']} trials, each {s['replicates']} replicates "
        f"({record['replicate_key']} 0..{s['replicates'] - 1}); {s['sampler']} sampler; "
        f"objective: the {s['objective']} of `{record['metric']}` over a trial's replicates, "
        f"{s['direction']}d. Space: {'; '.join(record['space'])}. "
        f"{record['jobs_run']} jobs.",
        "",
    ]
    best = record.get("best")
    if best is None:
        lines += ["No trial completed every replicate: there is no best trial.", ""]
    else:
        trial = record["trials"][best]
        low, high = best_interval(record, seed=seed, reps=reps) or (float("nan"),) * 2
        params = ", ".join(f"`{k}={v}`" for k, v in trial["params"].items())
        lines += [
            f"**Best: trial {best}**, {params}: {s['objective']} "
            f"{fmt_num(trial['objective'])}, 95% bootstrap CI over its replicates "
            f"[{fmt_num(low)}, {fmt_num(high)}].",
            "",
            f"The best of {len(record['trials'])} noisy estimates is optimistic (chosen "
            "because it was high): confirm it with fresh replicates, e.g. the same "
            "configuration with another seeding root.",
            "",
        ]
    if plot is not None:
        lines += [f"![Search progress]({plot})", ""]
    return lines + _trials_table(record) + [""]


def _trials_table(record: dict[str, Any]) -> list[str]:
    names = list(record["trials"][0]["params"]) if record["trials"] else []
    rows = []
    for t in record["trials"]:
        values = ", ".join("-" if v is None else fmt_num(v) for v in t["values"])
        mark = " (best)" if t["number"] == record.get("best") else ""
        rows.append(
            [f"{t['number']}{mark}"]
            + [str(t["params"][n]) for n in names]
            + [t["status"], "-" if t["objective"] is None else fmt_num(t["objective"]), values]
        )
    header = ["trial", *names, "status", record["settings"]["objective"], "replicates"]
    return markdown_table(header, rows)


def with_search(
    text: str, record: dict[str, Any] | None, plot: str | None, *, seed: int, reps: int
) -> str:
    """``text`` (a report.md) with the search's section at its end, if the sweep is a
    search (``record``: its search.json)."""
    if record is None:
        return text
    section = "\n".join(search_section(record, plot, seed=seed, reps=reps))
    return text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
