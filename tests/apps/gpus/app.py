"""A Hydra app whose jobs record what they see: CUDA_VISIBLE_DEVICES, their process and
when they ran (tests/test_gpus.py). No GPU is used: the devices are declared.

Each job writes ``started.json`` as it starts, waits (at most ``wait_s``) until
``together`` jobs of the sweep run at once, or as many as are left (a sweep that can run
that many at once shows it whatever the machine's load), holds its slot ``hold_s`` more
seconds and writes ``ended.json``. Every execution adds a line to ``runs.txt``. With
GPUS_APP_CRASH_ONCE=<x>:<file>, job x kills its own process while the file exists
(removing it: once)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

# The process that loaded this module: a worker forked from the sweep's process inherits
# the sweep's (and whatever it initialised, CUDA included).
LOADED_IN = os.getpid()


def _count(sweep: Path, name: str) -> int:
    return sum(1 for _ in sweep.glob(f"*/{name}"))


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    out = Path(HydraConfig.get().runtime.output_dir)
    seen = {
        "x": cfg.x,
        "pid": os.getpid(),
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "loaded_in": getattr(sys.modules.get("__main__"), "LOADED_IN", None),
        "start": time.time(),
    }
    (out / "started.json").write_text(json.dumps(seen))
    with open(out / "runs.txt", "a") as runs:  # one line per execution
        runs.write(f"{os.getpid()} {seen['cuda']}\n")
    crash = os.environ.get("GPUS_APP_CRASH_ONCE")  # "<x>:<file>": that job dies, once
    if crash and int(crash.split(":", 1)[0]) == cfg.x and os.path.exists(crash.split(":", 1)[1]):
        os.unlink(crash.split(":", 1)[1])
        os.kill(os.getpid(), signal.SIGKILL)  # a worker the OS killed
    deadline = time.monotonic() + cfg.wait_s
    while True:
        ended = _count(out.parent, "ended.json")
        if _count(out.parent, "started.json") - ended >= min(cfg.together, cfg.total - ended):
            seen["waited_out"] = False
            break
        if time.monotonic() > deadline:
            seen["waited_out"] = True
            break
        time.sleep(0.05)
    time.sleep(cfg.hold_s)
    seen["end"] = time.time()
    (out / "ended.json").write_text(json.dumps(seen))
    return {"score": float(cfg.x)}


if __name__ == "__main__":
    main()
