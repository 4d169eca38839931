"""The cost of ``numerics=portable``: the built-in jobs' training speed and one training step,
with each machine's own kernels (native) and with the pinned AVX2 kernels (portable).

    python bench/numerics.py                      # 5 rounds; Markdown to stdout
    python bench/numerics.py --rounds 7 --json out.json

Each round runs, for native and portable in turn (the order swapped every round, so that a
change of machine load hits both), each in a fresh process started with the setting's
variables (as a job's worker starts; the process checks its kernels are the pinned ones):

- the built-in PPO, A2C and DQN agents (their defaults) training on CartPole-v1 the way a
  job trains them (its vector env, one torch thread): env steps per CPU second of the
  training process (``time.process_time``, which a busy machine disturbs less than wall
  time) and per wall second;
- ``bench/step.py`` (one PPO gradient step, one A2C update: the agents' own numpy updates,
  medians of many).

The table shows each figure's median over the rounds per setting and the median of the
rounds' ratios (portable / native; for times, > 1 means portable is slower).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import figures  # bench/figures.py

from rlsweep.numerics import PORTABLE_ENV, cpu

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ("native", "portable")
# The agents trained (their defaults on CartPole-v1), with the env steps each trains for.
JOBS = {"ppo": ({}, 65_536), "a2c": ({}, 150_000), "dqn": ({"learning_starts": 1000}, 8_000)}
ONE_THREAD = {v: "1" for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def environment(setting: str) -> dict[str, str]:
    """A child's environment: the pinning variables for portable, none for native."""
    env = {k: v for k, v in os.environ.items() if k not in PORTABLE_ENV}
    env.update(ONE_THREAD)
    if setting == "portable":
        env.update(PORTABLE_ENV)
    return env


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def train(agent: str, setting: str) -> None:
    """In a child started with ``setting``'s environment: train the agent as a job does
    (its vector env, one torch thread) and print its CPU and wall seconds as JSON."""
    import numpy as np
    import torch

    from rlsweep.agents import load_agent_module
    from rlsweep.agents.base import AgentContext
    from rlsweep.config import EnvConfig
    from rlsweep.envs import make_vector_env, seed_vector_env
    from rlsweep.numerics import fingerprint, pin
    from rlsweep.threads import limit_blas

    pin(setting)
    torch.set_num_threads(1)
    limit_blas(1)
    module = load_agent_module(agent)
    params, steps = JOBS[agent]
    config = module.Config(**params)
    envs = make_vector_env(EnvConfig(id="CartPole-v1"), config.n_envs, snapshots=True)
    obs = seed_vector_env(envs, list(range(config.n_envs)), None)
    cpu, wall = time.process_time(), time.perf_counter()
    built = module.build(config, AgentContext(envs, obs, steps, np.random.default_rng(0)))
    done = 0
    while done < steps:
        done += built.train_iteration().env_steps
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    envs.close()
    kernels = fingerprint(setting)["kernels"]
    print(json.dumps({"steps": done, "cpu_s": cpu, "wall_s": wall, "kernels": kernels}))


def job_speed(agent: str, setting: str, scratch: Path) -> dict[str, float]:
    """Training env steps per CPU second and per wall second of one agent, in a child."""
    command = [sys.executable, __file__, "--train", agent, setting]
    out = json.loads(run(command, scratch, environment(setting)).splitlines()[-1])
    blas = out["kernels"]["blas"]
    assert blas.endswith("Haswell") or setting == "native", blas  # the child was pinned
    name = agent.upper()
    return {
        f"{name} training (steps per CPU s)": out["steps"] / out["cpu_s"],
        f"{name} training (steps per wall s)": out["steps"] / out["wall_s"],
    }


def step_times(setting: str, scratch: Path, updates: int) -> dict[str, float]:
    """bench/step.py's rlsweep figures (ms per step), by figure name."""
    out = scratch / f"step-{setting}.json"
    command = [sys.executable, str(ROOT / "bench" / "step.py"), "--updates", str(updates)]
    run([*command, "--json", str(out)], scratch, environment(setting))
    return {f.figure: f.rlsweep for f in figures.read(out)}


def measure(rounds: int, updates: int) -> dict[str, dict[str, list[float]]]:
    """Every figure's value in every round, by figure and setting."""
    values: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for r in range(rounds):
            for setting in SETTINGS if r % 2 == 0 else SETTINGS[::-1]:
                measured: dict[str, float] = {}
                for agent in JOBS:
                    measured.update(job_speed(agent, setting, scratch))
                measured.update(step_times(setting, scratch, updates))
                for name, value in measured.items():
                    values.setdefault(name, {s: [] for s in SETTINGS})[setting].append(value)
                print(f"round {r + 1}/{rounds} {setting}: {measured}", file=sys.stderr)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--updates", type=int, default=200, help="bench/step.py's --updates")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--train", nargs=2, metavar=("AGENT", "SETTING"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.train:
        train(*args.train)
        return
    values = measure(args.rounds, args.updates)
    print(
        f"- Machine: {cpu()['model']}, {platform.system()} {platform.release()}; one thread a job"
    )
    print(f"- Medians of {args.rounds} rounds, native and portable alternating")
    print()
    print("| figure | native | portable | portable / native (median of rounds) |")
    print("| --- | ---: | ---: | ---: |")
    out = []
    for name, by in values.items():
        native, portable = (statistics.median(by[s]) for s in SETTINGS)
        ratio = statistics.median(p / n for p, n in zip(by["portable"], by["native"], strict=True))
        print(f"| {name} | {native:.4g} | {portable:.4g} | {ratio:.3f} |")
        out.append(
            figures.Figure(
                bench="numerics",
                figure=f"{name}, portable",
                rlsweep=portable,
                anchor=native,
                anchor_name="native",
                lower_is_better="steps per" not in name,
                goal="",
                met=None,
                ratio=ratio,
            )
        )
    figures.write(args.json, out)


if __name__ == "__main__":
    main()
