"""Where the test suite's time goes: CPU-seconds by test file (issue 31, the quiet suite).

    python bench/suite_cpu.py                   # the whole suite, as scripts/test.sh runs it
    python bench/suite_cpu.py tests/test_cli.py # some files (any pytest arguments)
    python bench/suite_cpu.py --out cpu.json    # also each test's figures, as JSON

On this project's 2-core machine the suite keeps both cores busy from its first test to its
last, so its wall time is its CPU work divided by two: what shortens it is less CPU work, and
this says where that work is. Each test's CPU time is measured in the pytest worker that
runs it (``getrusage``: its own, plus that of the processes it started and waited for, with
their own waited-for children: a sweep's process and its loky workers). Not counted: the
processes nobody waits for (a Ray cluster's daemons, SLURM's jobs), and pytest's
collection. A module fixture's work is counted in the first test that uses it.

This file is also the pytest plugin that measures (``-p bench.suite_cpu``): run with
``SUITE_CPU_DIR`` set, each test appends a JSON line to ``<dir>/<worker pid>.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlsweep.numerics import cpu

ROOT = Path(__file__).resolve().parents[1]
DIR_ENV = "SUITE_CPU_DIR"


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Measure one test (setup, call and teardown) in the worker that runs it."""
    own, children = _cpu()
    start = time.monotonic()
    yield
    own_after, children_after = _cpu()
    out = os.environ.get(DIR_ENV)
    if out:
        record = {
            "test": item.nodeid,
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "start": time.time() - (time.monotonic() - start),  # epoch seconds
            "wall": time.monotonic() - start,
            "own": own_after - own,
            "children": children_after - children,
        }
        with open(Path(out) / f"{os.getpid()}.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")


def by_file(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each test file's tests, wall seconds and CPU-seconds (own, children), most CPU first."""
    files: dict[str, dict[str, Any]] = {}
    for r in records:
        name = r["test"].split("::")[0]
        empty = {"file": name, "tests": 0, "wall": 0.0, "own": 0.0, "children": 0.0}
        row = files.setdefault(name, empty)
        row["tests"] += 1
        for key in ("wall", "own", "children"):
            row[key] += r[key]
    return sorted(files.values(), key=lambda row: -(row["own"] + row["children"]))


def table(rows: list[dict[str, Any]], top: int) -> str:
    lines = [
        "| file | tests | wall s | CPU s (own + children) |",
        "|---|---:|---:|---:|",
    ]
    for row in rows[:top]:
        cpu = row["own"] + row["children"]
        lines.append(
            f"| {row['file']} | {row['tests']} | {row['wall']:.1f} | "
            f"{cpu:.1f} ({row['own']:.1f} + {row['children']:.1f}) |"
        )
    return "\n".join(lines)


def machine() -> str:
    """The CPU and core count the figures were measured on: the same suite takes 1.6 times
    the CPU-seconds on one 2-core machine of this project as on another (bench/README.md)."""
    model = cpu()["model"]  # what a job's numerics fingerprint records of its machine
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--top", type=int, default=25, help="files in the table")
    parser.add_argument("--out", type=Path, help="write every test's figures here (JSON)")
    args, pytest_args = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as out:
        env = {
            **os.environ,
            DIR_ENV: out,
            # As scripts/test.sh runs the suite, with this file importable as a plugin.
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p
            ),
        }
        command = [sys.executable, "-m", "pytest", "-p", "xdist", "-p", "hydra_pytest"]
        command += ["-p", "bench.suite_cpu", "-n", "3", "--dist", "loadfile", "-q"]
        start = time.monotonic()
        _, before = _cpu()
        done = subprocess.run([*command, *(pytest_args or ["tests"])], cwd=ROOT, env=env)
        _, after = _cpu()
        wall = time.monotonic() - start
        lines = [line for f in Path(out).glob("*.jsonl") for line in f.read_text().splitlines()]
    records = [json.loads(line) for line in lines]
    rows = by_file(records)
    own = sum(r["own"] for r in records)
    children = sum(r["children"] for r in records)
    # The whole pytest tree's CPU time: collection and the workers' start included, still
    # without the processes nobody waits for.
    total = after - before
    cores = os.cpu_count() or 1
    measured_on = machine()
    print(f"\nOn {measured_on}")
    print(f"{len(records)} tests in {wall:.0f} s; CPU-seconds measured: {own + children:.0f}")
    print(f"({own:.0f} in the pytest workers, {children:.0f} in the processes they waited for)")
    print(
        f"The pytest process tree: {total:.0f} CPU-seconds, {total / wall:.2f} of {cores} "
        "cores busy on average\n"
    )
    print(table(rows, args.top))
    if args.out is not None:
        figures = {"machine": measured_on, "wall": wall, "cpu": total, "files": rows}
        args.out.write_text(json.dumps({**figures, "tests": records}, indent=1))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
