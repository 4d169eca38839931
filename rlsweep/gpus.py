"""GPUs shared between a sweep's jobs (``hydra.launcher.gpus_per_job``, ``hydra.launcher.gpus``).

- The devices: the declared list, else what this machine shows: CUDA_VISIBLE_DEVICES if
  set, else ``nvidia-smi -L``, else /proc/driver/nvidia/gpus (never by initialising CUDA
  in the sweep's process).
- A job's share: a whole number of GPUs (each job its own devices) or 1/k of one (k jobs
  to a device).
- Lanes: the device groups jobs are spread over, each with its slots. A running job holds
  one slot of one lane and sees only that lane's devices through CUDA_VISIBLE_DEVICES, set
  in its process before anything can initialise CUDA. CUDA reads that variable once per
  process, so a worker process belongs to one lane for its life.
- In the job: the devices it was given (RLSWEEP_GPUS), for its ``result.json`` and its log.
  Where a job ran is not what it is: its identity, directory and seeds never depend on it.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlsweep.errors import ConfigError

CUDA_ENV = "CUDA_VISIBLE_DEVICES"
# Set in a job's process by rlsweep: its devices (comma-separated) and its share of a GPU.
GPUS_ENV = "RLSWEEP_GPUS"
SHARE_ENV = "RLSWEEP_GPUS_PER_JOB"

SHARE_KEY = "hydra.launcher.gpus_per_job"
DEVICES_KEY = "hydra.launcher.gpus"
NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")


def check_share(value: float | None, key: str = SHARE_KEY) -> float:
    """A job's GPUs: a whole number, or exactly 1/k of one (0.33 is read as a third); 0.0
    for none (null or 0). A ConfigError naming ``key`` otherwise."""
    if value is None or value == 0:
        return 0.0
    v = float(value)
    if math.isfinite(v) and v > 0:
        if v >= 1 and v.is_integer():
            return v
        k = round(1 / v)
        if v < 1 and k >= 2 and abs(k * v - 1) <= 0.011:
            return 1 / k
    raise ConfigError(
        f"{key}={value!r} is not allowed: give a whole number of GPUs per job (1, 2, ...) "
        "or a share 1/k of one, k jobs to a GPU (0.5, 0.25, 0.2, 0.333 for a third), "
        "or null for no GPU."
    )


def check_devices(devices: Sequence[Any] | None) -> tuple[str, ...]:
    """The declared devices as CUDA_VISIBLE_DEVICES entries (indices or UUIDs); () if none
    were declared. A ConfigError naming the key for an empty, repeated or malformed entry."""
    if devices is None:
        return ()
    if isinstance(devices, str | int):
        devices = str(devices).split(",")
    names = tuple(str(d).strip() for d in devices)
    bad = [n for n in names if not n or "," in n or n.startswith("-")]
    if not names or bad or len(set(names)) != len(names):
        raise ConfigError(
            f"{DEVICES_KEY}={list(devices)!r} is not allowed: list distinct devices as "
            "CUDA_VISIBLE_DEVICES names them (indices such as [0,1], or GPU UUIDs), or "
            "null for the GPUs this machine shows."
        )
    return names


def machine_gpus() -> tuple[tuple[str, ...], str]:
    """The GPUs this machine shows, and where that was read (for messages)."""
    visible = os.environ.get(CUDA_ENV)
    if visible is not None:
        found: list[str] = []
        for entry in (e.strip() for e in visible.split(",")):
            if not entry or entry.startswith("-"):  # CUDA ignores what follows
                break
            found.append(entry)
        return tuple(found), f"{CUDA_ENV}={visible!r}"
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            out = subprocess.run(
                [smi, "-L"], capture_output=True, text=True, timeout=30, check=False
            ).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            out = ""
            where = f"nvidia-smi -L failed: {exc}"
        else:
            where = "nvidia-smi -L"
        count = sum(line.startswith("GPU ") for line in out.splitlines())
        if count:
            return tuple(str(i) for i in range(count)), where
    count = len(list(NVIDIA_PROC.iterdir())) if NVIDIA_PROC.is_dir() else 0
    where = f"{CUDA_ENV} unset, no GPU from nvidia-smi, {NVIDIA_PROC}: {count}"
    return tuple(str(i) for i in range(count)), where


def share_text(share: float) -> str:
    """``1/4 GPU`` or ``2 GPUs``: a share as the messages say it."""
    if share >= 1:
        return f"{share:g} GPU{'s' if share > 1 else ''}"
    return f"1/{round(1 / share)} GPU"


@dataclass
class Lanes:
    """The lanes of a launch: each lane's devices, and the jobs it runs at once.

    Without GPUs there is one lane of ``limit`` slots, with no devices."""

    devices: list[tuple[str, ...]]
    capacity: int  # jobs one lane runs at once
    share: float = 0.0
    limit: int = 1  # jobs running at once, over every lane (n_jobs)
    running: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.running = [0] * len(self.devices)

    @staticmethod
    def create(devices: Sequence[str], share: float, limit: int) -> Lanes:
        if not share:
            return Lanes([()], limit, 0.0, limit)
        if share >= 1:
            m = int(share)
            groups = [tuple(devices[i : i + m]) for i in range(0, len(devices) - m + 1, m)]
            return Lanes(groups, 1, share, limit)
        return Lanes([(d,) for d in devices], round(1 / share), share, limit)

    @property
    def slots(self) -> int:
        """Jobs that may run at once."""
        return min(self.limit, self.capacity * len(self.devices))

    @property
    def per_lane(self) -> int:
        """Jobs one lane may run at once: taking the lane with the most free slots keeps
        every lane within ceil(limit / lanes), so its pool needs no more workers."""
        return min(self.capacity, -(-self.limit // len(self.devices)))

    def take(self) -> int | None:
        """A slot for a job: the lane with the most free slots (spreading jobs over the
        devices), or None while every slot is held."""
        if sum(self.running) >= self.limit:
            return None
        free = [self.capacity - n for n in self.running]
        lane = max(range(len(free)), key=lambda i: (free[i], -i))
        if free[lane] <= 0:
            return None
        self.running[lane] += 1
        return lane

    def give(self, lane: int) -> None:
        """A job left its slot in ``lane``."""
        self.running[lane] -= 1

    def env(self, lane: int) -> dict[str, str]:
        """The environment of a process of ``lane`` (empty without GPUs)."""
        return gpu_env(self.devices[lane], self.share) if self.share else {}


def gpu_env(devices: Sequence[str], share: float) -> dict[str, str]:
    """The environment of a job given ``devices`` at ``share`` GPUs per job."""
    names = ",".join(devices)
    return {CUDA_ENV: names, GPUS_ENV: names, SHARE_ENV: repr(share)}


def job_gpus() -> dict[str, Any] | None:
    """In a job: the devices rlsweep gave it and its share of a GPU, or None (none asked)."""
    devices = os.environ.get(GPUS_ENV)
    if devices is None:
        return None
    share = os.environ.get(SHARE_ENV)
    return {
        "devices": [d for d in devices.split(",") if d],
        "per_job": float(share) if share else None,
    }


def gpus_text(gpus: dict[str, Any]) -> str:
    """A job's GPUs (:func:`job_gpus`) as its log says them."""
    share = gpus.get("per_job")
    per_job = f", {share_text(share)} per job" if share else ""
    return f"{','.join(gpus['devices']) or 'none'} ({CUDA_ENV}={os.environ.get(CUDA_ENV)}{per_job})"
