"""A Hydra app for comparisons: its score is ``mean`` plus a standard normal draw from its
own shared seed (common random numbers: two arms at the same replicate draw the same noise),
so arms with equal means score exactly the same. With log_only=true (not part of what a job
is) the score is not returned but logged, as TorchRL's CSVLogger writes a metric."""

from __future__ import annotations

import os
from pathlib import Path

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

import rlsweep


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
@rlsweep.task(keys=rlsweep.Keys(agent=("arm", "mean"), ignore=("log_only",)))
def main(cfg: DictConfig) -> dict[str, float] | None:
    job = rlsweep.current()
    log = os.environ.get("COMPARE_APP_LOG")
    if log:  # one line per execution, to count them
        with open(log, "a") as f:
            f.write(job.directory.name + "\n")
    if os.environ.get("COMPARE_APP_FAIL") == f"{cfg.mean}:{job.replicate}":
        raise RuntimeError(f"planned failure of mean={cfg.mean} at replicate {job.replicate}")
    noise = np.random.default_rng(job.seeds.seed("noise", shared=True)).standard_normal()
    score = float(cfg.mean) + float(noise)
    if cfg.log_only:  # logs/scalars/eval/score.csv: step,value lines, an earlier value first
        path = Path(HydraConfig.get().runtime.output_dir, "logs", "scalars", "eval", "score.csv")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"0,{score - 1.0!r}\n100,{score!r}\n")
        return None
    return {"score": score}


if __name__ == "__main__":
    main()
