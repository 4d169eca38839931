"""Launcher overhead, side by side: rlsweep's joblib launcher against Hydra's joblib and basic launchers.

    python bench/launcher.py                 # (a) 64 and (b) 1,024 trivial jobs, (c) 16 x 2 s jobs
    python bench/launcher.py --sizes 64      # a quicker run

Every configuration runs as a fresh ``python`` process (what a user runs), one after the
other, repeated ``--repeats`` times in alternating order; the table shows medians.

- wall: the whole command, start to exit.
- first job: from the command's start to the first job's start (a job stamps the time).
- overhead/job: (wall - the jobs' own time / workers) / jobs.
- efficiency: the jobs' own time / (wall x workers).

Needs the benchmark extra: ``pip install -e '.[bench]'`` (hydra-joblib-launcher).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

APP = """
import os, time
import hydra
from omegaconf import DictConfig

@hydra.main(version_base="1.3", config_path=None, config_name=None)
def main(cfg: DictConfig) -> None:
    start = time.time()
    work = float(cfg.get("work", 0.0))
    end_cpu = time.process_time() + work
    while time.process_time() < end_cpu:  # CPU-bound, as an RL job is
        pass
    with open(os.environ["BENCH_STAMPS"], "a") as f:
        f.write(f"{start} {time.time()}\\n")

if __name__ == "__main__":
    main()
"""

LAUNCHERS = {
    "rlsweep": ["hydra/launcher=rlsweep", "hydra/sweeper=rlsweep", "hydra.launcher.n_jobs=2"],
    "hydra-joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
    "hydra-basic": ["hydra/launcher=basic"],
}
WORKERS = {"rlsweep": 2, "hydra-joblib": 2, "hydra-basic": 1}


@dataclass
class Measure:
    wall: float
    first: float
    busy: float  # sum of the jobs' own durations
    jobs: int


def run_once(app: Path, launcher: str, jobs: int, work: float, tmp: Path) -> Measure:
    stamps = tmp / f"stamps-{launcher}-{jobs}-{time.monotonic_ns()}"
    sweep = tmp / f"sweep-{time.monotonic_ns()}"
    args = [
        sys.executable,
        str(app),
        "-m",
        *LAUNCHERS[launcher],
        f"+x=range({jobs})",
        f"+work={work}",
        f"hydra.sweep.dir={sweep}",
        "hydra/job_logging=disabled",
        "hydra/hydra_logging=disabled",
    ]
    env = {**os.environ, "BENCH_STAMPS": str(stamps)}
    start = time.time()
    subprocess.run(args, env=env, check=True, capture_output=True, cwd=tmp)
    wall = time.time() - start
    rows = [tuple(map(float, line.split())) for line in stamps.read_text().splitlines()]
    if len(rows) != jobs:
        raise RuntimeError(f"{launcher}: {len(rows)} of {jobs} jobs ran")
    return Measure(wall, min(r[0] for r in rows) - start, sum(r[1] - r[0] for r in rows), jobs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=int, nargs="*", default=[64, 1024], help="trivial-job counts"
    )
    parser.add_argument("--cpu-jobs", type=int, default=16, help="CPU-bound jobs in (c)")
    parser.add_argument("--cpu-seconds", type=float, default=2.0, help="CPU seconds per job in (c)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--launchers", nargs="*", default=list(LAUNCHERS))
    args = parser.parse_args(argv)

    cases = [(f"trivial x {n}", n, 0.0) for n in args.sizes]
    if args.cpu_jobs > 0:
        cases.append(
            (f"{args.cpu_seconds:g} s CPU x {args.cpu_jobs}", args.cpu_jobs, args.cpu_seconds)
        )
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        app = tmp / "app.py"
        app.write_text(APP)
        print(
            "| case | launcher | wall s | vs hydra-joblib | first job s | overhead/job ms | efficiency |"
        )
        print("|---|---|---|---|---|---|---|")
        for title, jobs, work in cases:
            runs: dict[str, list[Measure]] = {name: [] for name in args.launchers}
            for rep in range(args.repeats):
                order = args.launchers if rep % 2 == 0 else list(reversed(args.launchers))
                for name in order:
                    runs[name].append(run_once(app, name, jobs, work, tmp))
            base = statistics.median(
                m.wall for m in runs.get("hydra-joblib", runs[args.launchers[0]])
            )
            for name, ms in runs.items():
                wall = statistics.median(m.wall for m in ms)
                first = statistics.median(m.first for m in ms)
                busy = statistics.median(m.busy for m in ms)
                workers = WORKERS[name]
                overhead = (wall - busy / workers) / jobs * 1000
                efficiency = busy / (wall * workers)
                print(
                    f"| {title} | {name} | {wall:.2f} | {wall / base:.2f} | {first:.2f} | "
                    f"{overhead:.1f} | {efficiency:.2f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
