"""The live progress line: done / failed / running / total, elapsed, ETA."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


@dataclass
class Progress:
    """Writes the progress line to ``stream`` (stderr by default).

    On a terminal the line is redrawn in place; otherwise (logs, CI) a new line is
    written when the counts change, at most every ``log_interval`` seconds, and at the end.
    """

    total: int
    label: str = "rlsweep"
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    log_interval: float = 10.0
    enabled: bool = True
    done: int = 0
    failed: int = 0
    running: int = 0
    queued: int | None = None
    _start: float = field(default_factory=time.monotonic)
    _last_emit: float = -1e9
    _last_line: str = ""

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

    def update(
        self,
        *,
        done: int | None = None,
        failed: int | None = None,
        running: int | None = None,
        queued: int | None = None,
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
        self._emit(force=force)

    def _emit(self, *, force: bool) -> None:
        if not self.enabled:
            return
        text = self.line()
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
            self.stream.flush()
        else:
            counts = text.split(" | elapsed")[0]
            changed = counts != self._last_line
            if force or (changed and now - self._last_emit >= self.log_interval):
                self.stream.write(text + "\n")
                self.stream.flush()
                self._last_emit = now
                self._last_line = counts

    def close(self) -> None:
        """Write the final line (and end the terminal line)."""
        if not self.enabled:
            return
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.line() + "\n")
            self.stream.flush()
        else:
            self._emit(force=True)
