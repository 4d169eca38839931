"""A Hydra app using rlsweep's public API: per-purpose seeds, metrics, a returned result."""

from __future__ import annotations

import json

import hydra
import numpy as np
from omegaconf import DictConfig

import rlsweep


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
@rlsweep.task(keys=rlsweep.Keys(agent=("algo", "lr"), ignore=("tag",)))
def main(cfg: DictConfig) -> dict[str, float]:
    job = rlsweep.current()
    seeds = {
        "env": job.seeds.seeds("env", 3, shared=True),
        "policy": job.seeds.seed("policy"),
        "yaml_env": int(cfg.env_seed),
        "global": float(np.random.random()),
        "generator": float(job.seeds.generator("policy").random()),
    }
    (job.directory / "api_seeds.json").write_text(json.dumps(seeds))
    for step in (1, 2):
        job.log(step, value=step * cfg.lr)
    return {"score": cfg.lr * (job.replicate + 1)}


if __name__ == "__main__":
    main()
