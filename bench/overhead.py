"""A sweep's fixed overhead (issue 19, goal 4): from the command's start to the first job
training, and from the last job's end to the command's exit (summary, report, plots).

Runs the command below several times, each in a fresh directory with ``RLSWEEP_TRACE`` set
(see rlsweep/trace.py), and prints each run's figures and their medians:

- start: the command's start -> the first job's task function entered (in its worker);
- end: the last job's task function left -> the command's exit;
- summary: the end-of-sweep step alone (summary, report, plots), inside ``end``;
- workers / installs: processes that ran jobs, and Hydra states installed in them (each
  once per worker, however many jobs it ran).

    python bench/overhead.py                # --runs 5, --jobs 2 (n_jobs=2 workers)
    python bench/overhead.py --jobs 4       # more jobs than workers: still 2 installs
    python bench/overhead.py --trees /tmp/before /tmp/after   # runs interleaved

``--trees``: source trees (a ``git archive`` of two commits, say) put first on PYTHONPATH in
turn, run after run, so that a change of the machine's load hits each alike; the tree must
have rlsweep/trace.py and its calls (add them to an older commit to measure it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import figures  # bench/figures.py

from rlsweep.numerics import cpu

GOAL_S = 1.5


def command(jobs: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rlsweep",
        "-m",
        "+preset=ppo_cartpole",
        f"seed=range({jobs})",
        "n_jobs=2",
        "train.total_steps=256",
        "eval.every_steps=100000",
        "eval.episodes=1",
    ]


def one_run(jobs: int, tree: str | None) -> dict[str, float]:
    """Run the command once in a fresh directory; its figures from the trace."""
    with tempfile.TemporaryDirectory(prefix="rlsweep-overhead-") as tmp:
        trace = Path(tmp) / "trace.txt"
        env = {**os.environ, "RLSWEEP_TRACE": str(trace)}
        if tree is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")]))
        start = time.time()
        done = subprocess.run(command(jobs), cwd=tmp, env=env, capture_output=True, text=True)
        exit_ = time.time()
        if done.returncode != 0:
            raise SystemExit(f"the sweep failed ({done.returncode}):\n{done.stderr[-3000:]}")
        events = [line.split() for line in trace.read_text().splitlines()]

    def times(name: str) -> list[float]:
        return [float(t) for t, _, e in events if e == name]

    return {
        "start": min(times("task-start")) - start,
        "end": exit_ - max(times("task-end")),
        "summary": max(times("summary-end")) - min(times("summary-start")),
        "workers": len({pid for _, pid, e in events if e == "task-start"}),
        "installs": len(times("install")),
        "total": exit_ - start,
    }


COLUMNS = ("start", "end", "summary", "total", "workers", "installs")


def cells(row: dict[str, float]) -> str:
    return " | ".join(f"{row[c]:.2f}" if c not in COLUMNS[-2:] else f"{row[c]:g}" for c in COLUMNS)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--trees", nargs="+", default=[None], metavar="DIR")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    print(f"command: {' '.join(command(args.jobs)[1:])}")
    print(
        f"machine: {cpu()['model']}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at the start"
    )
    print("| tree | run | " + " | ".join(COLUMNS) + " |")
    print("| --- " + "| ---: " * (len(COLUMNS) + 1) + "|")
    rows: dict[str | None, list[dict[str, float]]] = {tree: [] for tree in args.trees}
    for i in range(args.runs):
        for tree in args.trees:
            row = one_run(args.jobs, tree)
            rows[tree].append(row)
            print(f"| {tree or '.'} | {i + 1} | {cells(row)} |", flush=True)
    for tree, runs in rows.items():
        medians = {c: statistics.median(r[c] for r in runs) for c in COLUMNS}
        print(f"| {tree or '.'} | median | {cells(medians)} |")
    found = []
    for tree, runs in rows.items():
        for name in ("start", "end"):
            value = statistics.median(r[name] for r in runs)
            verdict = "met" if value <= GOAL_S else "NOT met"
            print(f"{tree or '.'}: {name} median {value:.2f} s, goal <= {GOAL_S} s: {verdict}")
            found.append(
                figures.Figure(
                    bench="overhead",
                    figure=f"{name} overhead (s){'' if tree is None else ', ' + tree}",
                    rlsweep=value,
                    anchor=None,
                    anchor_name="",
                    lower_is_better=True,
                    goal=f"<= {GOAL_S} s",
                    met=value <= GOAL_S,
                )
            )
    figures.write(args.json, found)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
