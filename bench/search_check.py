"""Issue 18's search check, end to end on rlsweep's PPO: does the search command find a
learning rate as good as the best of a 16-point grid, the same twice, and the same when
interrupted and resumed?

    python bench/search_check.py [--workdir DIR] [--trials 16] [--replicates 3]

Runs, in ``--workdir`` (each into its own sweep directory, so nothing is shared):

1. the search ``python -m rlsweep -m +preset=ppo_cartpole
   'agent.learning_rate=interval(1e-4,1e-2)' search.trials=16 search.replicates=3``;
2. the same command again, from scratch;
3. the same command interrupted (SIGINT, as Ctrl-C) after a third of its jobs, then run
   again to resume;
4. the grid of 16 log-spaced learning rates over the same range, 3 replicates each;

and prints each step's wall time, whether 2 and 3 give the search.json trials of 1, and the
search's best IQM against the 95% bootstrap interval of the grid's best point (IQM over its
3 replicates). Finished steps are kept: running it again resumes (each sweep skips its
completed jobs). Exits non-zero if a check fails.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rlsweep.stats import iqm
from rlsweep.stats.bootstrap import bootstrap_ci

SPACE = "agent.learning_rate=interval(1e-4,1e-2)"


def search_command(name: str, trials: int, replicates: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rlsweep",
        "-m",
        "+preset=ppo_cartpole",
        SPACE,
        f"search.trials={trials}",
        f"search.replicates={replicates}",
        f"name={name}",
    ]


def run(command: list[str], cwd: Path, log: Path) -> float:
    start = time.monotonic()
    with log.open("a") as out:
        proc = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {proc.returncode}: see {log}")
    return time.monotonic() - start


def interrupted(command: list[str], cwd: Path, sweep: Path, after: int, log: Path) -> float:
    """Run ``command``, SIGINT it once ``after`` jobs have results, then run it again."""
    start = time.monotonic()
    if not (sweep / "search.json").exists():
        with log.open("a") as out:
            proc = subprocess.Popen(
                command,
                cwd=cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                # Ctrl-C works even if this script was started with SIGINT ignored (nohup &).
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
            while len(list(sweep.glob("*/result.json"))) < after and proc.poll() is None:
                time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            code = proc.wait()
        print(f"  interrupted with {len(list(sweep.glob('*/result.json')))} results (exit {code})")
    return time.monotonic() - start + run(command, cwd, log)


def trials(sweep: Path) -> tuple[list[dict[str, Any]], int]:
    """A search's trials and its best trial's number."""
    data = json.loads((sweep / "search.json").read_text())
    return list(data["trials"]), int(data["best"])


def grid(cwd: Path, replicates: int, log: Path) -> tuple[float, dict[float, list[float]]]:
    rates = [float(f"{x:.4g}") for x in np.geomspace(1e-4, 1e-2, 16)]
    command = [
        sys.executable,
        "-m",
        "rlsweep",
        "-m",
        "+preset=ppo_cartpole",
        "agent.learning_rate=" + ",".join(repr(r) for r in rates),
        f"seed=range({replicates})",
        "name=grid16",
    ]
    wall = run(command, cwd, log)
    values: dict[float, list[float]] = {r: [] for r in rates}
    for path in sorted((cwd / "multirun" / "grid16").glob("*/result.json")):
        result = json.loads(path.read_text())
        values[float(result["config"]["agent"]["learning_rate"])].append(result["final_return"])
    return wall, values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/rlsweep_search_check"))
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--replicates", type=int, default=3)
    args = parser.parse_args()
    cwd = args.workdir
    cwd.mkdir(parents=True, exist_ok=True)
    log = cwd / "log.txt"
    n, r = args.trials, args.replicates
    walls = {"search": run(search_command("search_a", n, r), cwd, log)}
    print(f"search: {walls['search']:.0f} s")
    walls["again"] = run(search_command("search_b", n, r), cwd, log)
    print(f"search again: {walls['again']:.0f} s")
    sweep_c = cwd / "multirun" / "search_c"
    walls["resumed"] = interrupted(search_command("search_c", n, r), cwd, sweep_c, n * r // 3, log)
    print(f"search interrupted and resumed: {walls['resumed']:.0f} s")
    walls["grid"], values = grid(cwd, r, log)
    print(f"grid: {walls['grid']:.0f} s")
    a, best = trials(cwd / "multirun" / "search_a")
    same_again = trials(cwd / "multirun" / "search_b") == (a, best)
    same_resumed = trials(sweep_c) == (a, best)
    point = {lr: iqm(v) for lr, v in values.items()}
    top = max(point, key=lambda lr: (point[lr], -lr))
    _, low, high = bootstrap_ci(np.asarray(values[top]), iqm, reps=10_000, seed=0)
    found = a[best]["objective"]
    within = low <= found <= high or found >= high
    print()
    print("| check | figure |")
    print("|---|---|")
    print(f"| search best | lr={a[best]['params']} IQM {found:.2f} over {r} replicates |")
    print(f"| grid best | lr={top} IQM {point[top]:.2f}, 95% CI [{low:.2f}, {high:.2f}] |")
    print(f"| search best within (or above) the grid best's interval | {within} |")
    print(f"| second run: same trials and numbers | {same_again} |")
    print(f"| interrupted and resumed: same trials and numbers | {same_resumed} |")
    print(f"| walls (s) | {', '.join(f'{k} {v:.0f}' for k, v in walls.items())} |")
    print("\ngrid: " + ", ".join(f"{lr:g}: {point[lr]:.1f}" for lr in sorted(point)))
    if not (within and same_again and same_resumed):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
