"""Training speed: rlsweep's PPO and A2C against Stable-Baselines3's, side by side.

    pip install stable-baselines3          # benchmark only; never a runtime dependency
    nice -n 19 python bench/agents.py      # writes the Markdown table to stdout

Both libraries train with the same hyperparameters (the table below each case), the
same network (64-64 tanh MLPs, orthogonal init), on the same gymnasium env, one torch
thread, no evaluation and no logging. Runs alternate between the libraries (rlsweep,
SB3, rlsweep, SB3, ...) so that a change in machine load hits both; each cell is the
median of ``--repeats`` runs. Steps per second = env steps trained / wall time of the
whole training call (environment stepping, acting and updates).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import figures  # bench/figures.py
import gymnasium as gym
import numpy as np
import torch

from rlsweep.agents import a2c, ppo
from rlsweep.agents.base import AgentContext
from rlsweep.config import EnvConfig
from rlsweep.envs import make_vector_env, seed_vector_env
from rlsweep.numerics import cpu
from rlsweep.threads import limit_blas


@dataclass
class Case:
    """One algorithm on one env with one set of hyperparameters."""

    algo: str  # ppo or a2c
    env_id: str
    steps: int
    # Hyperparameters in rlsweep's names; translated for SB3 by ``sb3_kwargs``.
    params: dict[str, Any] = field(default_factory=dict)


# rl-baselines3-zoo's PPO settings for CartPole-v1.
PPO_CARTPOLE: dict[str, Any] = {
    "n_envs": 8,
    "n_steps": 32,
    "batch_size": 256,
    "n_epochs": 20,
    "gamma": 0.98,
    "gae_lambda": 0.8,
    "learning_rate": 1e-3,
    "schedule": "linear",
}

CASES = [
    Case("ppo", "CartPole-v1", 32_768, PPO_CARTPOLE),
    Case(
        "ppo",
        "Pendulum-v1",
        32_768,
        {
            "n_envs": 4,
            "n_steps": 1024,
            "batch_size": 64,
            "n_epochs": 10,
            "gamma": 0.9,
            "gae_lambda": 0.95,
            "learning_rate": 1e-3,
            "schedule": "constant",
        },
    ),
    Case("a2c", "CartPole-v1", 40_000, {"n_envs": 8, "n_steps": 5}),
    Case("a2c", "Pendulum-v1", 40_000, {"n_envs": 8, "n_steps": 5}),
]


def time_training(module: Any, config: Any, env: EnvConfig, steps: int, seed: int) -> float:
    """Train an rlsweep agent for ``steps`` env steps on the vector env a job trains on
    (each sub-env in its checkpoint snapshot wrapper); return the wall time."""
    envs = make_vector_env(env, config.n_envs, snapshots=True)
    try:
        obs = seed_vector_env(envs, [seed * 100 + i for i in range(config.n_envs)], None)
        start = time.perf_counter()
        agent = module.build(config, AgentContext(envs, obs, steps, np.random.default_rng(seed)))
        done = 0
        while done < steps:
            done += agent.train_iteration().env_steps
        return time.perf_counter() - start
    finally:
        envs.close()


def rlsweep_run(case: Case, seed: int) -> float:
    """Train rlsweep's agent for ``case.steps`` env steps; return the wall time."""
    module = {"ppo": ppo, "a2c": a2c}[case.algo]
    return time_training(
        module, module.Config(**case.params), EnvConfig(id=case.env_id), case.steps, seed
    )


def sb3_kwargs(case: Case) -> dict[str, Any]:
    """The same hyperparameters in SB3's terms."""
    p = dict(case.params)
    n_envs = p.pop("n_envs")
    schedule = p.pop("schedule", "constant")
    if schedule == "linear":
        lr = p["learning_rate"]
        p["learning_rate"] = lambda progress: lr * progress
        p["clip_range"] = lambda progress: 0.2 * progress
    del n_envs
    return p


def sb3_run(case: Case, seed: int) -> float:
    """Train SB3's agent for ``case.steps`` env steps; return the wall time."""
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.env_util import make_vec_env

    algo: Callable[..., Any] = {"ppo": PPO, "a2c": A2C}[case.algo]
    envs = make_vec_env(case.env_id, n_envs=case.params["n_envs"], seed=seed)
    start = time.perf_counter()
    model = algo("MlpPolicy", envs, seed=seed, device="cpu", verbose=0, **sb3_kwargs(case))
    model.learn(case.steps)
    elapsed = time.perf_counter() - start
    envs.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every step budget")
    parser.add_argument("--only", default="", help="comma-separated algo:env filter")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    limit_blas(1)  # numpy's products on one thread, as in a job

    import stable_baselines3

    rows = []
    for case in CASES:
        key = f"{case.algo}:{case.env_id}"
        if args.only and key not in args.only.split(","):
            continue
        case.steps = int(case.steps * args.scale)
        times: dict[str, list[float]] = {"rlsweep": [], "sb3": []}
        for rep in range(args.repeats):
            times["rlsweep"].append(rlsweep_run(case, rep))
            times["sb3"].append(sb3_run(case, rep))
        ours = case.steps / statistics.median(times["rlsweep"])
        theirs = case.steps / statistics.median(times["sb3"])
        rows.append((case, ours, theirs))
        print(f"# {key}: rlsweep {ours:,.0f} steps/s, SB3 {theirs:,.0f} steps/s", flush=True)

    print()
    print(f"- Machine: {cpu()['model']}, {platform.system()} {platform.release()}, 1 torch thread")
    print(
        f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; python {platform.python_version()}, "
        f"torch {torch.__version__}, gymnasium {gym.__version__}, numpy {np.__version__}, "
        f"stable-baselines3 {stable_baselines3.__version__}; median of {args.repeats} runs"
    )
    print()
    print("| algo | env | env steps | rlsweep steps/s | SB3 steps/s | ratio | goal |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    found = [figure(*row) for row in rows]
    for (case, ours, theirs), got in zip(rows, found, strict=True):
        goal = GOALS[case.env_id]
        verdict = "met" if got.met else f"missed by {goal - ours / theirs:.2f}x"
        print(
            f"| {case.algo.upper()} | {case.env_id} | {case.steps:,} | {ours:,.0f} | "
            f"{theirs:,.0f} | {ours / theirs:.2f}x | >= {goal:g}x: {verdict} |"
        )
    figures.write(args.json, found)


# Goal 2 (issue 19): at least 4x SB3's steps per second on CartPole, 3x on the continuous
# presets' env.
GOALS = {"CartPole-v1": 4.0, "Pendulum-v1": 3.0}


def figure(case: Case, ours: float, theirs: float) -> figures.Figure:
    """One row as a figure for ``bench/all.py``."""
    return figures.Figure(
        bench="agents",
        figure=f"{case.algo.upper()} {case.env_id} env steps/s",
        rlsweep=ours,
        anchor=theirs,
        anchor_name="Stable-Baselines3",
        lower_is_better=False,
        goal=f"ratio >= {GOALS[case.env_id]:g}",
        met=ours / theirs >= GOALS[case.env_id],
    )


if __name__ == "__main__":
    main()
