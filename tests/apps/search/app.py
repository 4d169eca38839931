"""A Hydra app to search: its score peaks at lr = 10**-2.5, plus noise drawn from the job's
own seeds (so replicates differ, and the same job gives the same score anywhere). How long
it sleeps is not what a job is (its identity ignores sleep_s)."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import hydra
from omegaconf import DictConfig

import rlsweep


def on_sweep_end(sweep_dir: Path) -> None:
    """rlsweep's summary and report when SEARCH_APP_REPORT=1 (they take seconds)."""
    if os.environ.get("SEARCH_APP_REPORT") == "1":
        from rlsweep.summary import summarize

        summarize(sweep_dir)


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
@rlsweep.task(keys=rlsweep.Keys(ignore=("sleep_s",)), on_sweep_end=on_sweep_end)
def main(cfg: DictConfig) -> dict[str, float]:
    if cfg.fail_above is not None and cfg.lr > cfg.fail_above:
        raise RuntimeError(f"lr={cfg.lr} diverged")
    time.sleep(cfg.sleep_s)
    noise = float(rlsweep.current().seeds.generator("noise").normal())
    score = -((math.log10(cfg.lr) + 2.5) ** 2) + cfg.noise * noise + cfg.width
    return {"score": score} if not cfg.two_numbers else {"score": score, "other": 0.0}


if __name__ == "__main__":
    main()
