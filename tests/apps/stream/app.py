"""A Hydra app for streaming launches: each job records when it started and ended (one
JSON line in $STREAM_LOG), sleeps ``sleep_s``, and fails when ``fail`` is set.

Its sweeper (hydra_plugins/stream_sweeper.py) launches through ``launch_stream``."""

from __future__ import annotations

import json
import os
import time

import hydra
from omegaconf import DictConfig


def _record(**entry: object) -> None:
    with open(os.environ["STREAM_LOG"], "a") as f:  # one short line: appended whole
        f.write(json.dumps(entry) + "\n")


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, str]:
    start = time.time()
    _record(name=cfg.name, event="start", t=start, pid=os.getpid())
    time.sleep(cfg.sleep_s)
    _record(name=cfg.name, event="end", t=time.time(), pid=os.getpid())
    if cfg.fail:
        raise RuntimeError(f"planned failure of job {cfg.name}")
    return {"name": str(cfg.name)}


if __name__ == "__main__":
    main()
