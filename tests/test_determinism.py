"""Seeding property 1: a job's result does not depend on how the sweep was run."""

from __future__ import annotations

import csv
from pathlib import Path

from conftest import NO_REPORT, TINY, results, run_clis

GRID = ("-m", "agent=a2c,ppo", "seed=0,1", *TINY, NO_REPORT)


def metrics_without_wall_time(job_dir: Path) -> list[list[str]]:
    with (job_dir / "metrics.csv").open() as f:
        rows = list(csv.reader(f))
    col = rows[0].index("wall_time")
    return [r[:col] + r[col + 1 :] for r in rows]


def fingerprint(sweep_dir: Path) -> dict[str, tuple[object, ...]]:
    out: dict[str, tuple[object, ...]] = {}
    for name, res in results(sweep_dir).items():
        out[name] = (
            res["final_episode_returns"],
            res["state_sha256"],
            metrics_without_wall_time(sweep_dir / name),
            (sweep_dir / name / "seeds.json").read_text(),
        )
    return out


def test_results_bitwise_identical_across_launchers_orders_and_workers(workdir: Path) -> None:
    grid = [*GRID]
    reversed_grid = ["-m", "agent=ppo,a2c", "seed=1,0", *TINY, NO_REPORT]
    runs = run_clis(
        {
            "serial": ([*grid, "launcher=serial", "name=serial"], workdir, None),
            "joblib2": ([*grid, "n_jobs=2", "name=joblib2"], workdir, None),
            # One worker runs all four jobs in turn, in reverse order: every job after the
            # first starts in a worker whose global RNGs earlier jobs have advanced.
            "joblib1_reversed": (
                [*reversed_grid, "n_jobs=1", "name=joblib1_reversed"],
                workdir,
                {"PYTHONHASHSEED": "123"},
            ),
            "multiprocessing_fork": (
                [
                    *grid,
                    "hydra.launcher.backend=multiprocessing",
                    "hydra.launcher.start_method=fork",
                    "name=multiprocessing_fork",
                ],
                workdir,
                {"PYTHONHASHSEED": "7"},
            ),
            # Jobs side by side in threads of one process: no shared RNG may leak between them.
            "threading": (
                [*grid, "hydra.launcher.backend=threading", "name=threading"],
                workdir,
                None,
            ),
        },
        max_at_once=5,
    )
    for name, proc in runs.items():
        assert proc.returncode == 0, f"{name}: {proc.stderr[-3000:]}"
    prints = {name: fingerprint(workdir / "multirun" / name) for name in runs}
    reference = prints["serial"]
    assert len(reference) == 4
    for name, fp in prints.items():
        assert fp == reference, f"{name} differs from serial"
    # The four jobs are genuinely different (the comparison above is not vacuous).
    assert len({v[1] for v in reference.values()}) == 4
