"""rlsweep's speed-up over each anchor across ``bench/all.py`` runs, as one plot.

    python bench/plot_results.py bench/results-2026-11-26.json \\
        bench/results-2026-11-26-gradients-full.json --out bench/speedups.png

Each file is an ``all.py --out``; each figure measured against an anchor in the same run
becomes a group of bars, one per run (oldest first, as given): the speed-up, anchor time
/ rlsweep time or rlsweep rate / anchor rate, so higher is faster. A goal stated as a
ratio (``ratio <= 0.33``, ``ratio >= 4``) is drawn as a tick at the speed-up it asks for.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import figures  # bench/figures.py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

GOAL = re.compile(r"ratio ([<>]=) ([0-9.]+)")


def speedup(f: figures.Figure) -> float:
    """How many times faster than the anchor (above 1: rlsweep is faster)."""
    assert f.ratio is not None
    return 1.0 / f.ratio if f.lower_is_better else f.ratio


def goal_speedup(f: figures.Figure) -> float | None:
    """The speed-up a ratio goal asks for (None: the goal is not a ratio)."""
    m = GOAL.search(f.goal)
    if m is None:
        return None
    return 1.0 / float(m.group(2)) if f.lower_is_better else float(m.group(2))


def speed_figures(path: Path) -> dict[str, figures.Figure]:
    """A run's figures that compare speed with an anchor (not the returns)."""
    return {
        f"{f.bench}: {f.figure}": f
        for f in figures.read(path)
        if f.ratio is not None and not f.goal.startswith("as good")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="all.py --out files, oldest first")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    args = parser.parse_args()
    runs = [(path.stem.removeprefix("results-"), speed_figures(path)) for path in args.runs]
    names = list(dict.fromkeys(name for _, found in runs for name in found))
    height = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(9, 0.9 * len(names) + 1.2))
    for i, (label, found) in enumerate(runs):
        rows = [n for n, name in enumerate(names) if name in found]
        values = [speedup(found[names[n]]) for n in rows]
        bars = ax.barh([n + i * height for n in rows], values, height, label=label)
        ax.bar_label(bars, labels=[f"{v:.2f}x" for v in values], fontsize=7, padding=2)
    for n, name in enumerate(names):
        goal = next((goal_speedup(f[name]) for _, f in runs if name in f), None)
        if goal is not None:
            ax.plot([goal, goal], [n - height / 2, n + 0.8 - height / 2], color="black", lw=2)
    ax.plot([], [], color="black", lw=2, label="issue 19's goal")
    ax.set_yticks([n + 0.4 - height / 2 for n in range(len(names))], names, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("speed-up over the anchor measured in the same run (higher is faster)")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
