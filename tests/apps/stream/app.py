"""A Hydra app for streaming launches: each job records when it started and ended (one
JSON line in $STREAM_LOG), sleeps ``sleep_s`` (with ``until``: until the job of that name has
started, ``sleep_s`` at most), and fails when ``fail`` is set.

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


def _started(name: str) -> bool:
    """Whether a job called ``name`` has recorded its start in $STREAM_LOG."""
    with open(os.environ["STREAM_LOG"]) as f:
        for line in f:
            try:
                entry = json.loads(line)
            except ValueError:  # a line being appended
                continue
            if entry["name"] == name and entry["event"] == "start":
                return True
    return False


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, str]:
    start = time.time()
    _record(name=cfg.name, event="start", t=start, pid=os.getpid())
    if cfg.until:
        # Held by what the other jobs do, not by the clock: on a busy machine they may take
        # longer than any fixed time.
        deadline = start + cfg.sleep_s
        while not _started(cfg.until) and time.time() < deadline:
            time.sleep(0.05)
    else:
        time.sleep(cfg.sleep_s)
    _record(name=cfg.name, event="end", t=time.time(), pid=os.getpid())
    if cfg.fail:
        raise RuntimeError(f"planned failure of job {cfg.name}")
    return {"name": str(cfg.name)}


if __name__ == "__main__":
    main()
