"""The logs an app writes itself, on disk when its job ends.

TensorBoard's event writers (torch's ``SummaryWriter``, TorchRL's ``TensorboardLogger``,
tensorboard's own) hand every event to a queue that a background thread writes out. An app
that never closes its writer (TorchRL's published apps do not) leaves events in that queue
when its task function returns; when the process then exits (the last job of a serial
sweep, a SLURM or Ray job), the thread is stopped before it drains the queue, and a run's
last events can be lost (often, on a busy machine). The report, the summary and
``rlsweep.check`` read those files, so a job's logged series would depend on how it was
run. :func:`flush_event_writers` writes every queued event out as the job ends (its
writers stay open: they are the app's).

tensorboardX's writer (rl_games and the apps built on it) is worse off: its thread writes to
a buffered file it flushes every ``flush_secs`` (120 s by default), and its queue cannot be
joined; in a worker process that stays up for the next job, the events would stay
unwritten until the process exits, after the sweep's report has read them (the report would
show an earlier step's value as a job's last). And when a pool's worker process exits,
multiprocessing's exit handlers close every queue's pipe before tensorboardX's own exit
handler stops its threads: each thread still waiting on its queue would print
``OSError: handle is closed`` at the end of every joblib sweep of such an app.
:func:`flush_event_writers` therefore also stops them first, at the exit of a process where
it found one.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing.util
import queue
import sys
import threading
from typing import Any

log = logging.getLogger(__name__)

# Where tensorboard's and tensorboardX's queued writers live (imported by the app, never
# by rlsweep).
EVENT_WRITER_MODULE = "tensorboard.summary.writer.event_file_writer"
TENSORBOARDX_WRITER_MODULE = "tensorboardX.event_file_writer"
# One restart of tensorboardX's threads at a time (jobs ending together in threads): a
# thread given two shutdown signals would leave one for its successor, which would stop.
_TENSORBOARDX_LOCK = threading.Lock()
# Before multiprocessing's queues close their pipes at a process's exit (priority 10).
_STOP_BEFORE_QUEUES_CLOSE = 100
_stop_at_exit_registered = False


def flush_event_writers() -> int:
    """Write out the events queued in every open TensorBoard event writer of this process
    (tensorboard's, torch's and TorchRL's, and tensorboardX's) and flush its file; the
    number of writers flushed. No cost when no writer is open."""
    return _flush_tensorboard() + _flush_tensorboardx()


def _flush_tensorboard() -> int:
    """tensorboard's writers (torch's ``SummaryWriter`` is one). What tensorboard's own
    ``flush()`` does, reached through the writer's thread (the app holds the writer; its
    thread is all rlsweep can find without a scan of every object, which is slow with
    torchrl imported): wait until the thread has written every queued event, then flush
    its file."""
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
            _cannot_flush(module)
            return flushed
        events.join()  # every queued event written (a failed thread empties its queue)
        record_writer.flush()
        flushed += 1
    return flushed


def _flush_tensorboardx() -> int:
    """tensorboardX's writers. Each writer's thread is stopped with its own shutdown signal,
    which it reads after every event queued before it (all written once the thread has
    ended); its file is flushed; and a fresh thread takes its place in the app's writer, on
    the same queue and file (what the writer's own ``reopen()`` does after ``close()``), so
    the app logs on and closes its writer as before. The writers holding the threads are
    found through the garbage collector's referrers (one scan, slow with torch imported),
    only when a tensorboardX writer is open."""
    module = sys.modules.get(TENSORBOARDX_WRITER_MODULE)
    thread_type: Any = getattr(module, "_EventLoggerThread", None)
    if thread_type is None:
        return 0
    with _TENSORBOARDX_LOCK:
        threads = [t for t in threading.enumerate() if isinstance(t, thread_type)]
        if not threads:
            return 0
        _stop_at_exit(thread_type)
        return _restart(threads, thread_type, module)


def _stop_at_exit(thread_type: Any) -> None:
    """Once per process: at its exit, stop tensorboardX's live threads (``thread_type``)
    through their queues while the queues still work; each writes what is queued before
    its signal, and tensorboardX's own exit handler then closes its writer as usual."""
    global _stop_at_exit_registered
    if _stop_at_exit_registered:
        return
    _stop_at_exit_registered = True

    def stop() -> None:
        with _TENSORBOARDX_LOCK:
            for thread in threading.enumerate():
                if isinstance(thread, thread_type) and thread.is_alive():
                    thread.stop()

    multiprocessing.util.Finalize(None, stop, exitpriority=_STOP_BEFORE_QUEUES_CLOSE)


def _restart(threads: list[Any], thread_type: Any, module: object) -> int:
    """Stop each of tensorboardX's ``threads`` (its ``_EventLoggerThread``s) once its queue
    is written, flush its file and put a fresh thread in its writer; the number done."""
    writers = _writers_of(threads)
    flushed = 0
    for thread in threads:
        owner = writers.get(id(thread))
        events: Any = getattr(thread, "_queue", None)
        record_writer: Any = getattr(thread, "_record_writer", None)
        flush_secs: Any = getattr(thread, "_flush_secs", None)
        found = (events, record_writer, flush_secs, getattr(thread, "stop", None))
        if owner is None or None in found or not hasattr(record_writer, "flush"):
            _cannot_flush(module)
            return flushed
        thread.stop()  # every event queued before its signal written
        record_writer.flush()
        fresh = thread_type(events, record_writer, flush_secs)
        owner["_worker"] = fresh
        fresh.start()
        flushed += 1
    return flushed


def _writers_of(threads: list[threading.Thread]) -> dict[int, dict[str, Any]]:
    """The attributes of the tensorboardX writer whose worker each thread is, by the
    thread's id (one scan of the garbage collector's objects for them all: an app that
    opens a writer per job leaves a worker process holding many)."""
    wanted = {id(thread): thread for thread in threads}
    found: dict[int, dict[str, Any]] = {}
    for holder in gc.get_referrers(*threads):
        attrs = holder if isinstance(holder, dict) else getattr(holder, "__dict__", None)
        if not isinstance(attrs, dict):
            continue
        worker = attrs.get("_worker")
        if worker is not None and wanted.get(id(worker)) is worker:
            found[id(worker)] = attrs
    return found


def _cannot_flush(module: object) -> None:
    log.warning(
        f"rlsweep cannot flush the event writers of {module}: a job's last events may be "
        "missing from its logs unless the app closes its writer"
    )
