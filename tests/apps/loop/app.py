"""A training loop with rlsweep's checkpoint pattern: stop anywhere, resume bit for bit."""

from __future__ import annotations

import random
import time

import hydra
import numpy as np
from omegaconf import DictConfig

import rlsweep


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
@rlsweep.task
def main(cfg: DictConfig) -> dict[str, float]:
    job = rlsweep.current()
    state = job.restore() or {"step": 0, "total": 0.0, "rng": job.seeds.generator("noise")}
    while state["step"] < cfg.steps:
        # Draws from the global RNGs and from the job's own Generator, as training does.
        state["total"] += random.random() + float(np.random.random()) + state["rng"].random()
        state["step"] += 1
        job.log(state["step"], total=state["total"])
        time.sleep(cfg.sleep_s)
        job.checkpoint(state, every_s=cfg.checkpoint_every_s)
    return {"total": state["total"], "resumed": len(job.resumed_at)}


if __name__ == "__main__":
    main()
