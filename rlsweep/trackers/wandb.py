"""Weights & Biases: one run per job, grouped by sweep (``group``) and agent
(``job_type``), tagged with the replicate and the root of its seeds, the job's config and
seeds as the run's config. Offline by default (``wandb sync <job dir>/wandb/offline-run-*``
uploads it later); ``logger.wandb.mode=online`` logs live.

A resumed job continues its run (the same id); each step is logged once: the rows after
the last step the run's files in the job's directory hold are sent (W&B keeps a run's steps
increasing). Those files, not what earlier attempts recorded as sent, say what W&B has: a
machine lost takes W&B's service process with it, and the rows it had not yet written
(up to 15 s of them, below) never reach W&B. An online run's server may hold a few rows more
than its file; W&B drops a step it holds when it comes again.

A job's end waits until W&B has written its run: ``run.finish()`` returns once W&B's service
process has the run's end, but the service writes the run file's buffered tail (the last
rows, up to 32 KiB or 15 s of them) only when it closes the run, on a message ``finish()``
sends without waiting for it (wandb 0.31). On a busy machine the service may run that
later, and whoever reads the file in between (``wandb sync``, a test) finds it without its
last rows. So ``close`` waits, a bounded time, until the file ends with the run's exit
record; past that it raises, and the job says so.
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsweep.trackers.base import JobInfo, Resume

MODES = ("offline", "online", "disabled")

# How long a job's end waits for W&B's service to write the run's file.
WRITTEN_TIMEOUT_S = 60.0
# A run file (``run-<id>.wandb``): a 7-byte header, then a LevelDB log: blocks of 32 KiB, each
# a run of chunks [crc32c (4 bytes), length (2), type (1), data]; a record is one chunk of
# type FULL or the chunks FIRST, MIDDLE..., LAST (a block's last < 7 bytes are padding).
BLOCK, CHUNK_HEADER, HEADER = 32768, 7, 7
FULL, FIRST, LAST = 1, 2, 4


@dataclass
class Settings:
    """``hydra.launcher.trackers.wandb`` (the built-in app: ``logger.wandb``)."""

    # W&B project (created on first upload).
    project: str = "rlsweep"
    # W&B entity (user or team); null: your default entity.
    entity: str | None = None
    # offline (files in the job's directory, uploaded with wandb sync), online or disabled.
    mode: str = "offline"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")


class WandbTracker:
    def __init__(self, settings: Settings, info: JobInfo, resume: Resume) -> None:
        import wandb

        # A new id for each fresh start of the job, the same id across its resumed attempts.
        self.run_id = resume.run_id or _new_id(info)
        self._resume = resume
        self._directory = info.directory
        self._run = wandb.init(
            project=settings.project,
            entity=settings.entity,
            mode=settings.mode,  # type: ignore[arg-type]
            dir=str(info.directory),
            id=self.run_id,
            resume="allow",
            name=info.name,
            group=info.sweep,
            job_type=info.agent,
            tags=_tags(info),
            config={**info.config, "rlsweep": {"digest": info.digest, "seeds": dict(info.seeds)}},
            reinit="create_new",
            settings=wandb.Settings(console="off", silent=True, x_disable_stats=True),
        )
        written = self._run.settings
        self._file = (
            Path(written.sync_file)
            if written.mode != "disabled" and not written.x_skip_transaction_log
            else None
        )

    def held_until(self) -> int | None:
        if self._resume.run_id is None:
            return None
        files = self._directory.glob(f"wandb/*run-*-{self.run_id}/run-{self.run_id}.wandb")
        return max((s for path in files for s in history_steps(path)), default=None)

    def log(self, step: int, values: Mapping[str, float]) -> None:
        self._run.log(dict(values), step=step)

    def close(self, failed: bool) -> None:
        self._run.finish(exit_code=1 if failed else 0)
        if self._file is not None:
            wait_written(self._file, WRITTEN_TIMEOUT_S)


def wait_written(path: Path, timeout: float) -> None:
    """Return once W&B's run file ``path`` ends with the run's exit record (every row before
    it is written); raise TimeoutError after ``timeout`` seconds."""
    deadline, pause = time.monotonic() + timeout, 0.002
    while not _ends(path):
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"W&B's service had not written the run's end to {path} {timeout:.0f} s after "
                "the run finished: the file may lack the job's last rows"
            )
        time.sleep(pause)
        pause = min(2 * pause, 0.25)


def _ends(path: Path) -> bool:
    """Whether the run file's last record is the run's exit (nothing follows it)."""
    try:
        size = path.stat().st_size
        # The exit record is small: it starts in the file's last two blocks.
        *_, last = run_file_records(path, first_block=max(0, (size - 1) // BLOCK - 1))
    except (OSError, ValueError):  # not there yet, or no whole record yet
        return False
    return bool(_parsed(last).HasField("exit"))  # only the last record is parsed


def history_steps(path: Path) -> Iterator[int]:
    """The step of each row (history record) a W&B run file holds."""
    for record in run_file_parsed(path):
        if record.WhichOneof("record_type") == "history":
            yield int(record.history.step.num)


def run_file_parsed(path: Path, first_block: int = 0) -> Iterator[Any]:
    """:func:`run_file_records`, each parsed with W&B's own ``Record`` protobuf."""
    for data in run_file_records(path, first_block):
        yield _parsed(data)


def _parsed(data: bytes) -> Any:
    """One serialised W&B ``Record``, parsed."""
    from wandb.proto import wandb_internal_pb2 as pb

    record = pb.Record()  # type: ignore[attr-defined]
    record.ParseFromString(data)
    return record


def run_file_records(path: Path, first_block: int = 0) -> Iterator[bytes]:
    """The records (W&B ``Record`` protobufs, serialised) of a W&B run file that start in
    block ``first_block`` or later; a record not yet written whole at the end is left out."""
    with path.open("rb") as f:
        f.seek(first_block * BLOCK)
        data = f.read()
    pos, record = (HEADER if first_block == 0 else 0), None
    while pos + CHUNK_HEADER <= len(data):
        if BLOCK - pos % BLOCK < CHUNK_HEADER:  # the block's tail is padding
            pos += BLOCK - pos % BLOCK
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + CHUNK_HEADER])
        end = pos + CHUNK_HEADER + length
        if kind == 0 or end > len(data):  # zeros, or a chunk still being written
            return
        if kind in (FULL, FIRST):
            record = b""
        if record is not None:  # None: the tail of a record begun before first_block
            record += data[pos + CHUNK_HEADER : end]
            if kind in (FULL, LAST):
                yield record
                record = None
        pos = end


def _tags(info: JobInfo) -> list[str]:
    """``replicate=<i>``, ``root=<r>``, and ``seed.<name>=<seed>`` for each of the job's
    named seeds that is one number (per-sub-env lists are in the run's config)."""
    seeds = [f"seed.{k}={v}" for k, v in info.seeds.items() if "." not in k]
    return [f"replicate={info.replicate}", f"root={info.root}", *seeds][:64]


def _new_id(info: JobInfo) -> str:
    """A run id unique to this job and this fresh start (W&B ids: 8+ lowercase chars)."""
    import os
    import time

    text = f"{info.digest}:{time.time_ns()}:{os.getpid()}"
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def start(settings: Settings, info: JobInfo, resume: Resume) -> Any:
    return WandbTracker(settings, info, resume)
