"""The end-of-sweep report's modules, imported while the jobs run.

The sweep's parent is idle while its jobs run in other processes, and the summary and
report it writes at the end import matplotlib and pyarrow first, a large part of the end
of a sweep (bench/overhead.py measures that end). A daemon thread imports them once a job
has started (not before: the workers' start-up would share the cores with it), so the end
of the sweep only draws and writes.

Only for rlsweep's own end-of-sweep summary: a task whose ``on_sweep_end`` is its own
(which may write no report at all) never has matplotlib imported by rlsweep.

Imports in two threads are safe as long as no module is imported by both at once with a
cycle between them (Python then hands one thread a partly initialised module): the main
thread waits for this one (:meth:`Preload.wait`) before the summary imports anything, and
until then imports nothing of matplotlib's, pyarrow's or the report's.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rlsweep.store import RESULT_FILE, WORKER_PID_FILE
from rlsweep.trace import event

# What rlsweep.summary needs, heaviest first after the summary itself: the report's
# figures are drawn on matplotlib Figures saved through the Agg canvas (no pyplot, no
# global backend), evaluations.parquet is written by pyarrow (pandas is not imported).
REPORT_MODULES = (
    "rlsweep.summary",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
    "pyarrow.parquet",
)
# The jobs watched for a start (the first ones handed to the pool) and how often.
WATCHED_JOBS = 8
POLL_S = 0.1


class Preload:
    """Imports ``modules`` in a daemon thread once ``started()`` says a job started."""

    def __init__(self, modules: Sequence[str], started: Callable[[], bool]) -> None:
        self.modules = tuple(modules)
        self.started = started
        # An import that failed here: the summary's own import raises it again, in the
        # main thread, with its traceback.
        self.error: ImportError | None = None
        self._stop = threading.Event()  # wait() says: import now, without a job start
        self._thread = threading.Thread(target=self._run, name="rlsweep-preload", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wait(self) -> None:
        """Block until every import is done (or has failed): then the main thread imports."""
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set() and not self.started():
            self._stop.wait(POLL_S)
        try:
            for name in self.modules:
                importlib.import_module(name)
        except ImportError as exc:
            self.error = exc
        event("preload-end")


def job_started(job_dirs: Sequence[Path]) -> Callable[[], bool]:
    """Whether a worker has started (or finished) one of ``job_dirs``' jobs."""
    watched = list(job_dirs[:WATCHED_JOBS])
    deadline = time.monotonic() + 60.0  # a job that never says it started: import anyway

    def started() -> bool:
        if time.monotonic() > deadline:
            return True
        return any((d / WORKER_PID_FILE).exists() or (d / RESULT_FILE).exists() for d in watched)

    return started
