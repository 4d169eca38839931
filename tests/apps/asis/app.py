"""A third-party Hydra app as people publish them: it imports nothing from rlsweep, keeps its
seed at ``env.seed`` (or seeds nothing, ``seeding: none``), has its own ``logger:``,
``search:`` and ``compare:`` sections, and returns nothing: what it computes goes to files.

It plays a few CartPole episodes with random actions, from gymnasium envs reset without a
seed unless told (``seeding: env``), optionally in an async vector env whose workers are
forked or spawned (``vector: fork`` / ``spawn``) or started the default way (``vector: default``,
as most apps write it: ``AsyncVectorEnv(fns)``), and writes what it drew to ``draws.json``
and its episode returns to ``returns.csv`` (step, value) in its output directory.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import gymnasium as gym
import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf


def episodes(env: gym.Env, n: int, seed: int | None) -> list[float]:
    returns = []
    env.action_space.seed(seed)
    for i in range(n):
        env.reset(seed=None if seed is None or i else seed)
        done, total = False, 0.0
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return returns


def vector_starts(context: str, seed: int | None) -> list[list[float]]:
    """The first observation of each of two sub-envs, in worker processes."""
    envs = gym.vector.AsyncVectorEnv(
        [lambda: gym.make("CartPole-v1")] * 2, context=None if context == "default" else context
    )
    obs, _ = envs.reset(seed=None if seed is None else [seed, seed + 1])
    envs.close()
    return [[float(x) for x in row] for row in obs]


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    out = Path(HydraConfig.get().runtime.output_dir)
    seed = cfg.env.seed if cfg.seeding == "env" else None
    if seed is not None:
        random.seed(seed)
        np.random.seed(seed)
    returns = episodes(gym.make("CartPole-v1"), cfg.episodes, seed)
    starts = vector_starts(cfg.vector, seed) if cfg.vector != "none" else []
    with (out / "returns.csv").open("w") as f:
        f.write("step,eval_return\n")
        f.writelines(f"{i},{r}\n" for i, r in enumerate(returns))
    draws = {
        "seed_read": cfg.env.seed,
        "random": random.random(),
        "numpy": float(np.random.random()),
        "default_rng": float(np.random.default_rng().random()),
        "returns": returns,
        "vector_starts": starts,
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
    if os.environ.get("ASIS_NONDETERMINISTIC"):  # a job that differs run to run, on purpose
        draws["entropy"] = int.from_bytes(os.urandom(4), "little")
    if cfg.fail_at_lr is not None and cfg.optim.lr == cfg.fail_at_lr:
        raise RuntimeError(f"planned failure at optim.lr={cfg.optim.lr}")
    (out / "draws.json").write_text(json.dumps(draws, sort_keys=True))


if __name__ == "__main__":
    main()
