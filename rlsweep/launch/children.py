"""The processes a job leaves behind: ended when the job ends, failed or not.

A job's sub-processes (a TorchRL collector's env workers, an async vector env's, a forked
helper) belong to the job. One still running when the job returns or raises would keep
writing into its directory after it is recorded, hold the worker (multiprocessing joins
its non-daemon children when the process exits: a sweep whose job failed with live
children never ended), or run into the next job of the same worker. So the processes
descended from this one that appeared while the job ran, and still live when it ends, are
sent SIGTERM, then SIGKILL after a grace period, and the job's log says so.

Linux gives each process's children in ``/proc`` (a few files per job); elsewhere only the job's multiprocessing
children are found. Helpers a process keeps for all its jobs are left alone:
multiprocessing's (and loky's) resource tracker and forkserver, and the trackers' service
processes (W&B's ``wandb-core``, started by rlsweep for the job and reused by the next).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

GRACE_S = 3.0  # between SIGTERM and SIGKILL
# Processes a process keeps for its next jobs (in their command line): multiprocessing's
# helpers, and those of rlsweep's trackers.
_KEPT = ("resource_tracker", "forkserver", "wandb")


def _live(pid: int) -> bool:
    """Whether ``pid`` runs (not ended, nor a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :][:1] != "Z"


def _children(pid: int) -> list[int]:
    """The children of ``pid``, from each of its threads' ``children`` file (the kernel
    keeps them per thread): reading them costs a few files, not a scan of every process."""
    out: list[int] = []
    try:
        threads = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:  # ended meanwhile
        return out
    for thread in threads:
        try:
            out += [int(child) for child in (thread / "children").read_text().split()]
        except OSError:  # the thread ended meanwhile
            continue
    return out


# Whether the kernel lists each thread's children (Linux's CONFIG_PROC_CHILDREN).
_LISTS_CHILDREN = Path(f"/proc/self/task/{threading.get_native_id()}/children").is_file()


def descendants() -> set[int]:
    """The live processes descended from this one."""
    if not _LISTS_CHILDREN:
        return {p.pid for p in multiprocessing.active_children() if p.pid is not None}
    out: set[int] = set()
    todo = [os.getpid()]
    while todo:
        for child in _children(todo.pop()):
            if child not in out and _live(child):
                out.add(child)
                todo.append(child)
    return out


def _kept(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return any(name.encode() in command for name in _KEPT)


def end(pids: set[int]) -> list[int]:
    """SIGTERM each of ``pids``, SIGKILL those alive after :data:`GRACE_S`; the pids ended.
    Only processes still descended from this one are signalled again (a pid the system gave
    to another process meanwhile is not)."""
    ended = []
    for pid in sorted(pids):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
            ended.append(pid)
    deadline = time.monotonic() + GRACE_S
    while (left := descendants() & set(ended)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    multiprocessing.active_children()  # reaps the multiprocessing children just ended
    return ended


@contextlib.contextmanager
def ended_with_the_job(name: str) -> Iterator[None]:
    """While the block runs a job: afterwards, the processes it left running are ended."""
    before = descendants()
    try:
        yield
    finally:
        left = {p for p in descendants() - before if not _kept(p)}
        if left:
            ended = end(left)
            if ended:
                log.warning(
                    f"{name}: ended {len(ended)} sub-process(es) the job left running "
                    f"(pids {', '.join(map(str, ended))}): a job's processes end with it"
                )
