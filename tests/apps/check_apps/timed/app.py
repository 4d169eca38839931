"""A Hydra app that names its run folder by time and a random hash, as BenchMARL and
TorchRL's loggers do (``outputs/<algo>_<env>_<hash>_<date>_<time>/``), and imports nothing
from rlsweep (the tests opt in on the command line: ``+rlsweep=serial``).

It "trains" for ``steps`` steps, its numbers drawn from a numpy generator seeded by
``seed``, and writes them with TensorBoard's own event writer: ``train/reward``,
``train/loss`` and ``time/fps`` into the run folder, and, at the same time, a monitor's
``train/reward`` into ``monitor/`` (two writers logging one tag at once: the run folder's
series is named by its path, hash and time included). It pickles its config and the run
folder's name to ``config.pkl`` in the run folder, and writes ``final.json``.

``CHECK_APP_NOISY=<tag>`` (``train/reward`` or ``train/loss``): the run folder's writer adds
OS entropy to that tag from step ``noisy_from`` on, a job made nondeterministic on purpose.
"""

from __future__ import annotations

import json
import os
import pickle
import secrets
import time
from pathlib import Path

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter


def scalars(writer: EventFileWriter, step: int, values: dict[str, float]) -> None:
    summary = Summary(value=[Summary.Value(tag=t, simple_value=v) for t, v in values.items()])
    writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    out = Path(HydraConfig.get().runtime.output_dir)
    # The hash from OS entropy and the time of day: another name on every run.
    name = f"ppo_cartpole_{secrets.token_hex(3)}_{time.strftime('%Y-%m-%d_%H-%M-%S')}"
    run = out / "outputs" / name
    run.mkdir(parents=True)
    (run / "config.pkl").write_bytes(
        pickle.dumps({"config": OmegaConf.to_container(cfg), "run_name": name})
    )
    noisy = os.environ.get("CHECK_APP_NOISY")
    rng = np.random.default_rng(cfg.seed)
    writer, monitor = EventFileWriter(str(run)), EventFileWriter(str(out / "monitor"))
    reward = 0.0
    for step in range(cfg.steps):
        values = {"train/reward": float(rng.normal()), "train/loss": float(rng.random())}
        values["time/fps"] = 1000.0 / (1.0 + time.perf_counter() % 1.0)
        if noisy in values and step >= cfg.noisy_from:
            values[noisy] += int.from_bytes(os.urandom(2), "little") / 1e3
        scalars(writer, step, values)
        reward = values["train/reward"]
        scalars(monitor, step, {"train/reward": step / 2})
    writer.close()
    monitor.close()
    (out / "final.json").write_text(json.dumps({"reward": reward}))


if __name__ == "__main__":
    main()
