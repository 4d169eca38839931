"""A third-party Hydra app that logs to TensorBoard through torch's ``SummaryWriter`` (or
tensorboardX's, ``writer: tensorboardx``, as rl_games and the apps built on it do) and,
like TorchRL's published apps, never closes it (in its job's directory, or below the
directory the command ran in: ``log_dir: logs``); it returns nothing (or raises, after
logging, when ``x == fail_x``).

``busy: true`` stands for a machine too busy to schedule the writer's background thread
before the process exits: the app stops Python switching threads (a 60 s switch interval)
while it logs, so every event is still queued when its task function returns.
"""

from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


@hydra.main(config_path=".", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    out = HydraConfig.get().runtime.output_dir
    if cfg.writer == "tensorboardx":
        from tensorboardX import SummaryWriter
    else:
        from torch.utils.tensorboard import SummaryWriter
    # In its job's directory, or (like sheeprl) below the directory the command ran in.
    log_dir = f"{out}/tb" if cfg.log_dir is None else f"{cfg.log_dir}/x{cfg.x}"
    writer = SummaryWriter(log_dir, max_queue=1000)  # never closed
    if cfg.busy:
        sys.setswitchinterval(60)
    for step in range(cfg.points):
        writer.add_scalar("eval/reward", float(cfg.x * step), step)
    if cfg.x == cfg.fail_x:
        raise RuntimeError(f"planned failure at x={cfg.x}, after logging")


if __name__ == "__main__":
    main()
