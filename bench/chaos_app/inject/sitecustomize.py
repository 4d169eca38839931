"""Fault injection for the chaos soak (bench/chaos.py), in every process of its sweeps.

bench/chaos.py puts this directory on ``PYTHONPATH``, so Python imports this module at the
start of the sweep's process and of each of its workers. It does nothing unless
``CHAOS_SWEEP_DIR`` is set; then it wraps ``os.replace``, the rename that makes rlsweep's
writes atomic (``rlsweep.store.atomic_open``: a temporary ``.<name>.<random>.tmp`` beside
the file, then a rename onto it), for files under that directory:

- every rename of a job's ``result.json`` into place is appended to ``CHAOS_EXEC_LOG``
  as a ``recorded`` event (the moment the job finished, for the duplicate checks);
- ``CHAOS_MIDWRITE="<path in the sweep dir>|<n>|<where>|<fraction>"``: at the ``n``-th
  atomic write of that file in this process, SIGKILL the sweep's whole process group:
  ``where=tmp`` with the temporary file cut to ``fraction`` of its bytes and not renamed
  (what a kill in the middle of the write leaves), ``where=renamed`` right after the
  rename (before whatever the writer does next, e.g. deleting the job's checkpoint once
  its result is recorded). A ``chaos-kill`` event is logged first.

Nothing here changes what rlsweep writes or when: it only decides when the processes die.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

_EXEC_LOG = os.environ.get("CHAOS_EXEC_LOG", "")
_RUN = os.environ.get("CHAOS_RUN", "")


def _log(event: str, **fields: Any) -> None:
    if not _EXEC_LOG:
        return
    line = {"event": event, "pid": os.getpid(), "run": _RUN, "t": time.time_ns(), **fields}
    fd = os.open(_EXEC_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def _kill_group(target: str, where: str) -> None:
    _log("chaos-kill", target=target, where=where)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _install(sweep_dir: str) -> None:
    root = os.path.realpath(sweep_dir) + os.sep
    target, nth, where, fraction = "", 0, "tmp", 0.5
    spec = os.environ.get("CHAOS_MIDWRITE", "")
    if spec:
        parts = spec.split("|")
        target, nth, where, fraction = parts[0], int(parts[1]), parts[2], float(parts[3])
    seen = 0
    original = os.replace

    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        nonlocal seen
        if kwargs:
            original(src, dst, **kwargs)
            return
        path = os.path.realpath(os.fsdecode(dst))
        rel = path[len(root) :] if path.startswith(root) else None
        hit = False
        if rel is not None and rel == target:
            seen += 1
            hit = seen == nth
        if hit and where == "tmp":
            size = os.path.getsize(src)
            os.truncate(src, int(size * fraction))
            _kill_group(target, where)
        original(src, dst)
        if rel is not None and rel.endswith(os.sep + "result.json"):
            _log("recorded", job=rel.split(os.sep)[0])
        if hit:
            _kill_group(target, where)

    os.replace = replace


if os.environ.get("CHAOS_SWEEP_DIR"):
    _install(os.environ["CHAOS_SWEEP_DIR"])
