"""Feeding a job's rows to its trackers: opened and sent from a background thread (the job
never waits for a tracker, except at its end for the last rows), a failing tracker
reported once and dropped, the runs' state kept for resume.

A resumed job's tracker gets each row once and loses none: the rows after the last step its
continued run holds (:meth:`Tracker.held_until`), first those the job restored from its
checkpoint (rows an earlier attempt sent that never reached the tracker's store, or were
never sent), then this attempt's."""

from __future__ import annotations

import json
import logging
import queue
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlsweep.store import atomic_write_json
from rlsweep.trackers.base import STATE_FILE, JobInfo, Resume, Tracker
from rlsweep.trackers.settings import backend

log = logging.getLogger(__name__)

# How long the end of a job waits for its trackers to take the last rows and close.
CLOSE_TIMEOUT_S = 120.0

Row = tuple[int, dict[str, float]]


class Feed:
    """A job's trackers (``settings``: name -> Settings, see :mod:`.settings`)."""

    def __init__(
        self, settings: Mapping[str, Any], directory: Path, info: Callable[[], JobInfo]
    ) -> None:
        self._settings = dict(settings)
        self._directory = directory
        self._info = info
        self._name = directory.name
        self._trackers: dict[str, Tracker] | None = None
        self._state: dict[str, dict[str, Any]] = {}
        # The rows the job restored from its checkpoint (none: a fresh start).
        self._restored: list[Row] = []
        # Per tracker: the last step its run held when opened (rows up to it are not sent;
        # this attempt's rows all are, several at one step included).
        self._held: dict[str, int | None] = {}
        self._queue: queue.Queue[Row | bool] = queue.Queue()
        self._thread: threading.Thread | None = None

    def restored(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """The rows (``step`` and values) the job restored from its checkpoint, before this
        attempt's first row: the job resumes after the last."""
        self._restored = [(int(r["step"]), _numbers(r)) for r in rows]

    def send(self, step: int, values: Mapping[str, float | int | None]) -> None:
        """Queue one row (``None`` values left out)."""
        if not self._settings:
            return
        self._queue.put((step, _numbers(values)))
        if self._thread is None:  # the first row: open the trackers beside the job
            resumed_after = self._restored[-1][0] if self._restored else None
            self._thread = threading.Thread(
                target=self._run, args=(step, resumed_after), name="rlsweep-trackers", daemon=True
            )
            self._thread.start()

    def close(self, failed: bool) -> None:
        """Send what is queued, then end every run (``failed``: the job raised)."""
        if self._thread is None:
            return
        self._queue.put(failed)
        self._thread.join(CLOSE_TIMEOUT_S)
        if self._thread.is_alive():
            self._say(
                f"trackers {', '.join(self._trackers or {})} did not finish within "
                f"{CLOSE_TIMEOUT_S:.0f} s: their runs may lack the last rows"
            )

    # ------------------------------------------------------------------------ inside

    def _open(self, step: int, resumed_after: int | None) -> None:
        path = self._directory / STATE_FILE
        try:
            earlier = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError) as exc:
            self._say(f"{STATE_FILE} unreadable ({exc}): every tracker starts a new run")
            earlier = {}
        info = self._info()
        self._trackers = {}
        for name, settings in self._settings.items():
            resume = _resume(earlier.get(name), step, resumed_after)
            try:
                tracker = backend(name).start(settings, info, resume)
            except Exception as exc:  # reported, and the job goes on without it
                self._failed(name, exc)
                continue
            self._trackers[name] = tracker
            self._held[name] = self._held_until(name, tracker, resume)
            self._state[name] = {"run_id": tracker.run_id, "last_step": self._held[name]}
        self._save_state()

    def _held_until(self, name: str, tracker: Tracker, resume: Resume) -> int | None:
        """What the tracker's run holds; failing that, what earlier attempts recorded."""
        try:
            return tracker.held_until()
        except Exception as exc:  # said, and the record stands in
            self._say(
                f"tracker {name} could not say what run {tracker.run_id} holds "
                f"({type(exc).__name__}: {exc}); resuming it after step {resume.sent_until} "
                f"(recorded in {STATE_FILE})"
            )
            return resume.sent_until

    def _run(self, step: int, resumed_after: int | None) -> None:
        self._open(step, resumed_after)
        assert self._trackers is not None
        if self._restored:  # the restored rows the runs lack
            self._log(self._restored)
        while True:
            item = self._queue.get()
            if isinstance(item, bool):
                for name, tracker in list(self._trackers.items()):
                    self._call(name, tracker.close, item)
                return
            self._log([item])

    def _log(self, rows: Sequence[Row]) -> None:
        """Send each tracker the rows after the last step its run holds."""
        assert self._trackers is not None
        for name, tracker in list(self._trackers.items()):
            held = self._held[name]
            for step, values in rows:
                if held is not None and step <= held:
                    continue
                if not self._call(name, tracker.log, step, values):
                    break
                last = self._state[name]["last_step"]
                self._state[name]["last_step"] = step if last is None else max(last, step)
        self._save_state()

    def _call(self, name: str, method: Callable[..., None], *args: Any) -> bool:
        try:
            method(*args)
        except Exception as exc:  # reported, and the job goes on without it
            self._failed(name, exc)
            return False
        return True

    def _failed(self, name: str, exc: BaseException) -> None:
        if self._trackers is not None:
            self._trackers.pop(name, None)
        self._say(
            f"tracker {name} failed and is dropped ({type(exc).__name__}: {exc}); the job "
            "and its other outputs go on"
        )

    def _say(self, message: str) -> None:
        text = f"[rlsweep] job {self._name}: {message}"
        log.warning(text)
        print(text, file=sys.stderr, flush=True)

    def _save_state(self) -> None:
        try:
            atomic_write_json(self._directory / STATE_FILE, self._state)
        except OSError as exc:
            self._say(f"could not write {STATE_FILE} ({exc}): a resumed job starts new runs")


def _resume(earlier: Any, step: int, resumed_after: int | None) -> Resume:
    """Where the tracker's run stands, from what earlier attempts left (``earlier``)."""
    run_id = earlier.get("run_id") if isinstance(earlier, dict) else None
    last = earlier.get("last_step") if isinstance(earlier, dict) else None
    if resumed_after is not None and run_id is not None:
        return Resume(run_id, resumed_after + 1, last, earlier=True)
    return Resume(None, step, None, replaced_run=run_id, earlier=earlier is not None)


def _numbers(values: Mapping[str, Any]) -> dict[str, float]:
    """A row's values as trackers take them: floats, the empty cells and ``step`` left out."""
    return {k: float(v) for k, v in values.items() if v is not None and k != "step"}
