"""Envs from the user's own package: gymnasium's ``env.id=<module>:<id>`` form.

Every process that runs a job (a joblib worker, an async sub-env process) imports the
module itself, which registers the env; an env registered only by a wrapper script, in
``__main__``, is refused up front instead of failing in every job. The package used is
``examples/mypkg`` (``mypkg.envs`` registers ``TinyChain-v0``): on the path in this
process (pyproject's pytest ``pythonpath``), and through ``PYTHONPATH`` in the CLI runs.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from conftest import TINY, results, run_clis, run_python
from hydra import compose, initialize_config_dir

from rlsweep.config import EnvConfig, check_env_id, load_job_config
from rlsweep.envs import Snapshot, make_vector_env, seed_vector_env
from rlsweep.errors import ConfigError
from rlsweep.paths import conf_dir

USER_ENV = "mypkg.envs:TinyChain-v0"
EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"
# The CLI runs find mypkg as a user's installed package would be found.
MYPKG_PATH = {
    "PYTHONPATH": os.pathsep.join(p for p in (str(EXAMPLES_DIR), os.environ.get("PYTHONPATH")) if p)
}
IMPORTABLE_MODULE = "Register the env in an importable module"

# A user's wrapper script: registers envs whose entry point is in the script itself
# (as a class and by name), then runs rlsweep's CLI with the env id it is given.
WRAPPER = f'''
"""Register an env in this script, then run a sweep on it."""

import sys

import gymnasium as gym
from mypkg.envs import TinyChain


class ScriptChain(TinyChain):
    """Defined in the script: a fresh worker process never has it."""


gym.register(id="ScriptChain-v0", entry_point=ScriptChain, max_episode_steps=20)
gym.register(id="ScriptChainByName-v0", entry_point="__main__:ScriptChain", max_episode_steps=20)

if __name__ == "__main__":
    from rlsweep.app import main

    sys.argv = [sys.argv[0], "-m", "env.id=" + sys.argv[1], "seed=0,1", *{list(TINY)!r}]
    main()
'''


def run_wrapper(script: Path, env_id: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python SCRIPT ENV_ID`` in ``cwd`` (never raises)."""
    return run_python([str(script), env_id], cwd, env=MYPKG_PATH)


CLI_RUNS: dict[str, list[str]] = {
    "sync": ["agent=ppo", f"env.id={USER_ENV}", "seed=range(2)", "name=chain"],
    "async": ["agent=ppo", f"env.id={USER_ENV}", "seed=0", "env.vectorization=async"],
    "no_module": ["env.id=mypkg.nope:TinyChain-v0", "seed=0,1"],
    "no_id": ["env.id=mypkg.envs:Nope-v0", "seed=0,1"],
}
WRAPPER_RUNS = {"wrapper_class": "ScriptChain-v0", "wrapper_name": "ScriptChainByName-v0"}


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    """Every CLI and wrapper-script run once, side by side, each in a directory of its own."""
    script = tmp_path_factory.mktemp("script") / "wrapper.py"
    script.write_text(WRAPPER)
    dirs = {name: tmp_path_factory.mktemp(name) for name in (*CLI_RUNS, *WRAPPER_RUNS)}
    with ThreadPoolExecutor(len(WRAPPER_RUNS)) as pool:
        wrapped = {
            name: pool.submit(run_wrapper, script, env_id, dirs[name])
            for name, env_id in WRAPPER_RUNS.items()
        }
        procs = run_clis(
            {
                name: (["-m", *TINY, *args], dirs[name], MYPKG_PATH)
                for name, args in CLI_RUNS.items()
            }
        )
        procs.update({name: future.result() for name, future in wrapped.items()})
    return {name: (dirs[name], proc) for name, proc in procs.items()}


def test_a_sweep_on_an_env_from_the_users_package_completes_in_the_workers(
    runs: dict[str, tuple[Path, subprocess.CompletedProcess[str]]],
) -> None:
    """The joblib workers import mypkg.envs themselves (the parent's import is not
    inherited: they start fresh)."""
    workdir, proc = runs["sync"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "with loky" in proc.stdout  # really run by joblib worker processes
    sweep = workdir / "multirun" / "chain"
    jobs = [d for d in sweep.iterdir() if d.is_dir() and (d / ".hydra").is_dir()]
    assert len(jobs) == 2 and all((d / "result.json").is_file() for d in jobs)
    res = results(sweep)
    assert sorted((r["env"], r["replicate"]) for r in res.values()) == [
        (USER_ENV, 0),
        (USER_ENV, 1),
    ]
    for r in res.values():
        assert r["steps"] >= 1024
        assert 0.0 <= r["final_return"] <= 1.0


def test_async_sub_env_processes_find_the_env_and_match_sync(
    runs: dict[str, tuple[Path, subprocess.CompletedProcess[str]]],
) -> None:
    """Async sub-envs are spawned by a joblib worker and import the env's module
    themselves; the results are those of sync vectorization, bit for bit."""
    workdir, proc = runs["async"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = results(workdir / "multirun" / "default").values()
    assert result["config"]["env"]["vectorization"] == "async"
    sync_dir, _ = runs["sync"]
    (sync,) = [r for r in results(sync_dir / "multirun" / "chain").values() if r["replicate"] == 0]
    assert result["state_sha256"] == sync["state_sha256"]
    assert result["final_episode_returns"] == sync["final_episode_returns"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("no_module", ["env.id", "mypkg.nope", "ModuleNotFoundError"]),
        ("no_id", ["Unknown gymnasium id", "env.id", "Nope-v0", "mypkg.envs"]),
        ("wrapper_class", ["env.id", "ScriptChain-v0", "__main__:ScriptChain", IMPORTABLE_MODULE]),
        (
            "wrapper_name",
            ["env.id", "ScriptChainByName-v0", "__main__:ScriptChain", IMPORTABLE_MODULE],
        ),
    ],
)
def test_an_env_the_jobs_could_not_make_is_refused_before_anything_runs(
    runs: dict[str, tuple[Path, subprocess.CompletedProcess[str]]],
    name: str,
    expected: list[str],
) -> None:
    workdir, proc = runs[name]
    assert proc.returncode != 0
    for fragment in expected:
        assert fragment in proc.stderr, f"{fragment!r} not in:\n{proc.stderr}"
    assert "env.id=<module>:<id>" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (workdir / "multirun").exists()


# In this process: the check's messages, and the vector envs a job makes.


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Ids a test registers here, removed from gymnasium's registry afterwards."""
    ids: list[str] = []
    yield ids
    for env_id in ids:
        gym.registry.pop(env_id, None)


class MainChain(gym.Env[np.ndarray, Any]):
    """Stands for an env class a wrapper script defines."""


MainChain.__module__ = "__main__"


def _local_env_class() -> type[gym.Env[np.ndarray, Any]]:
    class Local(gym.Env[np.ndarray, Any]):
        pass

    return Local


def test_module_id_passes_the_check_and_composes_into_a_job() -> None:
    check_env_id(USER_ENV)
    with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
        job = load_job_config(compose("config", overrides=["agent=dqn", f"env.id={USER_ENV}"]))
    assert job.env.id == USER_ENV
    assert job.env.identity()["id"] == USER_ENV  # the module is part of the env's identity


@pytest.mark.parametrize(
    ("env_id", "expected"),
    [
        ("mypkg.nope:TinyChain-v0", ["env.id='mypkg.nope:TinyChain-v0'", "'mypkg.nope'"]),
        ("mypkg.envs:TinyChan-v0", ["Unknown gymnasium id", "Did you mean " + USER_ENV + "?"]),
        ("CartPol-v1", ["Unknown gymnasium id", "Did you mean CartPole-v1"]),
        ("__main__:CartPole-v1", ["env.id='__main__:CartPole-v1'", IMPORTABLE_MODULE]),
        (":TinyChain-v0", ["env.id=':TinyChain-v0'", "module part", "is empty"]),
    ],
)
def test_the_check_names_the_key_and_what_is_allowed(env_id: str, expected: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        check_env_id(env_id)
    message = str(info.value)
    assert "\n" not in message
    for fragment in expected:
        assert fragment in message, message


@pytest.mark.parametrize(
    ("entry_point", "where", "in_main"),
    [
        (MainChain, "__main__:MainChain", True),
        ("__main__:MainChain", "__main__:MainChain", True),
        (_local_env_class(), "_local_env_class.<locals>.Local", False),
        ("no_such_package.envs:Chain", "no_such_package.envs:Chain", False),
    ],
    ids=["class-in-main", "name-in-main", "local-class", "missing-module"],
)
def test_an_id_registered_in_this_process_only_is_refused(
    registered: list[str], entry_point: Any, where: str, in_main: bool
) -> None:
    env_id = "rlsweep-test/ThisProcessOnly-v0"
    gym.register(id=env_id, entry_point=entry_point)
    registered.append(env_id)
    with pytest.raises(ConfigError) as info:
        check_env_id(env_id)
    message = str(info.value)
    for fragment in (f"env.id={env_id!r}", where, IMPORTABLE_MODULE, "env.id=<module>:<id>"):
        assert fragment in message, message
    # Named through a module (which registers its ids again in every job process), it is
    # refused only if its entry point is in __main__.
    if in_main:
        with pytest.raises(ConfigError, match="launching script"):
            check_env_id(f"mypkg.envs:{env_id}")
    else:
        check_env_id(f"mypkg.envs:{env_id}")


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_vector_envs_of_a_module_id_reset_step_and_snapshot(vectorization: str) -> None:
    envs = make_vector_env(EnvConfig(id=USER_ENV, vectorization=vectorization), 2, snapshots=True)
    try:
        obs = seed_vector_env(envs, [1, 2], 3)
        assert obs.shape == (2, 5) and obs.dtype == np.float32
        for _ in range(4):  # straight to the end of the chain: reward 1, episode over
            obs, reward, terminated, _, _ = envs.step(np.ones(2, dtype=np.int64))
        assert reward.tolist() == [1.0, 1.0] and terminated.all()
        assert isinstance(envs, gym.vector.SyncVectorEnv | gym.vector.AsyncVectorEnv)
        snapshots = envs.call("rlsweep_snapshot")
        assert all(payload is not None and ended for payload, ended, _ in snapshots)
        if isinstance(envs, gym.vector.SyncVectorEnv):
            assert all(isinstance(e, Snapshot) for e in envs.envs)
    finally:
        envs.close()
