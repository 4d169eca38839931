"""A Hydra app whose library writes a timestamped plain-text log beside deterministic
series, as MuJoCo writes ``MUJOCO_LOG.TXT`` in the working directory (TorchRL's MuJoCo PPO),
and imports nothing from rlsweep (the tests opt in on the command line: ``+rlsweep=serial``).

It "trains" for ``steps`` steps, its numbers drawn from a numpy generator seeded by
``seed``, and logs them as TorchRL's ``CSVLogger`` does (``ppo/scalars/<name>.csv``, a
``step,value`` line each), writing ``MUJOCO_LOG.TXT`` (the date and time, then a warning)
(its time to the microsecond: the two runs' logs always differ) and ``train.log`` (Python's
logging: a time and the process id on each line) as it goes.

``CHECK_APP_NOISY=<name>`` (``eval/return`` or ``train/loss``): that series gets OS entropy
from step ``noisy_from`` on, a job made nondeterministic on purpose.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import hydra
import numpy as np
from omegaconf import DictConfig

log = logging.getLogger("trainer")


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    handler = logging.FileHandler("train.log")  # the job directory: hydra.job.chdir
    handler.setFormatter(logging.Formatter("%(asctime)s [pid %(process)d] %(message)s"))
    log.addHandler(handler)
    noisy = os.environ.get("CHECK_APP_NOISY")
    rng = np.random.default_rng(cfg.seed)
    scalars = Path("ppo") / "scalars"
    (scalars / "eval").mkdir(parents=True)
    (scalars / "train").mkdir()
    for step in range(cfg.steps):
        values = {"train/loss": float(rng.random()), "eval/return": float(rng.normal())}
        if noisy in values and step >= cfg.noisy_from:
            values[noisy] += int.from_bytes(os.urandom(2), "little") / 1e3
        for metric, value in values.items():
            with (scalars / f"{metric}.csv").open("a") as f:
                f.write(f"{step},{value}\n")
        log.warning("step %d: loss %.4f", step, values["train/loss"])
        if step == cfg.noisy_from:  # what MuJoCo writes when a simulation goes unstable
            with open("MUJOCO_LOG.TXT", "a") as f:
                now = time.time()
                stamp = time.strftime("%a %b %d %H:%M:%S", time.localtime(now))
                year = time.strftime("%Y", time.localtime(now))
                f.write(f"{stamp}.{int(now % 1 * 1e6):06d} {year}\nWARNING: Nan, Inf or huge ")
                f.write(f"value in QACC at DOF 0. The simulation is unstable. Time = {step}.\n\n")
    handler.close()


if __name__ == "__main__":
    main()
