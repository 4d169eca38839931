#!/usr/bin/env bash
# The whole test suite: lint, formatting, types, then pytest. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check .
ruff format --check .
mypy
# Two pytest workers (pytest-xdist), each taking whole test files: a file's module fixtures
# are computed once and the SLURM tests (one file) never overlap each other. Most of the
# suite's time is starting Python processes, which overlaps well: on this project's 2-core
# machine the suite took 6 min 25 s this way and 10 min 34 s in one process, the same hour.
# --durations lists the slowest tests, to keep the suite under 10 minutes.
python -m pytest -n 2 --dist loadfile --durations=15 "$@"
