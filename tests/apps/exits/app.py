"""An app one of whose jobs ends its own process (tests/test_exits.py). It imports nothing
from rlsweep, nor torch.

The job with ``x == exit_x`` calls ``os._exit(exit_code)`` (``how=os_exit``) or
``sys.exit(exit_code)`` (``how=sys_exit``) inside an ``except Exception`` that would hide
an ordinary error, or starts a thread that calls ``os._exit(exit_code)`` (``how=thread``).
The other jobs sleep ``sleep_s`` (still running when it exits), then return a score. Every
job first appends its pid to ``ran.txt`` in its directory (a line per execution), and with
``fork=true`` runs a multiprocessing fork child that writes ``child.txt`` and ends
normally (multiprocessing ends it with ``os._exit``)."""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


def child(path: str) -> None:
    Path(path).write_text(str(os.getpid()))


def run_child(out: Path) -> None:
    process = multiprocessing.get_context("fork").Process(
        target=child, args=(str(out / "child.txt"),)
    )
    process.start()
    process.join(60)
    if process.exitcode != 0:
        raise RuntimeError(f"the fork child ended with exit code {process.exitcode}")


def end_process(how: str, code: int) -> None:
    try:
        if how == "sys_exit":
            sys.exit(code)
        if how == "thread":
            threading.Thread(target=os._exit, args=(code,)).start()
            time.sleep(60)
        os._exit(code)
    except Exception:  # an app's catch-all: must not hide the exit
        pass


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    out = Path(HydraConfig.get().runtime.output_dir)
    with open(out / "ran.txt", "a") as f:
        f.write(f"{os.getpid()}\n")
    if cfg.fork:
        run_child(out)
    if cfg.x == cfg.exit_x:
        end_process(cfg.how, cfg.exit_code)
    else:
        time.sleep(cfg.sleep_s)
    return {"score": float(cfg.x)}


if __name__ == "__main__":
    main()
