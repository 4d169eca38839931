"""What a process's start costs the test suite, and what starting it differently would save
(issue 31, the quiet suite): input for a decision, not a feature.

    python bench/process_start.py            # 5 rounds
    python bench/process_start.py --rounds 9

The suite is about 1,900 real processes. Measured here, interleaved, CPU-seconds each:

- ``python -c "import torch"``: what every loky worker of the built-in agents pays first;
- a sweep's process that has nothing to run (``python -m rlsweep -m ...`` over a finished
  sweep, ``report=false``): Python's start, the imports, Hydra's composition, the resume scan;
- the same command run in a process forked from one that already imported what it imports
  (Hydra, rlsweep's launcher and sweeper, numpy, gymnasium, joblib), the "zygote" way of
  starting processes: what such a start would save on each of them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import resource
import runpy
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from statistics import median

from rlsweep.numerics import cpu

SWEEP = [
    "-m",
    "agent=a2c",
    "seed=range(2)",
    "launcher=serial",
    "train.total_steps=1024",
    "eval.every_steps=512",
    "eval.episodes=3",
    "report=false",
]
IMPORT_TORCH = '`python -c "import torch"`'
FRESH = "sweep process, nothing to run, started fresh"
FORKED = "the same, forked from a process holding its imports"
PRELOAD = (
    "gymnasium",
    "hydra",
    "joblib",
    "numpy",
    "hydra_plugins.rlsweep_launcher.rlsweep_launcher",
    "hydra_plugins.rlsweep_launcher.rlsweep_sweeper",
    "rlsweep.app",
)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fresh(argv: list[str], cwd: Path) -> float:
    """CPU-seconds of ``python ARGV`` started as a user starts it."""
    before = _children_cpu()
    subprocess.run([sys.executable, *argv], cwd=cwd, check=True, capture_output=True, text=True)
    return _children_cpu() - before


def forked(cwd: Path) -> float:
    """CPU-seconds of ``python -m rlsweep SWEEP`` run in a child forked from this process."""
    pid = os.fork()
    if pid == 0:  # the child: the same command, from the parent's imports
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.chdir(cwd)
        sys.argv = ["rlsweep", *SWEEP]
        code = 1
        try:
            runpy.run_module("rlsweep", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        except BaseException:  # never back into the parent's code (its temporary directory)
            traceback.print_exc(file=sys.__stderr__)
        os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the forked sweep process failed: status {status}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="rlsweep-process-start-") as tmp:
        cwd = Path(tmp)
        fresh(["-m", "rlsweep", *SWEEP], cwd)  # the sweep, once: later runs find it done
        # What the sweep's process imports before it composes the config.
        for module in PRELOAD:
            importlib.import_module(module)

        figures: dict[str, list[float]] = {IMPORT_TORCH: [], FRESH: [], FORKED: []}
        for i in range(rounds):
            figures[IMPORT_TORCH].append(fresh(["-c", "import torch"], cwd))
            figures[FRESH].append(fresh(["-m", "rlsweep", *SWEEP], cwd))
            figures[FORKED].append(forked(cwd))
            print(f"round {i + 1}/{rounds}", file=sys.stderr)
    print(
        f"machine: {cpu()['model']}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {rounds} rounds\n"
    )
    print("| process | median CPU-s | min | max |")
    print("|---|---:|---:|---:|")
    for name, values in figures.items():
        print(f"| {name} | {median(values):.2f} | {min(values):.2f} | {max(values):.2f} |")
    print(f"\nforked / fresh: {median(figures[FORKED]) / median(figures[FRESH]):.2f}")


if __name__ == "__main__":
    main()
