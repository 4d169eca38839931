"""``attempts.jsonl`` in a job's directory: one line per attempt at running the job.

The file is kept over reruns and runs of the sweep command, so attempt numbers go on from
the last recorded one. A line a killed writer cut short is left as it is: the next record
starts on a line of its own, and readers skip the damaged line.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from rlsweep.store import ATTEMPTS_FILE, LinkRefused, append_whole, open_no_follow, refuse_link

log = logging.getLogger(__name__)


def log_attempt(
    job_dir: Path, *, attempt: int, outcome: str, seconds: float, error: str | None
) -> int | None:
    """Append one attempt (its number, outcome, duration and first error line). Its number
    is one more than the last whole record's (1 for the first), so numbers go on across
    runs of the sweep; ``attempt`` (the attempt's number in this run) only names it in a
    warning. A directory that cannot be written, or a symbolic link at the file or the job
    directory (never written through), is said in the log; the job's outcome still counts.
    Returns the number recorded, or None."""
    path = job_dir / ATTEMPTS_FILE
    try:
        job_dir.mkdir(parents=True, exist_ok=True)
        refuse_link(job_dir)
        fd = open_no_follow(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            earlier = _read_all(fd)
            number = max((a["attempt"] for a in parse_attempts(earlier)[-1:]), default=0) + 1
            entry = {"attempt": number, "outcome": outcome, "seconds": round(seconds, 3)}
            line = json.dumps({**entry, "error": error}) + "\n"
            append_whole(fd, line)
        finally:
            os.close(fd)
    except LinkRefused as exc:
        log.warning(f"attempt {attempt} not logged: {exc}")
        return None
    except OSError as exc:
        log.warning(f"could not log attempt {attempt} in {path}: {exc}")
        return None
    return number


def read_attempts(job_dir: Path) -> list[dict[str, Any]]:
    """A job's attempts, oldest first (none without the file; a damaged line, such as one
    a killed writer cut short, skipped). A symbolic link at the file is not read."""
    try:
        fd = open_no_follow(job_dir / ATTEMPTS_FILE, os.O_RDONLY)
    except (OSError, LinkRefused):
        return []
    try:
        return parse_attempts(_read_all(fd))
    finally:
        os.close(fd)


def parse_attempts(data: bytes) -> list[dict[str, Any]]:
    """The whole records in an ``attempts.jsonl``'s bytes: each line that is a JSON object
    with an integer ``attempt``; any other line is skipped."""
    records = []
    for raw in data.splitlines():
        try:
            record = json.loads(raw)
        except ValueError:  # cut short, or two records glued by an older rlsweep
            continue
        number = record.get("attempt") if isinstance(record, dict) else None
        if isinstance(number, int) and not isinstance(number, bool):
            records.append(record)
    return records


def _read_all(fd: int) -> bytes:
    """Everything in the file open at ``fd``, from its start."""
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)
