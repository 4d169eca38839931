"""A Hydra app to search: its score peaks at lr = 10**-2.5, plus noise drawn from the job's
own seeds (so replicates differ, and the same job gives the same score anywhere). How long
it sleeps is not what a job is (its identity ignores sleep_s), nor where its score goes
(log_only=true: returned as nothing, logged as an app with its own logger would)."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

import rlsweep


def on_sweep_end(sweep_dir: Path) -> None:
    """rlsweep's summary and report when SEARCH_APP_REPORT=1 (they take seconds)."""
    if os.environ.get("SEARCH_APP_REPORT") == "1":
        from rlsweep.summary import summarize

        summarize(sweep_dir)


def log_score(score: float) -> None:
    """The score as TorchRL's CSVLogger writes a metric: ``step,value`` lines in
    ``logs/scalars/eval/score.csv`` in the job's directory, an earlier value first."""
    path = Path(HydraConfig.get().runtime.output_dir, "logs", "scalars", "eval", "score.csv")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"0,{score - 1.0!r}\n100,{score!r}\n")


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
@rlsweep.task(keys=rlsweep.Keys(ignore=("sleep_s", "log_only")), on_sweep_end=on_sweep_end)
def main(cfg: DictConfig) -> dict[str, float] | None:
    if cfg.fail_above is not None and cfg.lr > cfg.fail_above:
        raise RuntimeError(f"lr={cfg.lr} diverged")
    time.sleep(cfg.sleep_s)
    noise = float(rlsweep.current().seeds.generator("noise").normal())
    score = -((math.log10(cfg.lr) + 2.5) ** 2) + cfg.noise * noise + cfg.width
    if cfg.log_only:
        log_score(score)
        return None
    return {"score": score} if not cfg.two_numbers else {"score": score, "other": 0.0}


if __name__ == "__main__":
    main()
