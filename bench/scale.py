"""A 10,000-job sweep of a trivial app (issue 19, goal 5): what grows with the number of jobs.

    python bench/scale.py                    # 4 algos x 5 lrs x seed=range(500): 10,000 jobs
    python bench/scale.py --seeds 50         # 1,000 jobs, a quicker look
    python bench/scale.py --anchor-seeds 0   # rlsweep only

The app uses rlsweep's public API (``@rlsweep.task``, three ``job.log`` calls, a returned
score), opts in with ``+rlsweep=joblib`` (2 workers) and does no work, so every figure is
the engine's. Each command is a fresh ``python`` process in a fresh directory, with
``RLSWEEP_TRACE`` set (rlsweep/trace.py):

- first job: the command's start -> the first job's start, which each job stamps
  (planning 10,000 jobs, naming and checking them, starting the workers);
- parent memory: the sweep process's peak resident memory (``VmHWM``, read until it exits;
  the workers are other processes);
- summary: the end-of-sweep step (summary table, report.md/.html, plots) over every job;
- resume: the same command again in the same directory, which skips every finished job:
  its start -> the summary's start, and its whole wall time.

The anchor, run in the same command: the same app under Hydra's own basic sweeper and
launcher (``hydra/launcher=basic``: every job in its one process; no summary, no resume),
for its first job and its memory. Hydra's basic launcher takes about 0.25 s a job here, so
its grid is ``--anchor-seeds`` replicates a point (default 50: 1,000 jobs), said in the
table.

Goals (issue 19): first job <= 5 s, parent memory < 1 GB, summary <= 60 s, resume <= 10 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import figures  # bench/figures.py

from rlsweep.numerics import cpu

APP = """
import os
import time

import hydra
from omegaconf import DictConfig

import rlsweep


@hydra.main(version_base="1.3", config_path=None, config_name="config")
@rlsweep.task(keys=rlsweep.Keys(agent=("algo", "lr")))
def main(cfg: DictConfig) -> dict[str, float]:
    with open(os.environ["SCALE_STAMPS"], "a") as f:  # when each job started
        f.write(f"{time.time()}\\n")
    job = rlsweep.current()
    score = float(job.seeds.generator("score").random()) + cfg.lr
    for step in (1, 2, 3):
        job.log(step * 1000, episode_return=score * step)
    return {"final_return": score}


if __name__ == "__main__":
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="config", node={"algo": "a", "lr": 0.1, "seed": 0})
    main()
"""

ALGOS = ("a", "b", "c", "d")
LRS = ("0.1", "0.01", "0.001", "0.0001", "0.00001")
LAUNCHERS = {
    "rlsweep": ["+rlsweep=joblib", "hydra.launcher.n_jobs=2"],
    "hydra-basic": ["hydra/launcher=basic"],
}
GOALS = {
    "first job (s)": 5.0,
    "parent memory (MB)": 1000.0,
    "summary (s)": 60.0,
    "resume (s)": 10.0,
}


@dataclass
class Run:
    wall: float
    first: float  # the command's start -> the first job's stamp
    peak_mb: float  # the command's process's peak resident memory
    summary: float  # summary-start -> summary-end (nan without one)
    to_summary: float  # the command's start -> summary-start (nan without one)


def peak_rss_mb(pid: int, stop: threading.Event, out: list[float]) -> None:
    """Poll ``VmHWM`` (the peak resident set) of ``pid`` until it exits."""
    status = Path(f"/proc/{pid}/status")
    while not stop.is_set():
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    out.append(int(line.split()[1]) / 1024)
        except (FileNotFoundError, ProcessLookupError):
            return
        stop.wait(0.05)


def run(args: list[str], cwd: Path, trace: Path) -> Run:
    stamps = cwd / "stamps.txt"
    trace.unlink(missing_ok=True)
    stamps.unlink(missing_ok=True)
    env = {**os.environ, "RLSWEEP_TRACE": str(trace), "SCALE_STAMPS": str(stamps)}
    start = time.time()
    proc = subprocess.Popen(
        [sys.executable, str(cwd / "app.py"), "-m", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    peaks: list[float] = []
    stop = threading.Event()
    watcher = threading.Thread(target=peak_rss_mb, args=(proc.pid, stop, peaks), daemon=True)
    watcher.start()
    _, err = proc.communicate()
    wall = time.time() - start
    stop.set()
    watcher.join()
    if proc.returncode != 0:
        raise SystemExit(f"the sweep failed ({proc.returncode}):\n{err[-3000:]}")
    events = [line.split() for line in trace.read_text().splitlines()] if trace.exists() else []

    def times(name: str) -> list[float]:
        return [float(t) for t, _, e in events if e == name]

    tasks = [float(t) for t in stamps.read_text().split()] if stamps.exists() else []
    s_start, s_end = times("summary-start"), times("summary-end")
    nan = float("nan")
    return Run(
        wall=wall,
        first=min(tasks) - start if tasks else nan,
        peak_mb=max(peaks, default=nan),
        summary=max(s_end) - min(s_start) if s_start and s_end else nan,
        to_summary=min(s_start) - start if s_start else nan,
    )


def grid(seeds: int) -> list[str]:
    """The sweep's overrides: every algo x lr, ``seeds`` replicates each."""
    return [f"algo={','.join(ALGOS)}", f"lr={','.join(LRS)}", f"seed=range({seeds})"]


def verdict(name: str, value: float) -> str:
    return "met" if value <= GOALS[name] else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=500, help="replicates per grid point")
    parser.add_argument("--anchor-seeds", type=int, default=50, help="0: no anchor")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    points = len(ALGOS) * len(LRS)
    print(f"{points * args.seeds:,} jobs: app.py -m {' '.join(grid(args.seeds))}")
    print(
        f"machine: {cpu()['model']}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at the start"
    )
    rows_by_name: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="rlsweep-scale-") as tmp:
        for name, launcher in LAUNCHERS.items():
            seeds = args.seeds if name == "rlsweep" else args.anchor_seeds
            if seeds == 0:
                continue
            cwd = Path(tmp) / name
            cwd.mkdir()
            (cwd / "app.py").write_text(APP)
            trace = cwd / "trace.txt"
            command = [*grid(seeds), *launcher]
            first = run(command, cwd, trace)
            print(f"{name}: ran {points * seeds:,} jobs in {first.wall:.1f} s", flush=True)
            row = {
                "jobs": points * seeds,
                "first job (s)": first.first,
                "parent memory (MB)": first.peak_mb,
                "wall (s)": first.wall,
            }
            if name == "rlsweep":
                again = run(command, cwd, trace)
                print(f"{name}: resumed in {again.wall:.1f} s", flush=True)
                row |= {
                    "summary (s)": first.summary,
                    "resume (s)": again.wall,
                    "resume to summary (s)": again.to_summary,
                    "resume parent memory (MB)": again.peak_mb,
                }
            rows_by_name[name] = row
    names = list(dict.fromkeys(k for row in rows_by_name.values() for k in row))
    print("\n| figure | " + " | ".join(rows_by_name) + " | goal |")
    print("| --- " + "| ---: " * (len(rows_by_name) + 1) + "|")
    for key in names:
        cells = [f"{row[key]:,.2f}" if key in row else "-" for row in rows_by_name.values()]
        goal = rows_by_name["rlsweep"].get(key)
        mark = (
            f"<= {GOALS[key]:g}: {verdict(key, goal)}" if key in GOALS and goal is not None else ""
        )
        print(f"| {key} | " + " | ".join(cells) + f" | {mark} |")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    figures.write(args.json, found(rows_by_name, args.seeds == args.anchor_seeds))


def found(rows: dict[str, dict[str, float]], same_jobs: bool) -> list[figures.Figure]:
    """The goals' figures for ``bench/all.py``; Hydra's basic launcher is their anchor only
    where it ran the same jobs (its first job and memory)."""
    ours, anchor = rows["rlsweep"], rows.get("hydra-basic", {})
    jobs = int(ours["jobs"])
    return [
        figures.Figure(
            bench="scale",
            figure=f"{name}, {jobs:,} jobs",
            rlsweep=ours[name],
            anchor=anchor.get(name) if same_jobs else None,
            anchor_name="Hydra basic launcher" if same_jobs and name in anchor else "",
            lower_is_better=True,
            goal=f"<= {GOALS[name]:g} (at 10,000 jobs)",
            met=ours[name] <= GOALS[name],
        )
        for name in GOALS
    ]


if __name__ == "__main__":
    main()
