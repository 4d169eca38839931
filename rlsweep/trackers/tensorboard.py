"""TensorBoard: event files in each job's directory, so ``tensorboard --logdir
multirun/<name>`` shows every job of a sweep, named by its directory (its overrides).

Written with TensorBoard's own event writer (the ``tensorboard`` package, no torch). A job
resumed from a checkpoint purges what an earlier attempt logged from the resumed step on
(TensorBoard's ``SessionLog.START``), so a curve never holds a step twice; a job started
over (no checkpoint to resume) purges all of it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlsweep.trackers.base import JobInfo, Resume

# The metrics.csv column of the row's wall time: the event's timestamp, not a scalar.
WALL_TIME = "wall_time"


@dataclass
class Settings:
    """``hydra.launcher.trackers.tensorboard`` (the built-in app: ``logger.tensorboard``)."""

    # Seconds between the writer's background flushes (each row is flushed at once too).
    flush_secs: float = 10.0


class TensorBoardTracker:
    def __init__(self, settings: Settings, info: JobInfo, resume: Resume) -> None:
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._event, self._summary = Event, Summary
        self._writer = EventFileWriter(str(info.directory), flush_secs=settings.flush_secs)
        self.run_id = info.name
        self._resume = resume
        if resume.earlier:  # earlier attempts' events from here on are recomputed: purged
            # (all of them when the job started over: its new run replaces theirs)
            start = SessionLog(status=SessionLog.START)
            purged = resume.from_step if resume.run_id is not None else 0
            self._writer.add_event(Event(step=purged, session_log=start))

    def held_until(self) -> int | None:
        """A continued run: every step before the resumed one (each row was flushed as it
        was logged; the purge drops the rest). A new run: none."""
        return self._resume.from_step - 1 if self._resume.run_id is not None else None

    def log(self, step: int, values: Mapping[str, float]) -> None:
        # A row's wall time is the event's own timestamp (TensorBoard's relative and wall
        # axes), not a series of its own.
        scalars = {k: v for k, v in values.items() if k != WALL_TIME}
        summary = self._summary(
            value=[self._summary.Value(tag=k, simple_value=v) for k, v in scalars.items()]
        )
        self._writer.add_event(self._event(wall_time=time.time(), step=step, summary=summary))
        self._writer.flush()

    def close(self, failed: bool) -> None:
        self._writer.close()


def start(settings: Settings, info: JobInfo, resume: Resume) -> Any:
    return TensorBoardTracker(settings, info, resume)
