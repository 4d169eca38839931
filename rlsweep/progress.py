"""The live progress line: done / failed / running / total, elapsed, ETA."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from rlsweep.errors import ConfigError

# Seconds between the heartbeat lines of a progress line that is not on a terminal (a log
# file, CI, SLURM's output file): ``RLSWEEP_HEARTBEAT_S`` (0: none), every minute if unset.
HEARTBEAT_ENV = "RLSWEEP_HEARTBEAT_S"
HEARTBEAT_S = 60.0
# Running jobs a heartbeat line names (then how many more run).
NAMED_JOBS = 3


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def heartbeat_interval() -> float:
    """``RLSWEEP_HEARTBEAT_S`` in seconds (0: no heartbeat), else every minute."""
    text = os.environ.get(HEARTBEAT_ENV, "").strip()
    if not text:
        return HEARTBEAT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # (NaN too)
        raise ConfigError(
            f"{HEARTBEAT_ENV}={text!r}: the seconds between the progress line's heartbeats "
            f"in a log must be a number >= 0 (0: none); unset, it is {HEARTBEAT_S:g}."
        )
    return seconds


def named(names: Sequence[str]) -> str:
    """``a, b, c (+2 more)``: the first few of ``names``."""
    more = len(names) - NAMED_JOBS
    return ", ".join(names[:NAMED_JOBS]) + (f" (+{more} more)" if more > 0 else "")


@dataclass
class Progress:
    """Writes the progress line to ``stream`` (stderr by default).

    On a terminal the line is redrawn in place; otherwise (logs, CI) a new line is
    written when the counts change, at most every ``log_interval`` seconds, a heartbeat
    line naming the running jobs when nothing was written for ``heartbeat_s`` seconds, and
    the final line once at the end.
    """

    total: int
    label: str = "rlsweep"
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    log_interval: float = 10.0
    enabled: bool = True
    heartbeat_s: float = field(default_factory=heartbeat_interval)
    done: int = 0
    failed: int = 0
    running: int = 0
    queued: int | None = None
    # The running jobs' names, asked at each update (an executor's; see follow()).
    names: Callable[[], Sequence[str]] | None = None
    _running_names: tuple[str, ...] = ()
    _start: float = field(default_factory=time.monotonic)
    _last_emit: float = -1e9
    _last_line: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _beat: threading.Thread | None = None

    @property
    def tty(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())

    def line(self) -> str:
        elapsed = time.monotonic() - self._start
        finished = self.done + self.failed
        if 0 < finished < self.total:
            eta = _clock(elapsed / finished * (self.total - finished))
        else:
            eta = "--:--" if finished < self.total else _clock(0)
        queued = f" | {self.queued} queued" if self.queued is not None else ""
        return (
            f"[{self.label}] {self.done}/{self.total} done | {self.failed} failed | "
            f"{self.running} running{queued} | elapsed {_clock(elapsed)} | ETA {eta}"
        )

    def grow(self, jobs: int) -> None:
        """A streaming launch released ``jobs`` more jobs: the total (and ETA) counts them."""
        self.total += jobs

    def follow(self, names: Callable[[], Sequence[str]]) -> None:
        """Name the running jobs in heartbeat lines by ``names()``, asked at each update
        (in the executor's own thread, between its changes)."""
        self.names = names

    def update(
        self,
        *,
        done: int | None = None,
        failed: int | None = None,
        running: int | None = None,
        queued: int | None = None,
        running_names: Sequence[str] | None = None,
        force: bool = False,
    ) -> None:
        if done is not None:
            self.done = done
        if failed is not None:
            self.failed = failed
        if running is not None:
            self.running = running
        if queued is not None:
            self.queued = queued
        if running_names is None and self.names is not None:
            running_names = self.names()
        if running_names is not None:
            self._running_names = tuple(running_names)
        self._emit(force=force)

    def _emit(self, *, force: bool) -> None:
        if not self.enabled:
            return
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.line())
            self.stream.flush()
            return
        self._start_heartbeat()
        with self._lock:
            counts = self._counts()
            changed = counts != self._last_line
            if force or (changed and time.monotonic() - self._last_emit >= self.log_interval):
                self._write(self.line())

    def _counts(self) -> str:
        return self.line().split(" | elapsed")[0]

    def _write(self, text: str) -> None:
        """One line to a non-terminal (under the lock)."""
        self.stream.write(text + "\n")
        self.stream.flush()
        self._last_emit = time.monotonic()
        self._last_line = self._counts()

    # ------------------------------------------------------------ heartbeat

    def _start_heartbeat(self) -> None:
        if self._beat is not None or self.heartbeat_s <= 0 or self._stop.is_set():
            return
        self._beat = threading.Thread(target=self._heartbeat, name="rlsweep-heartbeat")
        self._beat.daemon = True
        self._beat.start()

    def _heartbeat(self) -> None:
        """Every ``heartbeat_s`` seconds without a line: the line, and what runs."""
        while not self._stop.wait(self._until_heartbeat()):
            with self._lock:
                if time.monotonic() - self._last_emit < self.heartbeat_s:
                    continue
                names = self._running_names if self.running else ()
                self._write(self.line() + (f" | running: {named(names)}" if names else ""))

    def _until_heartbeat(self) -> float:
        return max(0.05, self._last_emit + self.heartbeat_s - time.monotonic())

    def close(self) -> None:
        """Write the final line once (and end the terminal line)."""
        if not self.enabled:
            return
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.line() + "\n")
            self.stream.flush()
            return
        with self._lock:  # written already if the counts have not changed since
            if self._counts() != self._last_line or self._last_emit < 0:
                self._write(self.line())
