"""The logs an app writes itself, on disk when its job ends.

TensorBoard's event writers (torch's ``SummaryWriter``, TorchRL's ``TensorboardLogger``,
tensorboard's own) hand every event to a queue that a background thread writes out. An app
that never closes its writer (TorchRL's published apps do not) leaves events in that queue
when its task function returns; when the process then exits (the last job of a serial
sweep, a SLURM or Ray job), the thread is stopped before it drains the queue: measured on
this project's machine beside 4 busy processes, 4 runs in 8 lost their last 6-10 of 200
events. The report, the summary and ``rlsweep.check`` read those files, so a job's logged
series would depend on how it was run. :func:`flush_event_writers` writes every queued
event out as the job ends (its writers stay open: they are the app's).
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from typing import Any

log = logging.getLogger(__name__)

# Where tensorboard's queued writer lives (imported by the app, never by rlsweep).
EVENT_WRITER_MODULE = "tensorboard.summary.writer.event_file_writer"


def flush_event_writers() -> int:
    """Write out the events queued in every open TensorBoard event writer of this process
    and flush its file; the number of writers flushed. What tensorboard's own ``flush()``
    does, reached through the writer's thread (the app holds the writer; its thread is all
    rlsweep can find without a scan of every object, which costs 0.1 s with torchrl
    imported): wait until the thread has written every queued event, then flush its file.
    No cost when no writer is open."""
    module = sys.modules.get(EVENT_WRITER_MODULE)
    thread_type: Any = getattr(module, "_AsyncWriterThread", None)
    if thread_type is None:
        return 0
    flushed = 0
    for thread in threading.enumerate():
        if not isinstance(thread, thread_type):
            continue
        events: Any = getattr(thread, "_queue", None)
        record_writer: Any = getattr(thread, "_record_writer", None)
        if not isinstance(events, queue.Queue) or not hasattr(record_writer, "flush"):
            log.warning(
                f"rlsweep cannot flush this tensorboard's event writers ({module}): a job's "
                "last events may be missing from its logs unless the app closes its writer"
            )
            return flushed
        events.join()  # every queued event written (a failed thread empties its queue)
        record_writer.flush()
        flushed += 1
    return flushed
