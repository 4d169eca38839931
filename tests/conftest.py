"""Shared helpers: run the real CLI in a subprocess, from a scratch working directory."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

# The tests that press Ctrl-C on a sweep (SIGINT to its process) need the sweep to start
# as from a terminal. A test run started in the background of a non-interactive shell
# (`bash -c '... &'`) inherits SIGINT ignored, and so would every sweep it starts, which
# then cannot be interrupted: give the sweeps Python's default instead.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Likewise SIGHUP (a test run under nohup): the tests that hang up a sweep need its default.
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)

# The key that signs checkpoints (rlsweep.trust): the tests' own, one per test process (the
# sweeps a test starts inherit it), never the user's ~/.config/rlsweep/key.
os.environ.setdefault(
    "RLSWEEP_KEY_FILE", str(Path(tempfile.mkdtemp(prefix="rlsweep-test-key-")) / "key")
)

# The test files that take longest, longest first: pytest-xdist (--dist loadfile) hands
# whole files to the workers in this order, so that no long file starts last and runs on
# alone at the end. Other files follow in pytest's own order. (Left to itself, xdist orders
# files by how many tests they hold, which put test_examples.py, three tests and two
# minutes, among the last.) The order is the files' summed --durations of 2026-11-27.
LONGEST_FILES_FIRST = (
    "test_slurm.py",
    "test_torchrl_unseeded.py",
    "test_ray.py",
    "test_torchrl_seeded.py",
    "test_resume.py",
    "test_launcher_suites.py",
    "test_examples.py",
    "test_faults.py",
    "test_search.py",
    "test_compose.py",
    "test_zen_app.py",
    "test_cli.py",
    "test_checkpoint.py",
    "test_compare.py",
    "test_trackers.py",
    "test_apps_as_they_are.py",
    "test_numerics.py",
    "test_overhead.py",
    "test_launch.py",
    "test_gpus.py",
    "test_report.py",
    "test_api.py",
    "test_any_app.py",
    "test_optuna_sweeper.py",
    "test_determinism.py",
    "test_stream.py",
    "test_agents_determinism.py",
    "test_user_env.py",
)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep the order below
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


# For the test sweeps whose summary and report no test reads (about a CPU-second each, most
# of it matplotlib). Hydra's key, not the built-in app's `report` alias: the alias would be
# recorded in every job's config, which tests compare across sweeps.
NO_REPORT = "hydra.sweeper.report=false"
# A budget that trains for real but takes about a second per job.
TINY = ("train.total_steps=1024", "eval.every_steps=512", "eval.episodes=3")
# CartPole whose every sub-env step sleeps 2 ms: jobs that last (16 ms per vector step of
# 8 sub-envs) without taking the CPU, for tests that must catch a job mid-training.
SLEEPING_ENV = ("env=fault", "env.kwargs.fault=none", "env.kwargs.step_delay_s=0.002")


def run_python(
    args: Sequence[str],
    cwd: Path,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``cwd`` (``env`` added to this environment, without
    HYDRA_FULL_ERROR); returns the completed process (never raises)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def load_script(path: Path) -> ModuleType:
    """A Python file outside the packages (bench/, scripts/) imported as a module named
    after it."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def run_cli(
    args: Sequence[str],
    cwd: Path,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``python -m rlsweep ARGS`` in ``cwd``; returns the completed process (never raises)."""
    return run_python(["-m", "rlsweep", *args], cwd, env=env, timeout=timeout)


def run_clis(
    runs: Mapping[str, tuple[Sequence[str], Path, dict[str, str] | None]], max_at_once: int = 4
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Several independent ``run_cli`` calls (``name: (args, cwd, env)``) side by side:
    the suite's time goes mostly to starting Python, which overlaps well."""
    with ThreadPoolExecutor(max_at_once) as pool:
        futures = {
            name: pool.submit(run_cli, args, cwd, env=env)
            for name, (args, cwd, env) in runs.items()
        }
        return {name: future.result() for name, future in futures.items()}


def start_python(
    args: Sequence[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``python ARGS`` in ``cwd`` (``env`` added to this environment), in the background
    (stdout/stderr piped)."""
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_cli(
    args: Sequence[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``python -m rlsweep ARGS`` in ``cwd``, in the background (stdout/stderr piped)."""
    return start_python(["-m", "rlsweep", *args], cwd, env)


def results(sweep_dir: Path) -> dict[str, dict[str, object]]:
    """result.json of every job directory, by directory name."""
    return {
        p.parent.name: json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/result.json"))
    }


@pytest.fixture(autouse=True)
def one_slurm_test_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests marked ``slurm`` share the one-node test cluster: xdist runs files side by
    side, so a test of one file (tests/test_stream.py) could submit while another's
    (tests/test_slurm.py) counts its queue or waits for a requeue. They take turns."""
    if request.node.get_closest_marker("slurm") is None:
        yield
        return
    with open(Path(tempfile.gettempdir()) / "rlsweep-tests-slurm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """One torch thread for in-process training (results depend on the thread count)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    return d


class Bandit(gym.Env[np.ndarray, Any]):
    """One state, episodes of one step.

    Discrete: two arms, reward 1 for arm 1 and 0 for arm 0.
    Continuous: reward -(a - 0.5)^2 for an action a in [-5, 5].
    """

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, continuous: bool = False) -> None:
        self.continuous = continuous
        self.action_space = (
            gym.spaces.Box(-5.0, 5.0, (1,), np.float32) if continuous else gym.spaces.Discrete(2)
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.continuous:
            reward = -float((np.asarray(action)[0] - 0.5) ** 2)
        else:
            reward = float(action == 1)
        return np.zeros(1, np.float32), reward, True, False, {}
