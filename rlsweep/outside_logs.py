"""An app's own logs written outside its job's directory, linked into it.

Apps write their TensorBoard event files and CSV logs where their config says,
often relative to the directory the command started in: sheeprl (``hydra.job.chdir: false``)
writes ``logs/runs/<algo>/<env>/<time>_<exp>_<seed>/version_0/events.out.tfevents.*``. The
report, the summary and ``rlsweep.check`` read a job's logs in its directory, so without a
link such a job would have "returned nothing", its numbers nowhere in the sweep.

While a job runs, each such file it opens for writing outside its directory gets a relative
symbolic link in ``<job dir>/outside_logs/<n>/`` (``n`` = 0, 1, ... per directory the files
are in, an earlier attempt's links kept; a per-metric CSV file keeps its path below
``scalars/``), made when the file is first opened: a job that fails or is killed has its
links too, and ``tensorboard --logdir multirun/<name>`` shows every job's curves while they
run. The app's files stay where it
wrote them (move them with the sweep: the links are relative).

Found with an audit hook (:func:`sys.addaudithook`): the ``open`` event of every file opened
by ``open()`` or ``os.open``, in any thread (TensorBoard's writers open their file in a
thread of their own). Installed at a process's first job and never removed (Python cannot);
it returns at once for any other event and while no job runs (Python calls it for every
audited event, ``builtins.id`` most, many thousand times in a built-in job: returning at
once keeps their cost a small part of the job's). A file is the job's whose
thread opens it, else, opened by a thread of no job (a writer's), the process's one running
job; with several jobs in one process (``backend=threading``) such a file is not linked.
The hook never raises into the app's ``open()``: a link it cannot make is said on stderr.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from rlsweep.app_logs import flush_event_writers
from rlsweep.series.csv_files import SCALARS_DIR
from rlsweep.series.event_files import EVENT_FILE_PREFIX
from rlsweep.series.wide_csv import STEP_COLUMNS
from rlsweep.store import new_numbered_dir

OUTSIDE_LOGS_DIR = "outside_logs"
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT


class _Links:
    """One running job's links: each source directory's link directory, each file linked."""

    def __init__(self, job_dir: Path) -> None:
        self.job_dir = os.path.abspath(job_dir)
        self.dirs: dict[str, str] = {}
        self.files: set[str] = set()

    def link(self, path: str) -> None:
        if path in self.files or _inside(path, self.job_dir):
            return
        self.files.add(path)
        source, below = _place(path)
        target_dir = self.dirs.get(source)
        if target_dir is None:
            new = new_numbered_dir(Path(self.job_dir) / OUTSIDE_LOGS_DIR, first=0)
            target_dir = self.dirs[source] = str(new)
        link = os.path.join(target_dir, below)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if not os.path.lexists(link):
            os.symlink(os.path.relpath(path, os.path.dirname(link)), link)


_job: ContextVar[_Links | None] = ContextVar("rlsweep_outside_logs", default=None)
_running: list[_Links] = []  # every job running in this process
_lock = threading.Lock()
_hook_installed = False


@contextmanager
def keeping_app_logs(job_dir: Path) -> Iterator[None]:
    """While the block runs (a job, ``job_dir`` its directory), its outside logs linked; as
    it ends, every TensorBoard event the app queued written out
    (:func:`rlsweep.app_logs.flush_event_writers`), its file linked if not yet."""
    with linking_outside_logs(job_dir):
        try:
            yield
        finally:
            flush_event_writers()


@contextmanager
def linking_outside_logs(job_dir: Path) -> Iterator[None]:
    """While the block runs (a job, ``job_dir`` its directory): link its outside logs."""
    global _hook_installed
    links = _Links(job_dir)
    with _lock:
        if not _hook_installed:
            sys.addaudithook(_hook)
            _hook_installed = True
        _running.append(links)
    token = _job.set(links)
    try:
        yield
    finally:
        _job.reset(token)
        with _lock:
            _running.remove(links)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _running or len(args) != 3:
        return
    path, mode, flags = args
    if not isinstance(path, str | bytes | os.PathLike) or not _writes(mode, flags):
        return
    name = os.fsdecode(path)  # (torch's SummaryWriter opens its file by a bytes path)
    if not _is_log(name):
        return
    links = _job.get()
    if links is None:
        with _lock:
            if len(_running) != 1:
                return
            links = _running[0]
    try:
        with _lock:  # (linking opens no file: this hook is never entered again here)
            links.link(os.path.abspath(name))
    except Exception as exc:  # raised here, it would fail the app's own open()
        print(
            f"[rlsweep] could not link {name} into {links.job_dir}/{OUTSIDE_LOGS_DIR}: "
            f"{type(exc).__name__}: {exc}",
            file=sys.stderr,
        )


def _new_lock_in_child() -> None:
    """A forked child (an app's sub-process) gets a lock of its own: another thread of its
    parent may have held this one at the fork."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


def _writes(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


_SCALARS = f"{os.sep}{SCALARS_DIR}{os.sep}"


def _is_log(name: str) -> bool:
    """A TensorBoard event file, a per-metric CSV file (a ``.csv`` below ``scalars/``), or
    a wide CSV file (Lightning's ``metrics.csv``, Stable-Baselines3's ``progress.csv``)."""
    base = os.path.basename(name)
    return (
        base.startswith(EVENT_FILE_PREFIX)
        or base in STEP_COLUMNS
        or (base.endswith(".csv") and _SCALARS in name)
    )


def _place(path: str) -> tuple[str, str]:
    """Where a log file (:func:`_is_log`) is linked from, and its path below that: a
    per-metric CSV file's ``scalars/`` parent (its metric's name is its path below); any
    other log file's own directory."""
    head, _, tail = path.rpartition(_SCALARS)
    if not head or os.path.basename(path).startswith(EVENT_FILE_PREFIX):
        return os.path.dirname(path), os.path.basename(path)
    return head, os.path.join(SCALARS_DIR, tail)


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)
