"""An app's ``os._exit`` or ``sys.exit`` in a job: a failure of that job, said as such.

rlsweep runs a job's task function and records what it returns. A job that ends its own
process instead (``os._exit(0)`` at the end of a script, ``sys.exit()``) has no result, and
would take its process with it: a pool's worker (reported as a worker death, "out of
memory?", and every job in flight run again to find the culprit), or, under the serial
executor, the sweep itself (silently, with status 0).

So while a job's task function runs (:func:`exits_fail_the_job`), ``os._exit`` called in
the job's process from the thread that runs the task raises SystemExit instead, as
``sys.exit`` does (a BaseException: an app's ``except Exception`` does not stop it). A
SystemExit leaves the task function as :class:`TaskExited`, naming the call: an ordinary
failure of the job, recorded once with its traceback, retried as any failure is
(``hydra.launcher.retries``). Anywhere else ``os._exit`` is the one the job found (the
real one): a process the job forked (multiprocessing ends its fork children with
``os._exit``), another thread, any process outside a job. rlsweep's own fault injection
(:mod:`rlsweep.faults`) ends its worker for real with :data:`REAL_EXIT`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from rlsweep.errors import RLSweepError

# os._exit itself, as this module found it: ends the process at once, whoever calls it.
REAL_EXIT: Callable[[int], NoReturn] = os._exit

_lock = threading.Lock()
# The threads running a job's task function now, each with the pid of its process (a
# process forked from one inherits this table, not the pid).
_running: dict[int, int] = {}
# What os._exit was when the first of them replaced it (the real one, or a tool's wrapper
# of it, as coverage's): called everywhere else, and put back when the last one ends.
_outside: Callable[..., NoReturn] = REAL_EXIT


class TaskExited(RLSweepError):
    """A job whose task function ended its process (``os._exit``, ``sys.exit``) instead of
    returning: it has no result."""


def _exit(status: int) -> NoReturn:
    """``os._exit`` while a job runs: SystemExit in the job's own thread, else the one the
    job found."""
    if _running.get(threading.get_ident()) == os.getpid():
        raise SystemExit(status)
    _outside(status)


def _call(exc: SystemExit) -> str:
    """The call that raised ``exc``: ``os._exit(0)`` if it was :func:`_exit` (the innermost
    frame of its traceback), else ``sys.exit(...)``."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None and tb.tb_frame.f_code is _exit.__code__:
        return f"os._exit({exc.code!r})"
    return "sys.exit()" if exc.code is None else f"sys.exit({exc.code!r})"


def exit_message(call: str) -> str:
    """What a job that called ``call`` (``os._exit(0)``) instead of returning is told."""
    return (
        f"the job called {call} before its task function returned, so it has no result "
        "(rlsweep runs the task function and records what it returns: return from it instead)"
    )


@contextlib.contextmanager
def _exit_raises() -> Iterator[None]:
    """``os._exit`` raises SystemExit in this thread of this process until the block ends."""
    global _outside
    me = threading.get_ident()
    with _lock:
        if not _running and os._exit is not _exit:
            _outside, os._exit = os._exit, _exit
        _running[me] = os.getpid()
    try:
        yield
    finally:
        with _lock:
            _running.pop(me, None)
            if not _running and os._exit is _exit:  # left alone if the app replaced it
                os._exit = _outside


def exits_fail_the_job(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``function`` (a task function) whose ``os._exit`` or ``sys.exit`` is a TaskExited,
    with the traceback of the call."""

    @functools.wraps(function)
    def wrapper(cfg: Any) -> Any:
        with _exit_raises():
            try:
                return function(cfg)
            except SystemExit as exc:
                error = TaskExited(exit_message(_call(exc)))
                raise error.with_traceback(exc.__traceback__) from None

    return wrapper
