"""The submitit executors' set-up: sbatch parameters from rlsweep's SLURM options, a
batch's submitit folder, the cluster's ``MaxArraySize`` and sbatch's reasons for refusing."""

from __future__ import annotations

import logging
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlsweep.launch.jobs import LaunchContext, SweepJob
from rlsweep.launch.worker import THREAD_ENV_VARS
from rlsweep.numerics import shell_lines
from rlsweep.slurm_options import SlurmOptions

log = logging.getLogger(__name__)

# SLURM's default MaxArraySize (array indices 0..1000).
DEFAULT_MAX_ARRAY_SIZE = 1001


def cpus_per_task(opts: SlurmOptions, jobs: Sequence[SweepJob]) -> int:
    """CPUs per task: the option, or the jobs' own thread count (their largest)."""
    if opts.cpus_per_task is not None:
        return opts.cpus_per_task
    return max((job.identity.threads for job in jobs), default=1)


def setup_lines(opts: SlurmOptions, threads: int, numerics: str = "native") -> list[str]:
    """Shell lines run before each job: thread caps and the numerics variables first (see
    rlsweep.numerics), then the user's own lines."""
    caps = [f"export {k}={threads}" for k in THREAD_ENV_VARS]
    return caps + shell_lines(numerics) + list(opts.setup)


def slurm_parameters(
    opts: SlurmOptions,
    *,
    threads: int,
    job_name: str,
    n_jobs: int,
    gpus: int = 0,
    numerics: str = "native",
) -> dict[str, Any]:
    """``SlurmExecutor.update_parameters`` keywords (submitit's names for sbatch options);
    ``gpus``: each job's whole GPUs (``gpus_per_job``, else ``slurm.gpus_per_node``)."""
    params: dict[str, Any] = {
        "job_name": job_name,
        "time": opts.timeout_min,
        "nodes": 1,
        "ntasks_per_node": 1,
        "cpus_per_task": threads,
        "array_parallelism": opts.array_parallelism or max(1, n_jobs),
        "setup": setup_lines(opts, threads, numerics),
        # USR2 (time-out warning) 90 s before the limit, less for short limits: with the
        # default 90 s, a limit of 1 min would signal every job as it starts.
        "signal_delay_s": min(90, opts.timeout_min * 15),
    }
    optional = {
        "partition": opts.partition,
        "account": opts.account,
        "qos": opts.qos,
        "constraint": opts.constraint,
        "exclude": opts.exclude,
        "mem": None if opts.mem_gb is None else f"{opts.mem_gb}GB",
        "gpus_per_node": gpus or opts.gpus_per_node or None,
    }
    params.update({k: v for k, v in optional.items() if v is not None})
    if opts.additional_parameters:
        params["additional_parameters"] = dict(opts.additional_parameters)
    return params


def submitit_folder(context: LaunchContext) -> Path:
    """A fresh folder for this batch (job ids restart when a cluster's state is wiped)."""
    base = context.slurm.submitit_folder
    root = Path(base) if base else context.sweep_dir / ".submitit"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = root / stamp
    n = 1
    while folder.exists():
        n += 1
        folder = root / f"{stamp}-{n}"
    return folder.absolute() / "%j"


def max_array_size() -> int:
    """Tasks one job array may hold on this cluster (``MaxArraySize`` in ``scontrol show
    config``; SLURM's default, 1001, if it cannot be read)."""
    try:
        out = subprocess.run(
            ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning(f"could not read MaxArraySize from scontrol ({exc}): assuming 1001")
        return DEFAULT_MAX_ARRAY_SIZE
    found = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, flags=re.MULTILINE)
    return max(1, int(found.group(1))) if found else DEFAULT_MAX_ARRAY_SIZE


def sbatch_reason(exc: BaseException) -> str:
    """SLURM's one-line reason from a failed sbatch (``sbatch: error: ...`` lines)."""
    text = str(exc)
    reasons = [line.split("error:", 1)[1].strip() for line in text.splitlines() if "error:" in line]
    return "; ".join(dict.fromkeys(r for r in reasons if r)) or text.strip().splitlines()[-1]
