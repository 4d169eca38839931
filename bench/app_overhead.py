"""A 1-job sweep of a published-style app against running the app directly (issue 30 item 7:
within 1 s).

Runs, in alternating order, ``--runs`` times each, in fresh directories:

- direct: ``python APP``                                   (the app as its authors run it)
- sweep:  ``python APP -m +rlsweep=joblib``                (the same job through rlsweep)

Both do the same work with one thread (rlsweep runs a job with its ``torch_threads``, 1 by
default; the direct run is given ``OMP_NUM_THREADS=1`` and its siblings, so that the figure
is rlsweep's overhead and not a thread count). The table shows each run and the medians,
the difference and the ratio.

    python bench/app_overhead.py                       # tests/apps/torchrl_seeded, 5 runs
    python bench/app_overhead.py --app tests/apps/asis/app.py --runs 7
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import figures  # bench/figures.py

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 1.0
ONE_THREAD = {v: "1" for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", type=Path, default=ROOT / "tests/apps/torchrl_seeded/app.py")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the figures here (bench/all.py)")
    args = parser.parse_args()
    app = args.app.resolve()
    base = {**os.environ, "HYDRA_FULL_ERROR": "1"}
    base.pop("RLSWEEP_TRACE", None)
    times: dict[str, list[float]] = {"direct": [], "sweep": []}
    with tempfile.TemporaryDirectory(prefix="rlsweep-app-overhead-") as tmp:
        for i in range(args.runs):
            order = ("direct", "sweep") if i % 2 == 0 else ("sweep", "direct")
            for kind in order:
                work = Path(tmp) / f"{kind}{i}"
                work.mkdir()
                if kind == "direct":
                    seconds = timed([sys.executable, str(app)], work, {**base, **ONE_THREAD})
                else:
                    seconds = timed([sys.executable, str(app), "-m", "+rlsweep=joblib"], work, base)
                times[kind].append(seconds)
                print(f"run {i + 1} {kind:6s} {seconds:6.2f} s", flush=True)
    direct, sweep = statistics.median(times["direct"]), statistics.median(times["sweep"])
    print(f"\n{platform.node()} {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"app: {app.relative_to(ROOT) if app.is_relative_to(ROOT) else app}")
    print("| | median (s) | runs (s) |\n|---|---|---|")
    for kind, med in (("direct", direct), ("1-job sweep", sweep)):
        runs = ", ".join(f"{t:.2f}" for t in times["direct" if kind == "direct" else "sweep"])
        print(f"| {kind} | {med:.2f} | {runs} |")
    over = sweep - direct
    verdict = "met" if over <= GOAL_S else "not met"
    print(
        f"\noverhead {over:+.2f} s, ratio {sweep / direct:.3f} (goal: within {GOAL_S:.0f} s: {verdict})"
    )
    figures.write(
        args.json,
        [
            figures.Figure(
                bench="app_overhead",
                figure="1-job sweep of an app, wall (s)",
                rlsweep=sweep,
                anchor=direct,
                anchor_name="the app run directly",
                lower_is_better=True,
                goal=f"within {GOAL_S:.0f} s of the direct run",
                met=over <= GOAL_S,
            )
        ],
    )


if __name__ == "__main__":
    main()
