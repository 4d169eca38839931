"""A third-party Hydra app that imports nothing from rlsweep: it draws from the global
RNGs, records the draws in its output directory and returns a score."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    out = Path(HydraConfig.get().runtime.output_dir)
    log = os.environ.get("PLAIN_APP_LOG")
    if log:  # one line per execution, to count them
        with open(log, "a") as f:
            f.write(out.name + "\n")
    record = os.environ.get("PLAIN_APP_RECORD")
    if record:  # one file per execution: what it saw, and when it ran
        seen = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "RAY_RAYLET_PID")}
        path = Path(record, f"{out.name}.{time.time_ns()}.{os.getpid()}.json")
        path.with_suffix(".tmp").write_text(
            json.dumps({"job": out.name, "start": time.time(), "nice": os.nice(0), **seen})
        )
        path.with_suffix(".tmp").replace(path)  # whole, for a reader polling the directory
    sleeper = os.environ.get("PLAIN_APP_SLEEP_X")  # set: only the job with this x sleeps
    if sleeper is None or cfg.x == int(sleeper):
        time.sleep(float(os.environ.get("PLAIN_APP_SLEEP_S", "0")))  # a job that lasts
    if cfg.fail_x is not None and cfg.x == cfg.fail_x:
        once = os.environ.get("PLAIN_APP_FAIL_ONCE")  # a file: fail only while it exists
        if once is None or os.path.exists(once):
            if once is not None:
                os.unlink(once)
            raise RuntimeError(f"planned failure at x={cfg.x}")
    draws = {"random": random.random(), "numpy": float(np.random.random())}
    (out / "draws.json").write_text(json.dumps(draws))
    return {"score": float(cfg.x) * cfg.lr + draws["random"]}


if __name__ == "__main__":
    main()
