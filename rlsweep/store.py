"""The result store: job directory names, atomic files, and reading a sweep back.

A job directory is complete if and only if it holds ``result.json``: the job writes it
last, to a temporary name, then renames it (a rename is atomic on POSIX), so a killed job
never leaves a partial result. A failed job holds ``error.txt`` with its full traceback.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import functools
import hashlib
import json
import os
import re
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from rlsweep.errors import ConfigError, SweepLocked

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
# A job's claim while it runs (job_claim): an flock, held by the process running the job.
CLAIM_FILE = ".rlsweep.claim"
RERUN_MODES = ("missing", "failed", "all")
# One line per attempt at running the job (rlsweep.executors.attempts), kept over reruns.
ATTEMPTS_FILE = "attempts.jsonl"
# The sweep directory's own records: what the sweep is (rlsweep.sweep.record: its replicate
# key, its command), a search's trials (rlsweep.search.run), an adaptive comparison's rounds
# (rlsweep.compare.record).
SWEEP_FILE = "sweep.json"
SEARCH_FILE = "search.json"
COMPARE_FILE = "compare.json"
# The SLURM array tasks the sweep's runs submitted (rlsweep.executors.slurm_tasks): a run
# after a killed one adopts those still queued or running.
SLURM_TASKS_FILE = ".rlsweep.slurm.jsonl"
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


class LinkRefused(ConfigError):
    """A symbolic link where rlsweep writes a file or runs a job: refused, never followed
    (a sweep directory on a shared, group-writable file system may hold a planted link)."""


def link_refused(path: Path, what: str = "file") -> LinkRefused:
    """The error for a symbolic link found at ``path`` (``what``: what rlsweep wanted
    there), naming the link and where it points."""
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return LinkRefused(
        f"{path} is a symbolic link{target}, where rlsweep keeps a {what}: rlsweep does not "
        "write through a link, and did not write to it or to what it points to. Remove the "
        "link (or move the real one there) and run again."
    )


def refuse_link(path: Path, what: str = "job directory") -> None:
    """Raise :class:`LinkRefused` if ``path`` itself (its last part) is a symbolic link."""
    if path.is_symlink():
        raise link_refused(path, what)


def open_no_follow(path: Path, flags: int) -> int:
    """``os.open(path, flags)`` refusing a symbolic link at ``path`` (``O_NOFOLLOW``: the
    link is never followed) with :class:`LinkRefused`; a file it creates has the mode
    0o666 less the umask, as any program's file."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) and path.is_symlink():
            raise link_refused(path) from None
        raise


def append_whole(fd: int, text: str) -> None:
    """Append ``text`` (whole lines) to the file open at ``fd`` (``O_APPEND``) in one write,
    on a line of its own: after a newline when a killed writer cut the last line short, so
    that readers skip that line and never see it glued to the next record."""
    size = os.fstat(fd).st_size
    lead = "\n" if size and os.pread(fd, 1, size - 1) != b"\n" else ""
    os.write(fd, (lead + text).encode("utf-8"))


def write_no_follow(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (created, or emptied first), refusing a symbolic link
    there (:class:`LinkRefused`) before anything is written. For small files one process
    owns (a worker's pid, a check file): no fsync, unlike :func:`atomic_open`."""
    fd = open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux's
    ``/proc/self/status``), else read once per process (set and put back under a lock)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        return _umask_once()
    return _umask_once()


@functools.cache
def _umask_once() -> int:
    with _UMASK_LOCK:
        # A file another thread creates meanwhile gets 0o077's mode: never more open.
        old = os.umask(0o077)
        os.umask(old)
    return old


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; on success it is fsynced and renamed onto
    ``path``, so readers see the old file or the whole new one, never a partial one. The
    file gets the mode the umask gives any new file (0o644 under umask 022). A symbolic
    link at ``path`` is replaced, never written through (the temporary file is created
    with ``O_EXCL``: nothing there is followed either)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            os.fchmod(fd, 0o666 & ~current_umask())
        except BaseException:
            os.close(fd)
            raise
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
    # "completed" | "failed" | "incomplete" | "damaged" (its result.json cannot be read as
    # a JSON object) | "unverified" (its result.json is not rlsweep's record of this job)
    status: str
    result: dict[str, Any] | None  # None unless completed (a result not counted is not kept)
    error: str | None
    # Why its result.json is not counted (damaged, unverified), naming the file; None: it is.
    problem: str | None = None

    @property
    def final_return(self) -> float | None:
        return None if self.result is None else float(self.result["final_return"])

    # A built-in job's agent, env and replicate index: from its result, else parsed from
    # its .hydra/config.yaml when first asked (an app's report never asks: parsing every
    # job's config would dominate a large app sweep's summary; bench/scale.py measures it).
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
    cfg = _hydra_config(job_dir)
    if cfg is not None:
        # Never resolved: an interpolation (``${oc.env:...}``) is unknown, never the reader's.
        agent, env, rep = (_plain_at(cfg, path) for path in ("agent.name", "env.id", "seed"))
        return str(agent or "?"), str(env or "?"), rep if isinstance(rep, int) else None
    return "?", "?", None


def load_yaml(path: Path) -> Any:
    """A YAML file's content, as plain data (interpolations left as written); None when it
    is absent or unreadable. Parsed by libyaml when PyYAML has it (its safe loader in C: the
    same values, several times faster than Python's)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(path.read_text(), Loader=loader) if path.is_file() else None
    except (OSError, ValueError, yaml.YAMLError):  # (ValueError: not UTF-8)
        return None


def recorded_choices(hydra_yaml: Path) -> dict[str, Any] | None:
    """The config-group choices a job directory's ``.hydra/hydra.yaml`` recorded
    (``hydra.runtime.choices``; None: no such file, or none recorded)."""
    node: Any = load_yaml(hydra_yaml)
    for part in ("hydra", "runtime", "choices"):
        node = node.get(part) if isinstance(node, dict) else None
    return {str(k): v for k, v in node.items()} if isinstance(node, dict) else None


def _hydra_config(job_dir: Path) -> dict[str, Any] | None:
    """The job's ``.hydra/config.yaml`` as plain data, unresolved (None: absent, unreadable
    or not a mapping)."""
    data = load_yaml(job_dir / HYDRA_DIR / "config.yaml")
    return data if isinstance(data, dict) else None


def _plain_at(data: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of plain data; None when absent or an interpolation."""
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return None if isinstance(node, str) and "${" in node else node


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of nested mappings by dotted path (an empty mapping, a list: a leaf)."""
    if isinstance(node, Mapping) and node:
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: node} if prefix else {}


def _same_value(recorded: Any, written: Any) -> bool:
    """Whether a recorded identity's value and Hydra's record of it agree (the same JSON; a
    number YAML kept as text, ``1e-3``, read as the number)."""
    as_json = functools.partial(json.dumps, sort_keys=True, default=str)
    if as_json(recorded) == as_json(written):
        return True
    number = isinstance(recorded, int | float) and not isinstance(recorded, bool)
    if number and isinstance(written, str):
        try:
            return float(written) == float(recorded)
        except ValueError:
            return False
    return False


def _config_disagreement(job_dir: Path, config: Any) -> str | None:
    """The first value of a recorded identity's config that the job's own
    ``.hydra/config.yaml`` gives otherwise, as ``key: X recorded, Y in .hydra/config.yaml``
    (None: they agree wherever both give a value; interpolations are not compared)."""
    written = _hydra_config(job_dir)
    if written is None or not isinstance(config, dict):
        return None
    written.pop("hydra", None)
    theirs = flatten(written)
    for key, value in flatten({k: v for k, v in config.items() if k != "hydra"}).items():
        if key not in theirs:
            continue
        other = theirs[key]
        if isinstance(other, str) and "${" in other:
            continue
        if not _same_value(value, other):
            return f"{key}: {value!r} recorded, {other!r} in {HYDRA_DIR}/config.yaml"
    return None


_SHA256 = re.compile(r"[0-9a-f]{64}")


def result_problem(job_dir: Path, result: dict[str, Any]) -> str | None:
    """Why a ``result.json`` is not rlsweep's record of the job in ``job_dir`` (None: it
    is): it holds ``rlsweep.identity``, a SHA-256 of the canonical JSON of the identity it
    holds at ``rlsweep.job``, whose config agrees with the job's ``.hydra/config.yaml``."""
    from rlsweep.identity import canonical_json

    meta = result.get(RECORD_KEY)
    if not isinstance(meta, dict) or "identity" not in meta:
        return "no rlsweep record (rlsweep.identity) in it: not written by rlsweep for this job"
    digest, job = meta.get("identity"), meta.get("job")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest) or not isinstance(job, dict):
        return "its rlsweep record holds no SHA-256 identity and the identity's values"
    try:
        text = canonical_json(job)
    except ValueError:  # NaN or infinity: no identity rlsweep writes
        return "its recorded identity is not JSON rlsweep writes"
    if hashlib.sha256(text.encode("ascii")).hexdigest() != digest:
        return "its recorded identity does not match its SHA-256 (rlsweep.identity)"
    disagreement = _config_disagreement(job_dir, job.get("config"))
    if disagreement is not None:
        return f"its recorded identity is another job's ({disagreement})"
    return None


def iter_job_dirs(sweep_dir: Path) -> Iterator[Path]:
    """Job directories of a sweep: its subdirectories that Hydra or a job wrote into. A
    symbolic link to a directory is no job's: never followed (a sweep refuses to run a job
    there, see :func:`job_status`)."""
    if not sweep_dir.is_dir():
        return
    for child in sorted(sweep_dir.iterdir()):
        if (
            not child.is_symlink()
            and child.is_dir()
            and any((child / name).exists() for name in (HYDRA_DIR, RESULT_FILE, ERROR_FILE))
        ):
            yield child


def _read_result(job_dir: Path) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """``(result, status, problem)`` of a job's ``result.json``: ``(None, None, None)`` when
    there is none; the result when it is rlsweep's record of this job; else no result, the
    status ``damaged`` (not a JSON object) or ``unverified``, and why, naming the file."""
    path = job_dir / RESULT_FILE
    if not path.is_file():
        return None, None, None
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError) as exc:  # (a UnicodeDecodeError is a ValueError)
        return None, "damaged", f"{path}: not readable as JSON ({type(exc).__name__}: {exc})"
    if not isinstance(data, dict):
        return None, "damaged", f"{path}: JSON, but a {type(data).__name__}, not an object"
    problem = result_problem(job_dir, data)
    if problem is not None:
        return None, "unverified", f"{path}: {problem}"
    return data, "completed", None


def read_job(job_dir: Path) -> JobRecord:
    """What a job directory holds: a result counts only when it is rlsweep's record of this
    job (:func:`result_problem`); a damaged or unverified one is named, never read."""
    result, status, problem = _read_result(job_dir)
    error_file = job_dir / ERROR_FILE
    error = (
        error_file.read_text(errors="replace") if error_file.is_file() and result is None else None
    )
    if status is None:
        status = "failed" if error is not None else "incomplete"
    return JobRecord(job_dir, status, result, error, problem)


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
    or still running) or ``missing`` (never started). A job directory that is a symbolic link
    is refused (:class:`LinkRefused`) before anything is read, moved or written there."""
    refuse_link(job_dir)
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
    does not resume it. A job directory that is a symbolic link is refused
    (:class:`LinkRefused`) before anything is removed or moved."""
    refuse_link(job_dir)
    names = _OUTPUTS if fresh else (ERROR_FILE,)
    for name in names:
        (job_dir / name).unlink(missing_ok=True)
    if fresh:
        _move_aside(job_dir)


def _move_aside(job_dir: Path) -> None:
    """Everything in ``job_dir`` but Hydra's files and the attempts into a new
    ``.previous/<n>/`` (n = 1, 2, ...; none made when there is nothing to move). A link at
    ``job_dir`` or at its ``.previous`` is refused before anything moves."""
    refuse_link(job_dir)
    refuse_link(job_dir / PREVIOUS_DIR, "directory of earlier runs' files")
    others = [
        p
        for p in job_dir.iterdir()
        if p.name not in (HYDRA_DIR, PREVIOUS_DIR, ATTEMPTS_FILE, CLAIM_FILE)
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
    (a job's ``.previous/<n>``, its ``outside_logs/<n>``). A link at ``parent`` is refused
    (:class:`LinkRefused`): what goes into the new directory would land where it points."""
    refuse_link(parent, "directory")
    taken = [int(p.name) for p in parent.iterdir() if p.name.isdigit()] if parent.is_dir() else []
    target = parent / str(max(taken, default=first - 1) + 1)
    target.mkdir(parents=True)
    return target


@contextlib.contextmanager
def job_claim(job_dir: Path) -> Iterator[str | None]:
    """Hold the job's claim while the block runs: one run of a job at a time, whatever ran
    it (two sweeps into one directory, a second SLURM array submitted after the first
    sweep's process was killed). The claim is an ``flock`` on the job's ``.rlsweep.claim``,
    which dies with its holder (shared file systems: NFS emulates it with its own locks,
    Lustre needs its ``flock`` mount option). Yields None when the claim was free, else who
    held it (``pid N on host``): this process waited until that run ended, and the caller
    checks for the result it left before running the job again. The file stays (deleting a
    held lock's file would let a third process lock a new one)."""
    job_dir.mkdir(parents=True, exist_ok=True)
    refuse_link(job_dir)
    fd = open_no_follow(job_dir / CLAIM_FILE, os.O_RDWR | os.O_CREAT)
    try:
        held = None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            print(
                f"[rlsweep] {job_dir.name}: another run of this job holds it ({held}); "
                "waiting for it to end",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
        try:
            yield held
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def sweep_lock(sweep_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on the sweep directory for the whole sweep: a second sweep
    into it fails at once instead of interleaving writes. The lock is an ``flock``: it dies
    with the process, so a killed sweep never leaves a stale lock behind."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    path = sweep_dir / LOCK_FILE
    # Never through a link planted there (it would truncate the file it points to).
    with os.fdopen(open_no_follow(path, os.O_RDWR | os.O_CREAT), "r+", encoding="utf-8") as f:
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
