"""End to end (issue 19, goal 3): a whole rlsweep sweep against the loop a user would write.

    python bench/endtoend.py                      # 3 interleaved pairs, 100k steps a job
    python bench/endtoend.py --pairs 1 --steps 20000 --json out.json   # a quick look

rlsweep's side is a PPO sweep on CartPole (the one CHANGELOG.md's speed figures quote),
timed from the command's start to its exit (planning, workers, training, the final
evaluation, the summary and report):

    python -m rlsweep -m +preset=ppo_cartpole 'seed=range(4)' n_jobs=2 eval.every_steps=100000

The anchor is what a user would otherwise run: joblib over the same 4 seeds, 2 at a time,
each training Stable-Baselines3's PPO with rl-baselines3-zoo's CartPole settings (8 envs,
n_steps 32, batch 256, 20 epochs, gamma 0.98, GAE lambda 0.8, linear learning-rate and
clip-range schedules from 1e-3 and 0.2; the same separate 64-64 tanh actor and critic) on
one torch thread, then a final 10-episode deterministic evaluation. Each side is a fresh
``python`` process; the pairs alternate which side goes first, so a change of the machine's
load hits both alike. The figure is the median over pairs of rlsweep's wall / the loop's
wall; both sides' mean final returns are printed, so a faster side that learns worse shows.

Goal (issue 19): rlsweep's wall at most 0.33x the loop's (median of three pairs).
Needs Stable-Baselines3 (``pip install -e '.[bench]'``, also in the test extra).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import figures  # bench/figures.py

from rlsweep.numerics import cpu

GOAL = 0.33

# The loop a user would write around SB3: one process, joblib over seeds.
LOOP = """
import json
import sys

from joblib import Parallel, delayed


def job(seed: int, steps: int) -> float:
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(1)
    envs = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO(
        "MlpPolicy", envs, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98,
        gae_lambda=0.8, ent_coef=0.0, learning_rate=lambda p: 1e-3 * p,
        clip_range=lambda p: 0.2 * p, seed=seed, device="cpu", verbose=0,
    )
    model.learn(steps)
    mean, _ = evaluate_policy(
        model, gym.make("CartPole-v1"), n_eval_episodes=10, deterministic=True
    )
    return float(mean)


if __name__ == "__main__":
    seeds, steps = int(sys.argv[1]), int(sys.argv[2])
    returns = Parallel(n_jobs=2)(delayed(job)(seed, steps) for seed in range(seeds))
    print(json.dumps(returns))
"""


def one_thread_env() -> dict[str, str]:
    """This environment with one BLAS/OpenMP thread a process, as each side's jobs run."""
    caps = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    return {**os.environ, **dict.fromkeys(caps, "1")}


def rlsweep_side(workdir: Path, seeds: int, steps: int) -> tuple[float, list[float]]:
    """The rlsweep command's wall time and its jobs' final returns."""
    sweep = workdir / f"rlsweep-{time.monotonic_ns()}"
    command = [
        sys.executable,
        "-m",
        "rlsweep",
        "-m",
        "+preset=ppo_cartpole",
        f"seed=range({seeds})",
        "n_jobs=2",
        f"eval.every_steps={steps}",
        f"train.total_steps={steps}",
        f"hydra.sweep.dir={sweep}",
    ]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"rlsweep's sweep failed:\n{done.stderr[-3000:]}")
    results = sorted(sweep.glob("*/result.json"))
    if len(results) != seeds:
        raise SystemExit(f"expected {seeds} results in {sweep}, found {len(results)}")
    return wall, [float(json.loads(p.read_text())["final_return"]) for p in results]


def loop_side(workdir: Path, seeds: int, steps: int) -> tuple[float, list[float]]:
    """The SB3 loop's wall time and its seeds' final returns."""
    script = workdir / "sb3_loop.py"
    script.write_text(LOOP)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(script), str(seeds), str(steps)],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
        env=one_thread_env(),
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the SB3 loop failed:\n{done.stderr[-3000:]}")
    return wall, [float(r) for r in json.loads(done.stdout.strip().splitlines()[-1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=100_000, help="env steps a job")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    print(
        f"{args.seeds} seeds x {args.steps:,} steps, {args.pairs} pair(s); machine: "
        f"{cpu()['model']}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.2f} at the start",
        flush=True,
    )
    print("| pair | rlsweep (s) | SB3 loop (s) | ratio | rlsweep mean return | SB3 mean return |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    ratios: list[float] = []
    walls: dict[str, list[float]] = {"rlsweep": [], "sb3": []}
    returns: dict[str, list[float]] = {"rlsweep": [], "sb3": []}
    with tempfile.TemporaryDirectory(prefix="rlsweep-e2e-") as tmp:
        sides = {"rlsweep": rlsweep_side, "sb3": loop_side}
        for pair in range(args.pairs):
            order = ["rlsweep", "sb3"] if pair % 2 == 0 else ["sb3", "rlsweep"]
            got = {name: sides[name](Path(tmp), args.seeds, args.steps) for name in order}
            for name, (wall, rets) in got.items():
                walls[name].append(wall)
                returns[name].append(statistics.fmean(rets))
            ratios.append(got["rlsweep"][0] / got["sb3"][0])
            print(
                f"| {pair + 1} | {got['rlsweep'][0]:.1f} | {got['sb3'][0]:.1f} | "
                f"{ratios[-1]:.2f} | {returns['rlsweep'][-1]:.1f} | {returns['sb3'][-1]:.1f} |",
                flush=True,
            )
    ratio = statistics.median(ratios)
    verdict = "met" if ratio <= GOAL else "NOT met"
    print(f"median ratio {ratio:.2f}, goal <= {GOAL}: {verdict}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    figure = figures.Figure(
        bench="endtoend",
        figure=f"PPO CartPole sweep, {args.seeds} seeds x {args.steps:,} steps, wall (s)",
        rlsweep=statistics.median(walls["rlsweep"]),
        anchor=statistics.median(walls["sb3"]),
        anchor_name="joblib + SB3 loop",
        lower_is_better=True,
        goal=f"ratio <= {GOAL}",
        met=ratio <= GOAL,
        ratio=ratio,
    )
    returned = figures.Figure(
        bench="endtoend",
        figure="mean final return (10 episodes)",
        rlsweep=statistics.median(returns["rlsweep"]),
        anchor=statistics.median(returns["sb3"]),
        anchor_name="joblib + SB3 loop",
        lower_is_better=False,
        goal="as good (read the two)",  # 4 seeds: no test here
        met=None,
    )
    figures.write(args.json, [figure, returned])


if __name__ == "__main__":
    main()
