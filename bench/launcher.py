"""Launcher overhead, side by side: rlsweep's joblib launcher against Hydra's joblib and basic launchers.

    python bench/launcher.py                 # (a) 64 and (b) 1,024 trivial jobs, (c) 16 x 2 s jobs
    python bench/launcher.py --sizes 64      # a quicker run
    python bench/launcher.py --own-jobs 32   # (d) also rlsweep's own job (tiny PPO runs)
    python bench/launcher.py --sizes 256 --cpu-jobs 0 --launchers rlsweep rlsweep-ray hydra-ray

Every configuration runs as a fresh ``python`` process (what a user runs), one after the
other, repeated ``--repeats`` times in alternating order; the table shows medians.

- wall: the whole command, start to exit.
- first job: from the command's start to the first job's start (a job stamps the time).
- overhead/job: (wall - the jobs' own time / workers) / jobs.
- efficiency: the jobs' own time / (wall x workers).
- after first/job: (wall - first job) / jobs, the cost of each job once jobs run.
- first-job growth: how much later the first job starts per extra job, between the
  smallest and the largest trivial grid (goal: at most 1 ms).

The Ray launchers (rlsweep's Ray executor, ``rlsweep-ray``, and hydra-ray-launcher 1.2.2,
``hydra-ray``) connect to one Ray cluster of this machine (a head node of 2 CPUs started with
``ray start --head`` before their first run, stopped at the end), as a workstation's
cluster is used; each job's environment reaches the cluster's workers through Ray's
``runtime_env``. Hydra's Ray launcher needs ``object_store_memory=null`` to connect to a
running cluster (hydra #2893).

Case (d) runs rlsweep's own task (PPO on CartPole, ``--own-steps`` env steps, no
report) through each launcher, from a copy of rlsweep's config that selects the launcher
and sweeper by Hydra's own groups; it shows the cost of importing torch and gymnasium in
fresh workers, which Hydra's joblib launcher pays again per batch.

Needs the benchmark extra: ``pip install -e '.[bench]'`` (hydra-joblib-launcher,
hydra-ray-launcher and Ray).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
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
    # With the cluster's address and the jobs' environment (ray_args).
    "rlsweep-ray": [
        "hydra/launcher=rlsweep",
        "hydra/sweeper=rlsweep",
        "hydra.launcher.executor=ray",
    ],
    "hydra-ray": ["hydra/launcher=ray", "+hydra.launcher.ray.init.object_store_memory=null"],
}
WORKERS = {"rlsweep": 2, "hydra-joblib": 2, "hydra-basic": 1, "rlsweep-ray": 2, "hydra-ray": 2}
RAY_CPUS = 2  # the bench's Ray cluster: one head node of this many CPUs


def ray_args(launcher: str, address: str | None, env: dict[str, str]) -> list[str]:
    """A Ray launcher's overrides: its cluster, and the jobs' environment (Ray's runtime_env)."""
    if launcher not in ("rlsweep-ray", "hydra-ray"):
        return []
    key = "address" if launcher == "rlsweep-ray" else "init.address"
    envs = [f"+hydra.launcher.ray.init.runtime_env.env_vars.{k}={v}" for k, v in env.items()]
    return [f"hydra.launcher.ray.{key}={address}", *envs]


@contextlib.contextmanager
def ray_head(wanted: bool) -> Iterator[str | None]:
    """A Ray head node of RAY_CPUS CPUs for the Ray launchers (its address), stopped after."""
    if not wanted:
        yield None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block"]
    command += [f"--port={port}", f"--num-cpus={RAY_CPUS}", "--num-gpus=0"]
    # No token authentication (Ray 2.60 turns it on when ~/.ray/auth_token exists, and a
    # driver given an explicit address does not send the token), here and in the sweeps.
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # no report to Ray's servers
    head = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        assert head.stdout is not None
        for line in head.stdout:
            if "Ray runtime started" in line:
                break
        else:
            raise RuntimeError("ray start --head ended before the cluster was up")
        threading.Thread(target=head.stdout.read, daemon=True).start()  # never a full pipe
        yield f"127.0.0.1:{port}"
    finally:
        head.terminate()  # ray start --block drains its node, then stops its processes
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=30)


@dataclass
class Measure:
    wall: float
    first: float
    busy: float  # sum of the jobs' own durations
    jobs: int


def run_sweep(
    launcher: str, args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[float, float]:
    """Run one bench sweep; when it started (``time.time()``, for the first job's delay)
    and its wall seconds. A failed sweep raises with its own stderr, not a bare
    CalledProcessError whose captured output is lost."""
    start = time.time()
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=cwd)
    wall = time.time() - start
    if done.returncode != 0:
        raise RuntimeError(
            f"{launcher}: the sweep exited with {done.returncode} (the Hydra launchers and "
            f"Ray come with pip install -e '.[bench]'):\n{done.stderr[-3000:]}"
        )
    return start, wall


def run_once(
    app: Path, launcher: str, jobs: int, work: float, tmp: Path, address: str | None = None
) -> Measure:
    stamps = tmp / f"stamps-{launcher}-{jobs}-{time.monotonic_ns()}"
    sweep = tmp / f"sweep-{time.monotonic_ns()}"
    args = [
        sys.executable,
        str(app),
        "-m",
        *LAUNCHERS[launcher],
        *ray_args(launcher, address, {"BENCH_STAMPS": str(stamps)}),
        f"+x=range({jobs})",
        f"+work={work}",
        f"hydra.sweep.dir={sweep}",
        "hydra/job_logging=disabled",
        "hydra/hydra_logging=disabled",
    ]
    start, wall = run_sweep(launcher, args, tmp, {**os.environ, "BENCH_STAMPS": str(stamps)})
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


def run_own(
    app: Path, launcher: str, jobs: int, steps: int, tmp: Path, address: str | None = None
) -> Measure:
    """rlsweep's own task: the jobs' own time is each job's wall_time_s from result.json."""
    sweep = tmp / f"own-{time.monotonic_ns()}"
    args = [sys.executable, str(app), "-m", *LAUNCHERS[launcher], f"seed=range({jobs})"]
    args += ray_args(launcher, address, {})
    args += [f"train.total_steps={steps}", f"eval.every_steps={steps}", "eval.episodes=2"]
    args += [f"hydra.sweep.dir={sweep}"]
    start, wall = run_sweep(launcher, args, tmp)
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
    with (
        tempfile.TemporaryDirectory() as d,
        ray_head(any(name.endswith("-ray") for name in args.launchers)) as address,
    ):
        tmp = Path(d)
        app = tmp / "app.py"
        app.write_text(APP)
        own = own_config(tmp)
        base_name = "hydra-joblib" if "hydra-joblib" in args.launchers else args.launchers[0]
        print(
            f"| case | launcher | wall s | vs {base_name} | first job s | overhead/job ms "
            "| after first/job ms | efficiency |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for title, jobs, work in cases:
            runs: dict[str, list[Measure]] = {name: [] for name in args.launchers}
            for rep in range(args.repeats):
                order = args.launchers if rep % 2 == 0 else list(reversed(args.launchers))
                for name in order:
                    if work < 0:
                        runs[name].append(run_own(own, name, jobs, args.own_steps, tmp, address))
                    else:
                        runs[name].append(run_once(app, name, jobs, work, tmp, address))
            base = statistics.median(m.wall for m in runs[base_name])
            for name, ms in runs.items():
                wall = statistics.median(m.wall for m in ms)
                first = statistics.median(m.first for m in ms)
                busy = statistics.median(m.busy for m in ms)
                workers = WORKERS[name]
                overhead = (wall - busy / workers) / jobs * 1000
                after = (wall - first) / jobs * 1000
                efficiency = busy / (wall * workers)
                if name == "rlsweep" and work == 0.0:
                    first_by_size[jobs] = first
                print(
                    f"| {title} | {name} | {wall:.2f} | {wall / base:.2f} | {first:.2f} | "
                    f"{overhead:.1f} | {after:.1f} | {efficiency:.2f} |",
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
