"""Shared helpers: run the real CLI in a subprocess, from a scratch working directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

# A budget that trains for real but takes about a second per job.
TINY = ("train.total_steps=1024", "eval.every_steps=512", "eval.episodes=3")


def run_cli(
    args: Sequence[str],
    cwd: Path,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``python -m rlsweep ARGS`` in ``cwd``; returns the completed process (never raises)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [sys.executable, "-m", "rlsweep", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def results(sweep_dir: Path) -> dict[str, dict[str, object]]:
    """result.json of every job directory, by directory name."""
    return {
        p.parent.name: json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/result.json"))
    }


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    return d
