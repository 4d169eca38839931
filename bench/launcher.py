"""Launcher overhead, side by side: rlsweep's joblib launcher against Hydra's joblib and basic launchers.

    python bench/launcher.py                 # (a) 64 and (b) 1,024 trivial jobs, (c) 16 x 2 s jobs
    python bench/launcher.py --sizes 64      # a quicker run
    python bench/launcher.py --own-jobs 32   # (d) also rlsweep's own job (tiny PPO runs)

Every configuration runs as a fresh ``python`` process (what a user runs), one after the
other, repeated ``--repeats`` times in alternating order; the table shows medians.

- wall: the whole command, start to exit.
- first job: from the command's start to the first job's start (a job stamps the time).
- overhead/job: (wall - the jobs' own time / workers) / jobs.
- efficiency: the jobs' own time / (wall x workers).
- first-job growth: how much later the first job starts per extra job, between the
  smallest and the largest trivial grid (goal: at most 1 ms).

Case (d) runs rlsweep's own task (PPO on CartPole, ``--own-steps`` env steps, no
report) through each launcher, from a copy of rlsweep's config that selects the launcher
and sweeper by Hydra's own groups; it shows the cost of importing torch and gymnasium in
fresh workers, which Hydra's joblib launcher pays again per batch.

Needs the benchmark extra: ``pip install -e '.[bench]'`` (hydra-joblib-launcher).
"""

from __future__ import annotations

import argparse
import json
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

OWN_APP = """
import hydra
from rlsweep.app import agent_task

if __name__ == "__main__":
    hydra.main(config_path="{config_dir}", config_name="own", version_base="1.3")(agent_task)()
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


def own_config(tmp: Path) -> Path:
    """rlsweep's config.yaml without its launcher and sweeper choices (so that Hydra's
    launchers can run it), with rlsweep's conf/ on the search path for agents and envs."""
    import yaml

    from rlsweep.paths import conf_dir

    cfg = yaml.safe_load((conf_dir() / "config.yaml").read_text())
    cfg["defaults"] = [
        d
        for d in cfg["defaults"]
        if not (isinstance(d, dict) and ("launcher" in d or "override hydra/sweeper" in d))
    ]
    cfg["hydra"].pop("sweeper", None)
    cfg["hydra"]["searchpath"] = [f"file://{conf_dir()}"]
    (tmp / "own.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    app = tmp / "own_app.py"
    app.write_text(OWN_APP.format(config_dir=tmp.absolute()))
    return app


def run_own(app: Path, launcher: str, jobs: int, steps: int, tmp: Path) -> Measure:
    """rlsweep's own task: the jobs' own time is each job's wall_time_s from result.json."""
    sweep = tmp / f"own-{time.monotonic_ns()}"
    args = [sys.executable, str(app), "-m", *LAUNCHERS[launcher], f"seed=range({jobs})"]
    args += [f"train.total_steps={steps}", f"eval.every_steps={steps}", "eval.episodes=2"]
    args += [f"hydra.sweep.dir={sweep}"]
    start = time.time()
    subprocess.run(args, check=True, capture_output=True, cwd=tmp)
    wall = time.time() - start
    results = [json.loads(p.read_text()) for p in sweep.glob("*/result.json")]
    if len(results) != jobs:
        raise RuntimeError(f"{launcher}: {len(results)} of {jobs} jobs completed")
    starts = [p.stat().st_mtime for p in sweep.glob("*/seeds.json")]  # written first
    busy = sum(float(r["wall_time_s"]) for r in results)
    return Measure(wall, min(starts) - start, busy, jobs)


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
    parser.add_argument("--own-jobs", type=int, default=0, help="rlsweep's own jobs in (d)")
    parser.add_argument("--own-steps", type=int, default=512, help="env steps per job in (d)")
    args = parser.parse_args(argv)

    cases = [(f"trivial x {n}", n, 0.0) for n in args.sizes]
    if args.cpu_jobs > 0:
        cases.append(
            (f"{args.cpu_seconds:g} s CPU x {args.cpu_jobs}", args.cpu_jobs, args.cpu_seconds)
        )
    if args.own_jobs > 0:
        cases.append((f"rlsweep PPO job x {args.own_jobs}", args.own_jobs, -1.0))
    first_by_size: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        app = tmp / "app.py"
        app.write_text(APP)
        own = own_config(tmp)
        print(
            "| case | launcher | wall s | vs hydra-joblib | first job s | overhead/job ms | efficiency |"
        )
        print("|---|---|---|---|---|---|---|")
        for title, jobs, work in cases:
            runs: dict[str, list[Measure]] = {name: [] for name in args.launchers}
            for rep in range(args.repeats):
                order = args.launchers if rep % 2 == 0 else list(reversed(args.launchers))
                for name in order:
                    if work < 0:
                        runs[name].append(run_own(own, name, jobs, args.own_steps, tmp))
                    else:
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
                if name == "rlsweep" and work == 0.0:
                    first_by_size[jobs] = first
                print(
                    f"| {title} | {name} | {wall:.2f} | {wall / base:.2f} | {first:.2f} | "
                    f"{overhead:.1f} | {efficiency:.2f} |",
                    flush=True,
                )
    if len(first_by_size) >= 2:
        small, large = min(first_by_size), max(first_by_size)
        growth = (first_by_size[large] - first_by_size[small]) / (large - small) * 1000
        print(
            f"\nrlsweep first-job growth: {growth:.2f} ms per job between {small} and {large} "
            f"trivial jobs (goal: at most 1 ms)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
