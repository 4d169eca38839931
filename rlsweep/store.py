"""The result store: job directory names, atomic files, and reading a sweep back.

A job directory is complete if and only if it holds ``result.json``: the job writes it
last, to a temporary name, then renames it (a rename is atomic on POSIX), so a killed job
never leaves a partial result. A failed job holds ``error.txt`` with its full traceback.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import functools
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from rlsweep.errors import SweepLocked

if TYPE_CHECKING:
    from rlsweep.identity import Identity

RESULT_FILE = "result.json"
ERROR_FILE = "error.txt"
METRICS_FILE = "metrics.csv"
SEEDS_FILE = "seeds.json"
CHECKPOINT_FILE = "checkpoint.pt"
HYDRA_DIR = ".hydra"
LOCK_FILE = ".rlsweep.lock"
# In a running job's directory: the pid of the worker running it (for its time limit).
WORKER_PID_FILE = ".worker.pid"
RERUN_MODES = ("missing", "failed", "all")
# One line per attempt at running the job (rlsweep.executors.attempts), kept over reruns.
ATTEMPTS_FILE = "attempts.jsonl"
# The sweep directory's own records: what the sweep is (rlsweep.sweep.record: its replicate
# key, its command), a search's trials (rlsweep.search.run), an adaptive comparison's rounds
# (rlsweep.compare.record).
SWEEP_FILE = "sweep.json"
SEARCH_FILE = "search.json"
COMPARE_FILE = "compare.json"
# The versions of the packages a job's process imported (rlsweep.code), written with its result.
PACKAGES_FILE = "packages.json"
# What a job writes; cleared before a job runs again (all of it for rerun=all).
_OUTPUTS = (RESULT_FILE, ERROR_FILE, METRICS_FILE, SEEDS_FILE, CHECKPOINT_FILE, PACKAGES_FILE)
# In a job directory run again with rerun=all: what the earlier runs wrote but rlsweep's own
# outputs (the app's logs and files), one numbered directory per such rerun. Never read.
PREVIOUS_DIR = ".previous"

_OPT_IN = re.compile(r"(?:^|,)\+?rlsweep=[A-Za-z_]+(?=,|$)")
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")
_MAX_NAME = 200  # file names may have 255 bytes; leave room for the hash suffix
_HASH = 10  # hex digits of the suffix that keeps a name made safe distinct


def _safe(text: str) -> str:
    """``text`` as a file name: anything that could leave the sweep directory (slashes,
    ``..``) replaced, then suffixed with a short hash of the original so that distinct
    texts never share a name."""
    safe = _UNSAFE.sub("_", text)
    if safe.startswith("."):
        safe = "_" + safe[1:]
    if safe == text:
        return safe
    return f"{safe}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:_HASH]}"


def job_dir_name(override_dirname: str) -> str:
    """A filesystem-safe directory name from a job's sorted overrides (Hydra's
    ``override_dirname``): the name of a single run's directory, and of a sweep's jobs
    launched by another sweeper (Hydra's Optuna sweeper) over rlsweep's launcher.

    The opt-in (``+rlsweep=joblib``) says how jobs run, not what they are: it is left out.
    A name too long is cut and suffixed with a hash of the whole (rlsweep's sweeper names
    its jobs by :func:`job_name` instead, never cut).
    """
    text = _OPT_IN.sub("", str(override_dirname)).strip(",")
    if not text:
        return "defaults"
    safe = _safe(text)
    if len(safe) > _MAX_NAME:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:_HASH]
        safe = f"{safe[: _MAX_NAME - _HASH - 1]}-{digest}"
    return safe


def job_name(pairs: list[tuple[str, str]], last: str | None = None) -> str:
    """A job's directory name from the values of the keys the sweep varies, ``(key, value
    text)`` pairs: ``optim.lr=0.001,seed=3``, sorted by key but ``last`` (the replicate key)
    at the end, with no ``+``. Every key stays in the name: a long value is shortened to its
    start and a hash of it (a name of keys alone too long for a file name is refused)."""
    if not pairs:
        return "defaults"
    items = sorted(
        ((str(k).lstrip("+~"), str(v)) for k, v in pairs), key=lambda kv: (kv[0] == last, kv)
    )
    limit = max((len(v) for _, v in items), default=0)
    while True:
        shown = [(k, _shorten(v, limit)) for k, v in items]
        name = _safe(",".join(f"{k}={v}" for k, v in shown))
        if len(name) <= _MAX_NAME or limit <= 8:
            break
        limit = max(8, limit // 2)
    if len(name) > 250:
        from rlsweep.errors import ConfigError

        raise ConfigError(
            f"The sweep varies {len(items)} keys ({', '.join(k for k, _ in items)}), too many "
            "to name a job's directory by them: set hydra.sweep.subdir (e.g. "
            "${hydra.job.num}) for this sweep."
        )
    return name


def _shorten(value: str, limit: int) -> str:
    """``value`` if at most ``limit`` characters, else its start and a hash of the whole."""
    if len(value) <= limit:
        return value
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:6]
    return f"{value[: max(1, limit - 7)]}_{digest}"


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; on success it is fsynced and renamed onto
    ``path``, so readers see the old file or the whole new one, never a partial one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def is_temp_file(name: str) -> bool:
    """Whether ``name`` is one of atomic_open's temporary files (``.<name>.<random>.tmp``)."""
    return name.startswith(".") and name.endswith(".tmp")


def remove_leftovers(directory: Path, *, finished: bool) -> list[str]:
    """Remove what a killed process left in a job's (or the sweep's) directory: writes cut
    short (atomic_open's temporary files) and, in a ``finished`` job's, its checkpoint and
    worker pid (killed after its result was written). Returns the names removed."""
    try:
        names = [entry.name for entry in os.scandir(directory)]
    except OSError:  # no directory yet: nothing was left
        return []
    stale = [n for n in names if is_temp_file(n)]
    if finished:
        stale += [n for n in (CHECKPOINT_FILE, WORKER_PID_FILE) if n in names]
    for name in stale:
        (directory / name).unlink(missing_ok=True)
    return stale


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one."""
    with atomic_open(path) as f:
        f.write(text)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


# The key of result.json under which rlsweep keeps the job's identity.
RECORD_KEY = "rlsweep"


def write_record(
    job_dir: Path,
    values: dict[str, Any],
    identity: Identity,
    keys: dict[str, str | None] | None = None,
    *,
    gpus: dict[str, Any] | None = None,
    numerics: dict[str, Any] | None = None,
    code: dict[str, Any] | None = None,
) -> None:
    """Write ``result.json``: the task's values and, under ``rlsweep``, the identity of the
    job they were computed for (its SHA-256 and its values), for an app which config keys
    were its replicate and its root (``keys``: ``{"replicate": "env.seed", ...}``), and the
    GPUs rlsweep gave it (``gpus``: ``{"devices": ["1"], "per_job": 0.5}``) and the numerics
    fingerprint of the process that computed them (neither is part of the identity)."""
    record = dict(values)
    record[RECORD_KEY] = {"identity": identity.digest, "job": identity.to_json()}
    if keys is not None:
        record[RECORD_KEY]["keys"] = keys
    if gpus is not None:
        record[RECORD_KEY]["gpus"] = gpus
    if numerics is not None:
        record[RECORD_KEY]["numerics"] = numerics
    if code is not None:
        record[RECORD_KEY]["code"] = code
    atomic_write_json(job_dir / RESULT_FILE, record)


def recorded_identity(result: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """``(digest, identity values)`` of the job a ``result.json`` was computed for, or None
    for a file rlsweep did not write (an app's own, or one older than identities)."""
    meta = result.get(RECORD_KEY)
    if not isinstance(meta, dict) or not isinstance(meta.get("identity"), str):
        return None
    job = meta.get("job")
    return meta["identity"], job if isinstance(job, dict) else {}


def recorded_lookup_digest(job_dir: Path) -> str | None:
    """The lookup digest (:attr:`rlsweep.identity.Identity.lookup_digest`) of the job a
    directory's ``result.json`` was computed for, or None (no result, not rlsweep's record)."""
    from rlsweep.identity import lookup_digest

    try:
        result = json.loads((job_dir / RESULT_FILE).read_text())
    except (OSError, ValueError):
        return None
    recorded = recorded_identity(result) if isinstance(result, dict) else None
    return None if recorded is None or not recorded[1] else lookup_digest(recorded[1])


@dataclass(frozen=True)
class JobRecord:
    """What one job directory holds."""

    path: Path
    status: str  # "completed" | "failed" | "incomplete"
    result: dict[str, Any] | None
    error: str | None

    @property
    def final_return(self) -> float | None:
        return None if self.result is None else float(self.result["final_return"])

    # A built-in job's agent, env and replicate index: from its result, else parsed from
    # its .hydra/config.yaml when first asked (an app's report never asks: parsing every
    # job's config took 39 s of a 10,000-job app's summary).
    @functools.cached_property
    def _names(self) -> tuple[str, str, int | None]:
        return _job_identity(self.path, self.result)

    @property
    def agent(self) -> str:
        return self._names[0]

    @property
    def env(self) -> str:
        return self._names[1]

    @property
    def replicate(self) -> int | None:
        return self._names[2]


def _job_identity(job_dir: Path, result: dict[str, Any] | None) -> tuple[str, str, int | None]:
    if result is not None and all(k in result for k in ("agent", "env", "replicate")):
        return str(result["agent"]), str(result["env"]), int(result["replicate"])
    cfg_file = job_dir / HYDRA_DIR / "config.yaml"
    if cfg_file.is_file():
        from omegaconf import OmegaConf

        cfg = OmegaConf.load(cfg_file)
        # Any app's config: an interpolation only its own process can resolve is unknown.
        agent = OmegaConf.select(cfg, "agent.name", default="?", throw_on_resolution_failure=False)
        env = OmegaConf.select(cfg, "env.id", default="?", throw_on_resolution_failure=False)
        rep = OmegaConf.select(cfg, "seed", default=None, throw_on_resolution_failure=False)
        return str(agent), str(env), rep if isinstance(rep, int) else None
    return "?", "?", None


def iter_job_dirs(sweep_dir: Path) -> Iterator[Path]:
    """Job directories of a sweep: its subdirectories that Hydra or a job wrote into."""
    if not sweep_dir.is_dir():
        return
    for child in sorted(sweep_dir.iterdir()):
        if child.is_dir() and any(
            (child / name).exists() for name in (HYDRA_DIR, RESULT_FILE, ERROR_FILE)
        ):
            yield child


def read_job(job_dir: Path) -> JobRecord:
    result_file, error_file = job_dir / RESULT_FILE, job_dir / ERROR_FILE
    result = json.loads(result_file.read_text()) if result_file.is_file() else None
    error = error_file.read_text() if error_file.is_file() and result is None else None
    status = "completed" if result is not None else "failed" if error is not None else "incomplete"
    return JobRecord(job_dir, status, result, error)


def read_sweep(sweep_dir: Path) -> list[JobRecord]:
    return [read_job(d) for d in iter_job_dirs(sweep_dir)]


def read_metrics(job_dir: Path) -> list[dict[str, float]]:
    """Rows of a job's metrics.csv as floats (empty cells become NaN)."""
    path = job_dir / METRICS_FILE
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return [
            {k: float(v) if v not in ("", None) else float("nan") for k, v in row.items()}
            for row in csv.DictReader(f)
        ]


def job_status(job_dir: Path) -> str:
    """``completed`` (result.json), ``failed`` (error.txt), ``incomplete`` (started, killed
    or still running) or ``missing`` (never started)."""
    if (job_dir / RESULT_FILE).is_file():
        return "completed"
    if (job_dir / ERROR_FILE).is_file():
        return "failed"
    return "incomplete" if job_dir.is_dir() else "missing"


def sweep_dir_of(config: Any) -> Path:
    """A composed config's sweep directory (``hydra.sweep.dir``)."""
    return Path(str(config.hydra.sweep.dir))


def should_run(status: str, rerun: str) -> bool:
    """Whether a job in ``status`` runs under ``rerun``: ``missing`` runs every job without
    result.json (failed and incomplete ones included), ``failed`` only the failed ones,
    ``all`` every job from scratch."""
    if rerun == "all":
        return True
    if rerun == "failed":
        return status == "failed"
    return status != "completed"


def clear_for_rerun(job_dir: Path, *, fresh: bool) -> None:
    """Remove a failed attempt's error. ``fresh`` (rerun=all): remove every output and the
    checkpoint too, and move whatever else the job wrote (the app's own logs, checkpoints,
    files) into ``.previous/<n>/``, so that the job starts in a directory as a new job finds
    it: its earlier logs are kept but never read as this run's, and the app's own checkpoint
    does not resume it."""
    names = _OUTPUTS if fresh else (ERROR_FILE,)
    for name in names:
        (job_dir / name).unlink(missing_ok=True)
    if fresh:
        _move_aside(job_dir)


def _move_aside(job_dir: Path) -> None:
    """Everything in ``job_dir`` but Hydra's files and the attempts into a new
    ``.previous/<n>/`` (n = 1, 2, ...; none made when there is nothing to move)."""
    others = [
        p for p in job_dir.iterdir() if p.name not in (HYDRA_DIR, PREVIOUS_DIR, ATTEMPTS_FILE)
    ]
    if not others:
        return
    target = new_numbered_dir(job_dir / PREVIOUS_DIR, first=1)
    for path in others:
        path.rename(target / path.name)
    # A relative link to a file that did not move (outside_logs/ links to an app's logs
    # outside the job) would now point one level off: point it from where it is now.
    for link in (p for p in target.rglob("*") if p.is_symlink()):
        was = Path(os.path.normpath(job_dir / link.relative_to(target).parent / link.readlink()))
        if not link.readlink().is_absolute() and not any(was.is_relative_to(p) for p in others):
            link.unlink()
            link.symlink_to(os.path.relpath(was, link.parent))


def new_numbered_dir(parent: Path, first: int) -> Path:
    """A new directory ``parent/<n>``: n one past the highest number there, else ``first``
    (a job's ``.previous/<n>``, its ``outside_logs/<n>``)."""
    taken = [int(p.name) for p in parent.iterdir() if p.name.isdigit()] if parent.is_dir() else []
    target = parent / str(max(taken, default=first - 1) + 1)
    target.mkdir(parents=True)
    return target


@contextlib.contextmanager
def sweep_lock(sweep_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on the sweep directory for the whole sweep: a second sweep
    into it fails at once instead of interleaving writes. The lock is an ``flock``: it dies
    with the process, so a killed sweep never leaves a stale lock behind."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    path = sweep_dir / LOCK_FILE
    with path.open("a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            raise SweepLocked(
                f"Another sweep is already running into {sweep_dir} ({holder}). Wait for it to "
                "finish, or give this sweep its own directory with name=<experiment name> (python -m rlsweep) or hydra.sweep.dir=<dir> (any app)."
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}")
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
