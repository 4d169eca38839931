"""The chaos soak's app: a small training-loop-shaped job on rlsweep's public API.

Each iteration draws a random matrix from the job's own Generator and one number from
numpy's global RNG (seeded, checkpointed and restored by rlsweep), updates a weight
matrix with a few matrix products, logs a metrics row and checkpoints (``every_s=0``: after
every iteration), so a job killed anywhere resumes from its last iteration and must end
with exactly the numbers of an uninterrupted run.

With ``CHAOS_EXEC_LOG`` set, every start of the task (fresh or resumed), every iteration
and the task's return are appended to that file (outside the sweep directory), one JSON
line each: the soak reads it to tell whether a job ran again after it had finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

import hydra
import numpy as np
from omegaconf import DictConfig

import rlsweep


def exec_log(event: str, job: rlsweep.Job, **fields: Any) -> None:
    """Append one event of this job to ``$CHAOS_EXEC_LOG`` (one ``write``: O_APPEND keeps
    lines from several processes whole)."""
    path = os.environ.get("CHAOS_EXEC_LOG")
    if not path:
        return
    line = {
        "event": event,
        "job": job.directory.name,
        "pid": os.getpid(),
        "run": os.environ.get("CHAOS_RUN", ""),
        "t": time.time_ns(),
        **fields,
    }
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
@rlsweep.task(keys=rlsweep.Keys(agent=("lr",)))
def main(cfg: DictConfig) -> dict[str, Any]:
    job = rlsweep.current()
    n = int(cfg.n)
    state = job.restore()
    if state is None:
        init = job.seeds.generator("init")
        state = {
            "step": 0,
            "w": init.standard_normal((n, n)) / np.sqrt(n),
            "rng": job.seeds.generator("data"),
        }
    exec_log("start", job, step=state["step"])
    iters = int(cfg.iters) + int(cfg.extra_iters) * job.replicate
    lr = float(cfg.lr)
    while state["step"] < iters:
        w = state["w"]
        x = state["rng"].standard_normal((n, n)) / np.sqrt(n)
        for _ in range(int(cfg.inner)):
            w = (1.0 - lr) * w + lr * np.tanh(w @ x)
        w = w + 1e-3 * float(np.random.random())  # numpy's global RNG, restored on resume
        state["w"] = w
        state["step"] += 1
        job.log(state["step"], loss=float(np.mean(w * w)), trace=float(np.trace(w)))
        exec_log("step", job, step=state["step"])
        job.checkpoint(state, every_s=0)
    w = state["w"]
    exec_log("return", job, step=state["step"])
    return {
        "loss": float(np.mean(w * w)),
        "trace": float(np.trace(w)),
        "steps": int(state["step"]),
        "w_sha256": hashlib.sha256(np.ascontiguousarray(w).tobytes()).hexdigest(),
    }


if __name__ == "__main__":
    main()
