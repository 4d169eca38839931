"""A Hydra app for comparisons: its score is ``mean`` plus a standard normal draw from its
own shared seed (common random numbers: two arms at the same replicate draw the same noise),
so arms with equal means score exactly the same."""

from __future__ import annotations

import os

import hydra
import numpy as np
from omegaconf import DictConfig

import rlsweep


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
@rlsweep.task(keys=rlsweep.Keys(agent=("arm", "mean")))
def main(cfg: DictConfig) -> dict[str, float]:
    job = rlsweep.current()
    log = os.environ.get("COMPARE_APP_LOG")
    if log:  # one line per execution, to count them
        with open(log, "a") as f:
            f.write(job.directory.name + "\n")
    if os.environ.get("COMPARE_APP_FAIL") == f"{cfg.mean}:{job.replicate}":
        raise RuntimeError(f"planned failure of mean={cfg.mean} at replicate {job.replicate}")
    noise = np.random.default_rng(job.seeds.seed("noise", shared=True)).standard_normal()
    return {"score": float(cfg.mean) + float(noise)}


if __name__ == "__main__":
    main()
