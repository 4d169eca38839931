"""Every speed benchmark of issue 19 in one command, and one table of their ratios (goal 6).

    python bench/all.py                           # quick sizes: about 2 minutes on 2 cores
    python bench/all.py --full                    # the sizes bench/README.md reports (~1 h)
    python bench/all.py --out after.json --baseline before.json   # what a change moved
    python bench/all.py --only step,overhead      # some of them

Runs, one after the other, each as its own ``python`` process (their progress is shown as
they go), each measuring rlsweep side by side with its anchor in the same run:

- ``step.py``: a PPO gradient step and an A2C update against plain torch (goal 1);
- ``agents.py``: env steps/s of PPO and A2C against Stable-Baselines3 (goal 2);
- ``endtoend.py``: a PPO sweep against a joblib + SB3 loop (goal 3);
- ``overhead.py``: a sweep's start and end overheads (goal 4; no anchor);
- ``scale.py``: planning, memory, summary and resume of a large sweep of a trivial app
  (goal 5; Hydra's basic launcher as the anchor where it runs the same jobs).

Then prints every figure: rlsweep's value, the anchor's, their ratio (the figure to
compare across runs: both sides share the machine's load), the goal and whether it is met.
With ``--baseline`` (an earlier ``--out``), each figure's change since: the ratio's where
it has an anchor, the value's otherwise; a figure worse by more than ``--tolerance``
(default 15 %: on these machines the same code's ratios to SB3 moved by up to 10 % between
two full runs) is marked, and the command exits 1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import figures  # bench/figures.py

HERE = Path(__file__).resolve().parent

# Each benchmark's arguments: (quick, full).
BENCHES: dict[str, tuple[list[str], list[str]]] = {
    "step": (["--updates", "60"], []),
    # Full budgets even when quick: at a quarter of them SB3's start-up weighs enough to
    # double the ratio (PPO CartPole 4.08x against 2.34x at full budgets, 2026-11-26).
    "agents": (["--repeats", "1"], ["--repeats", "3"]),
    "endtoend": (["--pairs", "1", "--steps", "20000"], ["--pairs", "3"]),
    "overhead": (["--runs", "3"], ["--runs", "5"]),
    "scale": (["--seeds", "10", "--anchor-seeds", "10"], []),
}


def run_bench(name: str, args: list[str], out: Path) -> list[figures.Figure]:
    """Run ``bench/<name>.py`` with ``args``, its output shown prefixed; its figures."""
    command = [sys.executable, str(HERE / f"{name}.py"), *args, "--json", str(out)]
    print(f"\n[{name}] {' '.join(command[1:])}", flush=True)
    start = time.perf_counter()
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=HERE.parent
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"[{name}] {line}", end="", flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench/{name}.py failed ({proc.returncode}); see its output above")
    print(f"[{name}] done in {time.perf_counter() - start:.0f} s", flush=True)
    return figures.read(out)


def key(f: figures.Figure) -> str:
    return f"{f.bench}: {f.figure}"


def change(now: figures.Figure, before: figures.Figure) -> float | None:
    """How much worse ``now`` is than ``before`` (0.1: 10 % worse; negative: better), by
    the ratio to the anchor when both have one, else by the value."""
    if now.ratio is not None and before.ratio is not None:
        a, b = now.ratio, before.ratio
    else:
        a, b = now.rlsweep, before.rlsweep
    if b == 0:
        return None
    return a / b - 1 if now.lower_is_better else b / a - 1


def number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"


def table(
    found: list[figures.Figure], baseline: dict[str, figures.Figure], tolerance: float
) -> bool:
    """Print every figure; whether one is worse than its baseline beyond ``tolerance``."""
    worse = False
    head = "| figure | rlsweep | anchor | anchor's | ratio | goal | met |"
    print("\n" + head + (" change since baseline |" if baseline else ""))
    print("| --- | ---: | --- | ---: | ---: | --- | --- |" + (" ---: |" if baseline else ""))
    for f in found:
        met = {True: "yes", False: "**no**", None: "-"}[f.met]
        row = (
            f"| {key(f)} | {number(f.rlsweep)} | {f.anchor_name or '-'} | {number(f.anchor)} | "
            f"{'-' if f.ratio is None else f'{f.ratio:.2f}x'} | {f.goal} | {met} |"
        )
        if baseline:
            before = baseline.get(key(f))
            moved = None if before is None else change(f, before)
            if moved is None:
                row += " - |"
            else:
                flag = moved > tolerance
                worse |= flag
                row += f" {'**' if flag else ''}{moved:+.0%} {'worse' if moved > 0 else 'better'}"
                row += f"{'**' if flag else ''} |"
        print(row)
    return worse


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the sizes bench/README.md reports")
    parser.add_argument("--only", default="", help="comma-separated: " + ",".join(BENCHES))
    parser.add_argument("--out", type=Path, default=None, help="write every figure here (JSON)")
    parser.add_argument("--baseline", type=Path, default=None, help="an earlier --out")
    parser.add_argument("--tolerance", type=float, default=0.15)
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(BENCHES)
    unknown = sorted(set(names) - set(BENCHES))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHES)}")
    print(
        f"{'full' if args.full else 'quick'} sizes; {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.2f} at the start; {time.strftime('%Y-%m-%d %H:%M %Z')}"
    )
    found: list[figures.Figure] = []
    with tempfile.TemporaryDirectory(prefix="rlsweep-bench-") as tmp:
        for name in names:
            quick, full = BENCHES[name]
            found += run_bench(name, full if args.full else quick, Path(tmp) / f"{name}.json")
    baseline = {} if args.baseline is None else {key(f): f for f in figures.read(args.baseline)}
    worse = table(found, baseline, args.tolerance)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    figures.write(args.out, found)
    if worse:
        raise SystemExit(f"a figure is worse than its baseline by more than {args.tolerance:.0%}")


if __name__ == "__main__":
    main()
