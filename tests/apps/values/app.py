"""An app that returns what its config names: a finite number, NaN (``not_a_number``), an
infinity (``infinity``, ``minus_infinity``), or an integer too large for a float (``huge``:
10**400). It imports nothing from rlsweep."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float | int]:
    named = {"not_a_number": "nan", "infinity": "inf", "minus_infinity": "-inf"}
    value = 10**400 if cfg.value == "huge" else float(named.get(cfg.value, cfg.value))
    return {"return": value, "loss": float(cfg.seed)}


if __name__ == "__main__":
    main()
