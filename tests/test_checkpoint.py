"""A job stopped between any two iterations and resumed computes exactly what an
uninterrupted one does: same final state fingerprint, same evaluation returns, same
metrics (except wall time), for every agent, sync and async envs."""

from __future__ import annotations

import csv
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from test_determinism import metrics_without_wall_time

from rlsweep import checkpoint
from rlsweep.config import EnvConfig, JobConfig, load_job_config
from rlsweep.envs import make_vector_env, seed_vector_env
from rlsweep.errors import ConfigError, Preempted
from rlsweep.job import job_identity, train_and_evaluate
from rlsweep.paths import conf_dir
from rlsweep.store import CHECKPOINT_FILE, RESULT_FILE
from rlsweep.task_api import Job, record

pytestmark = pytest.mark.usefixtures("hydra_restore_singletons")


def job_config(overrides: Sequence[str]) -> JobConfig:
    with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
        cfg = compose("config", overrides=list(overrides))
    return load_job_config(cfg)


@pytest.fixture
def stop_at(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Request a stop at the n-th iteration boundary (1 = before the first iteration)."""
    target: list[int] = []
    calls = [0]

    def stop_requested() -> str | None:
        if not target:
            calls[0] = 0
            return None
        calls[0] += 1
        return "test stop" if calls[0] == target[0] else None

    monkeypatch.setattr(checkpoint, "stop_requested", stop_requested)
    yield target


CASES = {
    "ppo-cartpole": (["agent=ppo", "env=cartpole"], 3_000, 3),
    "ppo-pendulum-async-normalised": (
        [
            *("agent=ppo", "env=pendulum", "env.vectorization=async", "agent.n_envs=2"),
            *("agent.normalize_obs=true", "agent.normalize_reward=true"),
        ],
        3_000,
        4,
    ),
    "a2c-pendulum": (["agent=a2c", "env=pendulum"], 2_000, 7),
    # gSDE: the noise matrices and their generator resume too (boundary 5 is mid-stream).
    "ppo-pendulum-gsde": (
        ["agent=ppo", "env=pendulum", "agent.use_sde=true", "agent.sde_sample_freq=4"],
        2_048,
        5,
    ),
    "dqn-cartpole": (["agent=dqn", "env=cartpole", "agent.learning_starts=500"], 3_000, 6),
    "es-mountaincar": (["agent=es", "env=mountaincar_continuous", "agent.n_envs=8"], 16_000, 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_stopped_and_resumed_job_is_bitwise_equal_to_uninterrupted(
    case: str, tmp_path: Path, stop_at: list[int]
) -> None:
    overrides, steps, boundary = CASES[case]
    budget = [f"train.total_steps={steps}", "eval.every_steps=1000", "eval.episodes=2"]
    job = job_config([*overrides, *budget, "train.checkpoint_every_s=null"])
    reference = train_and_evaluate(job, tmp_path / "reference")

    stop_at.append(boundary)
    job_dir = tmp_path / "interrupted"
    with pytest.raises(Preempted, match="test stop"):
        train_and_evaluate(job, job_dir)
    assert (job_dir / CHECKPOINT_FILE).is_file() and not (job_dir / RESULT_FILE).exists()
    stop_at.clear()
    resumed = train_and_evaluate(job, job_dir)

    assert 0 < resumed["resumed_at_steps"][0] < steps
    assert resumed["state_sha256"] == reference["state_sha256"]
    assert resumed["final_episode_returns"] == reference["final_episode_returns"]
    assert metrics_without_wall_time(job_dir) == metrics_without_wall_time(tmp_path / "reference")
    # The job's checkpoint goes once its result is recorded (by rlsweep.task_api's run).
    assert (job_dir / CHECKPOINT_FILE).exists()
    record(Job(job_identity(job), job_dir), resumed)
    assert (job_dir / RESULT_FILE).is_file() and not (job_dir / CHECKPOINT_FILE).exists()


def test_wall_time_counts_each_second_once_however_often_the_job_checkpoints(
    tmp_path: Path,
) -> None:
    """A checkpoint at every iteration once doubled the wall time on each save (a job of
    0.5 s reported 145 s): the saved time and the live clock are counted apart."""
    budget = ["train.total_steps=4096", "eval.every_steps=512", "eval.episodes=2"]
    start = time.perf_counter()
    result = train_and_evaluate(job_config([*budget, "train.checkpoint_every_s=0"]), tmp_path)
    took = time.perf_counter() - start
    assert (tmp_path / CHECKPOINT_FILE).is_file()
    assert 0 < result["wall_time_s"] <= took
    rows = list(csv.DictReader((tmp_path / "metrics.csv").open()))
    assert len(rows) == 9 and 0 < float(rows[-1]["wall_time"]) <= took


def test_checkpoint_of_another_config_is_not_resumed(
    tmp_path: Path, stop_at: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    base = ["train.total_steps=2048", "eval.every_steps=1024", "eval.episodes=2"]
    stop_at.append(3)
    with pytest.raises(Preempted):
        train_and_evaluate(job_config([*base, "agent.learning_rate=1e-3"]), tmp_path)
    stop_at.clear()
    job = job_config([*base, "agent.learning_rate=3e-4"])
    with caplog.at_level(logging.WARNING):
        result = train_and_evaluate(job, tmp_path)
    assert "checkpoint of a different config" in caplog.text
    assert result["resumed_at_steps"] == []
    fresh = train_and_evaluate(job, tmp_path / "fresh")
    assert result["state_sha256"] == fresh["state_sha256"]


def test_unreadable_checkpoint_starts_from_scratch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job = job_config(["train.total_steps=1024", "eval.every_steps=512", "eval.episodes=2"])
    (tmp_path / CHECKPOINT_FILE).write_bytes(b"not a checkpoint")
    with caplog.at_level(logging.WARNING):
        result = train_and_evaluate(job, tmp_path)
    # Not signed (rlsweep.trust): never unpickled, and the log says why.
    assert "no rlsweep signature" in caplog.text and result["resumed_at_steps"] == []


def test_checkpoint_cadence_does_not_change_identity_or_results(tmp_path: Path) -> None:
    base = ["train.total_steps=2048", "eval.every_steps=1024", "eval.episodes=2"]
    every = train_and_evaluate(job_config([*base, "train.checkpoint_every_s=0"]), tmp_path / "a")
    never = train_and_evaluate(job_config([*base, "train.checkpoint_every_s=null"]), tmp_path / "b")
    assert every["state_sha256"] == never["state_sha256"]


def test_negative_checkpoint_interval_is_refused() -> None:
    with pytest.raises(ConfigError, match="checkpoint_every_s must be >= 0 or null"):
        job_config(["train.checkpoint_every_s=-1"])


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_restored_vector_env_continues_exactly_including_pending_autoresets(
    vectorization: str,
) -> None:
    """Capture mid-stream right after an episode ended; a fresh vector env restored from
    the capture returns the same transitions for the same actions (the ended sub-env
    autoresets on its next step, reward 0, exactly like gymnasium's NEXT_STEP mode)."""
    spec = EnvConfig(id="CartPole-v1", vectorization=vectorization)
    actions = np.random.default_rng(0).integers(0, 2, size=(400, 3))

    def run(envs: object, rows: np.ndarray) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for a in rows:
            obs, reward, terminated, truncated, _ = envs.step(a)  # type: ignore[attr-defined]
            out.append((obs.copy(), reward.copy(), terminated.copy(), truncated.copy()))
        return out

    original = make_vector_env(spec, 3, snapshots=True)
    restored = make_vector_env(spec, 3, snapshots=True)
    try:
        seed_vector_env(original, [11, 12, 13], 5)
        t = 0
        while True:  # step until some sub-env's episode has just ended
            _, _, terminated, truncated, _ = original.step(actions[t])
            t += 1
            if (terminated | truncated).any():
                break
        ended = terminated | truncated
        state = checkpoint.capture_envs(original)
        assert [flag for _, flag in state["sub_envs"]] == ended.tolist()
        expected = run(original, actions[t : t + 200])

        seed_vector_env(restored, [0, 0, 0], 0)  # any seeds: the restore replaces the state
        checkpoint.restore_envs(restored, state)
        got = run(restored, actions[t : t + 200])
    finally:
        original.close()
        restored.close()
    first_reward = got[0][1]
    assert np.all(first_reward[ended] == 0.0)  # the autoreset step
    for a, b in zip(expected, got, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


def test_configerror_is_what_bad_interval_gives_on_the_cli(tmp_path: Path) -> None:
    from conftest import run_cli

    proc = run_cli(["train.checkpoint_every_s=-5"], tmp_path)
    assert proc.returncode != 0
    assert "checkpoint_every_s must be >= 0 or null" in proc.stderr
    assert "Traceback" not in proc.stderr


class _Unpicklable(gym.Wrapper[Any, Any, Any, Any]):
    """CartPole holding a lock: cannot be pickled (as some simulators' handles cannot)."""

    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.lock = threading.Lock()


def _make_unpicklable(**kwargs: Any) -> gym.Env[Any, Any]:
    return _Unpicklable()


UNPICKLABLE = "rlsweep-test/Unpicklable-v0"
if UNPICKLABLE not in gym.registry:
    gym.register(id=UNPICKLABLE, entry_point=_make_unpicklable)


def test_an_env_that_cannot_be_pickled_runs_without_checkpoints(
    tmp_path: Path, stop_at: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    budget = ["train.total_steps=1024", "eval.every_steps=512", "eval.episodes=2"]
    job = job_config([f"env.id={UNPICKLABLE}", *budget, "train.checkpoint_every_s=0"])
    stop_at.append(2)  # a stop request it cannot honour: it runs on to the end
    with caplog.at_level(logging.WARNING):
        result = train_and_evaluate(job, tmp_path)
    assert "checkpoints are off for this job" in caplog.text
    assert "cannot be pickled" in caplog.text
    assert result["steps"] >= 1024 and not (tmp_path / CHECKPOINT_FILE).exists()
