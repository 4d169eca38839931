"""A Hydra app searched by Hydra's own Optuna sweeper over rlsweep's launcher: its score
depends on the searched ``x`` and, through numpy's global RNG (seeded by rlsweep from the
job's identity), on its replicate ``seed``. It imports nothing from rlsweep."""

from __future__ import annotations

import os

import hydra
import numpy as np
from omegaconf import DictConfig


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    # OPTUNA_APP_FAIL_BELOW=<v>: the replicate seed=1 of every trial with x < v raises.
    below = os.environ.get("OPTUNA_APP_FAIL_BELOW")
    if below is not None and cfg.seed == 1 and cfg.x < float(below):
        raise RuntimeError(f"planned failure at x={cfg.x}, seed={cfg.seed}")
    noise = float(np.random.standard_normal())
    return {"score": -((float(cfg.x) - 0.3) ** 2) + 0.05 * noise, "x": float(cfg.x)}


if __name__ == "__main__":
    main()
