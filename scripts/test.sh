#!/usr/bin/env bash
# The whole test suite: the docs' links and commands, lint, formatting, types, then pytest.
# Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# tests/test_report_html.py opens report.html in Debian's chromium, driven by Playwright
# (whose own browser download cannot reach its servers from here): install it once.
sudo_if_needed() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() { sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get "$@"; }
command -v chromium >/dev/null || {
  apt_install install -y chromium || { apt_install update && apt_install install -y chromium; }
}
# Byte-compile the project once: this machine sets PYTHONDONTWRITEBYTECODE=1, so without
# it each of the suite's few hundred Python processes compiles rlsweep's modules again
# (CPU time that adds up; reading the compiled files is what a default Python does).
python -m compileall -q rlsweep hydra_plugins tests examples bench >/dev/null
# The README's and docs/'s relative links resolve and their commands still parse (seconds).
python scripts/check_docs.py
ruff check .
ruff format --check .
mypy
# Three pytest workers (pytest-xdist), each taking whole test files: a file's module fixtures
# are computed once and the SLURM tests (one file) never overlap each other. Most of the
# suite's time is starting Python processes (CPU-bound), but some files mostly wait (on
# SLURM's scheduler, Ray's nodes, jobs that sleep): on this project's 2-core machine a
# third worker keeps both cores busy meanwhile, and a fourth only adds contention
# (bench/suite_cpu.py says where the suite's CPU time goes).
# --durations lists the slowest tests, to keep the suite under 10 minutes.
# Only the two pytest plugins the suite uses (pytest-xdist, Hydra's fixtures) are loaded:
# pytest rewrites the asserts of every module of each plugin package it loads by itself
# (hypothesis, anyio, pytest-benchmark, ... when installed: many modules), from
# source in each of its four processes, since no rewritten file is cached without bytecode
# writing: seconds of CPU per process.
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
python -m pytest -p xdist -p hydra_pytest -n 3 --dist loadfile --durations=15 "$@"
