#!/usr/bin/env bash
# The whole test suite: lint, formatting, types, then pytest. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check .
ruff format --check .
mypy
python -m pytest --durations=15 "$@"  # the slowest tests, to keep the suite under 10 minutes
