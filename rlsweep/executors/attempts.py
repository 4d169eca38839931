"""``attempts.jsonl`` in a job's directory: one line per attempt at running the job."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from rlsweep.store import ATTEMPTS_FILE

log = logging.getLogger(__name__)


def log_attempt(
    job_dir: Path, *, attempt: int, outcome: str, seconds: float, error: str | None
) -> None:
    """Append one attempt (its number, outcome, duration and first error line). A
    directory that cannot be written is said in the log; the job's outcome still counts."""
    entry = {"attempt": attempt, "outcome": outcome, "seconds": round(seconds, 3), "error": error}
    try:
        job_dir.mkdir(parents=True, exist_ok=True)
        with (job_dir / ATTEMPTS_FILE).open("a") as f:
            f.write(json.dumps(entry) + "\n")
    except OSError as exc:
        log.warning(f"could not log attempt {attempt} in {job_dir / ATTEMPTS_FILE}: {exc}")
