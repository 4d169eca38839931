"""When does ``env.vectorization=async`` pay off? PPO's steps per second, sync against async.

    python bench/vectorization.py              # writes the Markdown table to stdout

The same rlsweep PPO (the CartPole zoo settings of ``bench/agents.py``: 8 sub-envs,
n_steps 32, batch 256, 20 epochs) trains on each env twice, with the job's own vector env (``make_vector_env``,
snapshot wrappers included), once per vectorization mode, alternating modes over
``--repeats`` runs; each cell is the median. Envs:

- ``CartPole-v1``: a step costs microseconds; async adds a pipe round trip per step.
- ``rlsweep/Fault-v0`` with ``step_delay_s``: CartPole whose every step sleeps, as a slow
  simulator or an env waiting on I/O does; async steps the 8 sub-envs at once.

Results are identical in both modes (``tests/test_agents_dqn_es.py``); only speed differs.
"""

from __future__ import annotations

import argparse
import platform
import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import torch
from agents import PPO_CARTPOLE, time_training  # bench/agents.py

from rlsweep.agents import ppo
from rlsweep.config import EnvConfig
from rlsweep.numerics import cpu
from rlsweep.threads import limit_blas


@dataclass
class Case:
    label: str
    env_id: str
    steps: int
    kwargs: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("CartPole-v1", "CartPole-v1", 16_384),
    Case(
        "CartPole, 1 ms sleep per step",
        "rlsweep/Fault-v0",
        4_096,
        {"fault": "none", "step_delay_s": 0.001},
    ),
    Case(
        "CartPole, 5 ms sleep per step",
        "rlsweep/Fault-v0",
        2_048,
        {"fault": "none", "step_delay_s": 0.005},
    ),
]


def run(case: Case, mode: str, seed: int) -> float:
    """Train for ``case.steps`` env steps; return the wall time (env start-up excluded)."""
    env = EnvConfig(id=case.env_id, kwargs=case.kwargs, vectorization=mode)
    return time_training(ppo, ppo.Config(**PPO_CARTPOLE), env, case.steps, seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    limit_blas(1)  # numpy's products on one thread, as in a job
    rows = []
    for case in CASES:
        times: dict[str, list[float]] = {"sync": [], "async": []}
        for rep in range(args.repeats):
            for mode in ("sync", "async") if rep % 2 == 0 else ("async", "sync"):
                times[mode].append(run(case, mode, rep))
        sync, asyn = (case.steps / statistics.median(times[m]) for m in ("sync", "async"))
        rows.append((case, sync, asyn))
        print(f"# {case.label}: sync {sync:,.0f} steps/s, async {asyn:,.0f} steps/s", flush=True)
    print()
    print(
        f"- {cpu()['model']}, {platform.system()} {platform.release()}, 1 torch thread, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, median of {args.repeats} runs"
    )
    print()
    print("| env | env steps | sync steps/s | async steps/s | async / sync |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for case, sync, asyn in rows:
        print(f"| {case.label} | {case.steps:,} | {sync:,.0f} | {asyn:,.0f} | {asyn / sync:.2f}x |")


if __name__ == "__main__":
    main()
