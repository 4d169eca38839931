"""An app whose job leaves sub-processes running, as a TorchRL collector's env workers do
when the job fails: it starts ``children`` processes (``start``: fork or spawn; not daemons)
that sleep for ``sleep_s`` and writes their pids to ``children.txt``, then raises when
``fail`` is set. It imports nothing from rlsweep."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


def sleep(seconds: float) -> None:
    time.sleep(seconds)


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    context = multiprocessing.get_context(cfg.start)
    children = [context.Process(target=sleep, args=(cfg.sleep_s,)) for _ in range(cfg.children)]
    for child in children:
        child.start()
    out = Path(HydraConfig.get().runtime.output_dir)
    (out / "children.txt").write_text(" ".join(str(c.pid) for c in children))
    if cfg.fail:
        raise RuntimeError("planned failure with sub-processes still running")
    return 1.0


if __name__ == "__main__":
    main()
