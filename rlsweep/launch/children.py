"""The processes a job leaves behind: ended when the job ends, failed or not.

A job's sub-processes (a TorchRL collector's env workers, an async vector env's, a forked
helper) belong to the job. One still running when the job returns or raises would keep
writing into its directory after it is recorded, hold the worker (multiprocessing joins
its non-daemon children when the process exits: a sweep whose job failed with live
children never ended), or run into the next job of the same worker. So the processes
descended from this one that appeared while the job ran, and still live when it ends, are
sent SIGTERM, then SIGKILL after a grace period, and the job's log says so.

Linux reads the process tree from ``/proc``; elsewhere only the job's multiprocessing
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
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

GRACE_S = 3.0  # between SIGTERM and SIGKILL
# Processes a process keeps for its next jobs (in their command line): multiprocessing's
# helpers, and those of rlsweep's trackers.
_KEPT = ("resource_tracker", "forkserver", "wandb")


def _children_map() -> dict[int, list[int]] | None:
    """Each process's children, from ``/proc`` (None: no ``/proc``)."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").is_file():
        return None
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[0] != "Z":  # (a zombie is already ended)
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def descendants() -> set[int]:
    """The live processes descended from this one."""
    tree = _children_map()
    if tree is None:
        return {p.pid for p in multiprocessing.active_children() if p.pid is not None}
    out: set[int] = set()
    todo = [os.getpid()]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _kept(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return any(name.encode() in command for name in _KEPT)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # (another user's: not ours to end)
        return False
    return pid in descendants()


def end(pids: set[int]) -> list[int]:
    """SIGTERM each of ``pids``, SIGKILL those alive after :data:`GRACE_S`; the pids ended."""
    ended = []
    for pid in sorted(pids):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
            ended.append(pid)
    deadline = time.monotonic() + GRACE_S
    while any(_alive(p) for p in ended) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in ended:
        if _alive(pid):
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
