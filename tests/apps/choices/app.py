"""An app that chooses code by the *name* of a config-group option, as multi-algorithm
benchmarks do: ``algo=a`` and ``algo=b`` hold identical values (``lr: 0.1``) and differ
only in the code they select, read from ``HydraConfig.get().runtime.choices``. It imports
nothing from rlsweep; it returns a number that says which option ran, and writes the seed it
read to ``seed.txt``."""

from __future__ import annotations

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

# What each algorithm's code computes (its options are configured alike).
ALGORITHMS = {"a": 1.0, "b": 2.0}


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    choices = HydraConfig.get().runtime.choices
    out = Path(HydraConfig.get().runtime.output_dir)
    (out / "seed.txt").write_text(str(cfg.seed))
    return ALGORITHMS[choices["algo"]] + cfg.task.size / 100 + cfg.seed % 1000 / 1e7


if __name__ == "__main__":
    main()
