"""An app whose numbers depend on the kernels that round them: float32 products (OpenBLAS's
kernels) and float64 exp and log (numpy's SIMD loops), in a checkpointed loop."""

from __future__ import annotations

import hashlib

import hydra
import numpy as np
from omegaconf import DictConfig

import rlsweep


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
@rlsweep.task
def main(cfg: DictConfig) -> dict[str, float | str]:
    job = rlsweep.current()
    state = job.restore()
    if state is None:
        rng = job.seeds.generator("data")
        inputs = rng.standard_normal((256, 64)).astype(np.float32)
        weights = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
        state = {"step": 0, "inputs": inputs, "weights": weights, "x": rng.standard_normal(512)}
    while state["step"] < cfg.steps:
        hidden = np.tanh(np.dot(state["inputs"], state["weights"]))
        state["weights"] -= np.float32(1e-3) * np.dot(state["inputs"].T, hidden)
        state["x"] = np.log(np.exp(0.5 * state["x"]) + 1.0) - 0.4
        state["step"] += 1
        job.checkpoint(state, every_s=0.0)
        if state["step"] == cfg.fail_at and not (job.directory / "failed_once").exists():
            (job.directory / "failed_once").touch()
            raise RuntimeError(f"failing once at step {cfg.fail_at}, after its checkpoint")
    bits = hashlib.sha256(state["weights"].tobytes() + state["x"].tobytes()).hexdigest()
    return {"score": float(state["weights"].sum()), "bits": bits}


if __name__ == "__main__":
    main()
