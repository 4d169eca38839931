"""What a sweep's summary and report are computed from, as one digest.

The digest covers every job directory (its name, and the size and modification time of
each file the report reads: rlsweep's records and the app's own log files, found as the
series reader finds them), the sweep's own records (``sweep.json``, a search's or a
comparison's: by their contents, since every run of the command writes ``sweep.json``
again), and the source of the code that writes the report. Equal digests: the report
written then is the one that would be written now, so a resume that ran no job need not
write it again (:func:`rlsweep.summary.summarize_at_end`). The digest reads the job files'
sizes and times, not their contents: a small part of what writing the summary and report
again costs (bench/scale.py measures a 10,000-job sweep's summary and resume).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from rlsweep.series import app_log_files
from rlsweep.store import (
    COMPARE_FILE,
    ERROR_FILE,
    HYDRA_DIR,
    METRICS_FILE,
    RESULT_FILE,
    SEARCH_FILE,
    SEEDS_FILE,
    SWEEP_FILE,
    iter_job_dirs,
)

__all__ = ["inputs_digest"]

# A job directory's files that the summary and report read.
JOB_INPUTS = (
    RESULT_FILE,
    ERROR_FILE,
    METRICS_FILE,
    SEEDS_FILE,
    f"{HYDRA_DIR}/config.yaml",
    f"{HYDRA_DIR}/overrides.yaml",
)
# The sweep directory's own records that the report reads.
SWEEP_INPUTS = (SEARCH_FILE, COMPARE_FILE, SWEEP_FILE)


def _code_digest() -> bytes:
    """The source of the modules that read a sweep (its jobs' logs too) and write its summary
    and report."""
    package = Path(__file__).resolve().parent
    sources = [
        *sorted(package.glob("*.py")),
        *sorted((package.parent / "series").glob("*.py")),  # what the jobs logged
        *(package.parent / n for n in ("summary.py", "store.py")),
    ]
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.digest()


def _stamp(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return "-"
    return f"{stat.st_size}:{stat.st_mtime_ns}"


def _contents(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "-"


def inputs_digest(sweep_dir: Path) -> str:
    """SHA-256 of what the summary and report of ``sweep_dir`` are computed from."""
    digest = hashlib.sha256(_code_digest())
    for name in SWEEP_INPUTS:  # small files, rewritten by each run: by their contents
        digest.update(f"{name} {_contents(sweep_dir / name)}\n".encode())
    for job_dir in iter_job_dirs(sweep_dir):
        stamps = " ".join(_stamp(job_dir / name) for name in JOB_INPUTS)
        digest.update(f"{job_dir.name}/ {stamps}\n".encode())
        for path in app_log_files(job_dir).paths():
            digest.update(f"  {path.relative_to(job_dir)} {_stamp(path)}\n".encode())
    return digest.hexdigest()
