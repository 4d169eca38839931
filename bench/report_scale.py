"""The end-of-sweep summary and report of a hyperparameter grid: time and peak memory against
the number of groups (issue 31, item 0).

    python bench/report_scale.py                       # the written grids and a real sweep
    python bench/report_scale.py --grids 1000x1 100x5  # the written grids only (--real 0)
    python bench/report_scale.py --real 256 --grids    # a real 256-job sweep only

- *written grids* (``GROUPSxREPLICATES``): job directories written as rlsweep's launcher
  leaves them for a trivial third-party app swept over ``x=range(GROUPS)`` and
  ``seed=range(REPLICATES)`` (result.json with the job's identity, ``.hydra/`` records, a
  ``metrics.csv`` of 5 logged steps), then ``rlsweep.summary.summarize`` (summary table,
  report.md/.html, plots, the tidy table) in a fresh process: its wall time and its peak
  resident memory (the whole process: Python, numpy, matplotlib and pyarrow included);
- *real sweep* (``--real N``): ``python app.py -m +rlsweep=joblib 'x=range(N)'`` of a trivial
  app that imports nothing from rlsweep, end to end (jobs, summary and report), in a fresh
  directory: the command's wall time, the summary's (from ``RLSWEEP_TRACE``) and the peak
  resident memory of the sweep's process tree's largest process.

The goal (issue 31): each written grid of 1,000 x 1 and 100 x 5 within 10 s and 500 MB.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

APP = """
import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path=None, config_name=None)
def main(cfg: DictConfig) -> dict[str, float]:
    return {"score": float(cfg.x) * 0.01 + 0.001 * float(cfg.get("seed", 0))}


if __name__ == "__main__":
    main()
"""

# The peak is this program's high-water mark (VmHWM): ru_maxrss would start from the
# parent's peak, which Linux carries across fork and exec.
SUMMARIZE = """
import re, sys, time
from pathlib import Path
start = time.perf_counter()
from rlsweep.summary import summarize
summarize(Path(sys.argv[1]), echo=False)
wall = time.perf_counter() - start
hwm = re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text())
print(wall, int(hwm.group(1)) / 1024)
"""


def write_job(sweep: Path, x: int, seed: int, steps: int) -> None:
    """One job directory of ``x`` and replicate ``seed``, as rlsweep's launcher leaves it."""
    job = sweep / f"seed={seed},x={x}"
    (job / ".hydra").mkdir(parents=True)
    config = {"x": x, "seed": seed, "lr": 0.1}
    (job / ".hydra" / "config.yaml").write_text(json.dumps(config) + "\n")  # JSON is YAML
    (job / ".hydra" / "overrides.yaml").write_text(f"- +rlsweep=joblib\n- x={x}\n- seed={seed}\n")
    score = 0.01 * x + 0.001 * ((seed * 7919 + x) % 97)
    if steps:
        rows = [f"{s * 100},{score * (s + 1) / steps:.6f}" for s in range(steps)]
        (job / "metrics.csv").write_text("step,score\n" + "\n".join(rows) + "\n")
    identity = {
        "format": 1,
        "config": config,
        "replicate": seed,
        "root": 0,
        "shared": {"x": x, "lr": 0.1},
        "agent": {},
        "crn": True,
        "threads": 1,
    }
    # rlsweep's record: the SHA-256 of the identity's canonical JSON (what the report checks).
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    digest = hashlib.sha256(text.encode("ascii")).hexdigest()
    record = {"score": score, "rlsweep": {"identity": digest, "job": identity}}
    (job / "result.json").write_text(json.dumps(record))


def write_grid(sweep: Path, groups: int, replicates: int, steps: int = 5) -> Path:
    """``groups`` x ``replicates`` job directories in ``sweep``."""
    for x in range(groups):
        for seed in range(replicates):
            write_job(sweep, x, seed, steps)
    return sweep


def summarize_grid(sweep: Path) -> tuple[float, float]:
    """(seconds, peak MB) of the summary and report of ``sweep``, in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", SUMMARIZE, str(sweep)],
        capture_output=True,
        text=True,
        check=True,
    )
    wall, peak = done.stdout.split()[-2:]
    return float(wall), float(peak)


def real_sweep(jobs: int, tmp: Path) -> tuple[float, float, float]:
    """(command seconds, summary seconds, peak MB of the largest process) of a real sweep."""
    (tmp / "app.py").write_text(APP)
    trace = tmp / "trace.txt"
    env = {**os.environ, "RLSWEEP_TRACE": str(trace)}
    command = [sys.executable, "app.py", "-m", "+rlsweep=joblib", f"+x=range({jobs})"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(command, cwd=tmp, env=env, capture_output=True, check=True)
    wall = time.perf_counter() - start
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    events = [line.split() for line in trace.read_text().splitlines()]
    when = {name: float(t) for t, _, name in events if name in ("summary-start", "summary-end")}
    return wall, when["summary-end"] - when["summary-start"], peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--grids", nargs="*", default=["16x1", "64x1", "256x1", "1000x1",
                                                        "100x5"])  # fmt: skip
    parser.add_argument("--real", type=int, default=256, help="jobs of the real sweep (0: none)")
    args = parser.parse_args(argv)
    print("| sweep | jobs | summary and report s | peak MB |")
    print("|---|---:|---:|---:|")
    for grid in args.grids:
        groups, replicates = map(int, grid.split("x"))
        with tempfile.TemporaryDirectory() as d:
            sweep = write_grid(Path(d) / "sweep", groups, replicates)
            wall, peak = summarize_grid(sweep)
        print(f"| written {groups} x {replicates} | {groups * replicates} | {wall:.2f} | "
              f"{peak:.0f} |", flush=True)  # fmt: skip
    if args.real:
        with tempfile.TemporaryDirectory() as d:
            wall, summary, peak = real_sweep(args.real, Path(d))
        print(f"| real `+x=range({args.real})`, end to end {wall:.2f} s | {args.real} | "
              f"{summary:.2f} | {peak:.0f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
