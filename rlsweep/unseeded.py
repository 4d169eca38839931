"""Randomness an app leaves unseeded, drawn from the job's identity streams instead of fresh
OS entropy: the same numbers on every run of a job, distinct numbers per replicate.

A published app often seeds nothing, or not everything: a gymnasium env reset without a
seed, an action space sampled before anyone seeded it, ``np.random.default_rng()``. Each of
those draws a fresh seed from the OS, so the same job gives other numbers on every run.
While a job runs, rlsweep answers such requests itself:

- ``gymnasium.utils.seeding.np_random(None)`` (every env's and space's generator made
  without a seed) and ``numpy.random.default_rng(None)`` (or with no argument) return a
  generator on the job's stream ``unseeded.<source>``, index k for the k-th request of that
  source in the process. A request *with* a seed is passed through untouched, so an app
  that seeds its sources gets exactly its own numbers.
- Sub-processes never share a stream. A child forked by the job (``multiprocessing``'s
  ``fork``, an async vector env's workers) takes its own streams, keyed by its fork number
  in the job (the n-th fork of the job's process, then of the child's, ...): deterministic
  when the app forks in a deterministic order, and never the parent's or a sibling's. A
  child started fresh (``spawn``, ``forkserver``) does not run this code: its unseeded
  sources draw fresh entropy, and the job's log says so.

Nothing else is touched: an app's own generators made with a seed, torch's generators
(seeded with the job's torch seed by :mod:`rlsweep.seeding`), ``random.Random()`` instances
(the standard library's temporary file names use them).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from rlsweep.seeding import Seeds

log = logging.getLogger(__name__)

# The sources rlsweep seeds, by the module and function that make their generators.
GYMNASIUM = ("gymnasium.utils.seeding", "np_random")
NUMPY = ("numpy.random", "default_rng")


@dataclass
class Streams:
    """The unseeded sources' streams of one job, in one process of the job."""

    seeds: Seeds
    # Fork numbers from the job's process to this one (() in the job's own process).
    fork_path: tuple[int, ...] = ()
    # Requests so far per source, in this process.
    counts: dict[str, int] = field(default_factory=dict)
    # Forks this process made so far.
    forks: int = 0
    # Sub-processes started fresh (spawn / forkserver): they draw fresh entropy.
    fresh_children: int = 0

    def sequence(self, source: str) -> np.random.SeedSequence:
        """The next stream of ``source`` in this process."""
        k = self.counts.get(source, 0)
        self.counts[source] = k + 1
        where = ".".join(str(n) for n in self.fork_path)
        purpose = f"unseeded.{source}" + (f"@{where}" if where else "")
        return self.seeds.sequence(purpose, k, shared=source == "gymnasium")

    def record(self) -> dict[str, Any]:
        """What the job's seeds.json says of its unseeded sources."""
        return {
            "requests": dict(sorted(self.counts.items())),
            "forks": self.forks,
            "fresh_subprocesses": self.fresh_children,
        }


_active: ContextVar[Streams | None] = ContextVar("rlsweep_unseeded", default=None)


def _gymnasium_np_random(original: Callable[..., Any]) -> Callable[..., Any]:
    def np_random(seed: int | None = None) -> tuple[np.random.Generator, Any]:
        streams = _active.get()
        if seed is not None or streams is None:
            return original(seed)
        sequence = streams.sequence("gymnasium")
        return np.random.Generator(np.random.PCG64(sequence)), sequence.entropy

    np_random.__wrapped__ = original  # type: ignore[attr-defined]
    return np_random


def _numpy_default_rng(original: Callable[..., Any]) -> Callable[..., Any]:
    def default_rng(seed: Any = None) -> np.random.Generator:
        streams = _active.get()
        if seed is not None or streams is None:
            return original(seed)
        return original(streams.sequence("numpy"))

    default_rng.__wrapped__ = original  # type: ignore[attr-defined]
    return default_rng


_WRAPPERS: dict[tuple[str, str], Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    GYMNASIUM: _gymnasium_np_random,
    NUMPY: _numpy_default_rng,
}
_lock = threading.Lock()
_hook_installed = False


def _patch(module: ModuleType, name: str) -> None:
    """Put the wrapper of ``module.name`` in place, once (it defers to the original outside
    a job, so it stays for the process's life: threads of several jobs share it)."""
    current = getattr(module, name, None)
    if current is None or hasattr(current, "__wrapped__"):
        return
    setattr(module, name, _WRAPPERS[(module.__name__, name)](current))


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches a source's module when it is first imported (the app may import gymnasium
    inside its task, after the job started)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        names = [name for module, name in _WRAPPERS if module == fullname]
        if not names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Patching(spec.loader, names)
                return spec
        return None


class _Patching(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, names: list[str]) -> None:
        self.loader, self.names = loader, names

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        for name in self.names:
            _patch(module, name)


def _install() -> None:
    """Patch the sources imported already and the others when they are imported; count
    forks (once per process)."""
    global _hook_installed
    with _lock:
        for module_name, name in _WRAPPERS:
            module = sys.modules.get(module_name)
            if module is not None:
                _patch(module, name)
        if _hook_installed:
            return
        sys.meta_path.insert(0, _PatchOnImport())
        os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
        _watch_fresh_processes()
        _hook_installed = True


def _before_fork() -> None:
    streams = _active.get()
    if streams is not None:
        streams.forks += 1


def _after_fork_in_child() -> None:
    streams = _active.get()
    if streams is not None:  # the forking thread's job: this child continues its streams
        streams.fork_path = (*streams.fork_path, streams.forks)
        streams.counts = {}
        streams.forks = 0


def _watch_fresh_processes() -> None:
    """Say in the job's log when it starts a sub-process that cannot take its own streams
    (multiprocessing's spawn or forkserver): its unseeded sources draw fresh entropy."""
    import multiprocessing
    import multiprocessing.process as mp_process

    start = mp_process.BaseProcess.start

    def watched_start(self: Any) -> None:
        streams = _active.get()
        method = getattr(self, "_start_method", None) or multiprocessing.get_start_method(
            allow_none=True
        )
        if streams is not None and method in ("spawn", "forkserver"):
            streams.fresh_children += 1
            if streams.fresh_children == 1:
                log.warning(
                    f"this job starts sub-processes with multiprocessing's {method!r} start "
                    "method: rlsweep cannot give them streams of their own, so randomness "
                    "they leave unseeded (a gymnasium env reset without a seed, "
                    "np.random.default_rng()) draws fresh OS entropy, and the job's numbers "
                    "may differ run to run. Seed those sources (rlsweep.current().seeds), or "
                    "use the 'fork' start method."
                )
        start(self)

    mp_process.BaseProcess.start = watched_start  # type: ignore[method-assign]


@contextlib.contextmanager
def job_streams(seeds: Seeds) -> Iterator[Streams]:
    """While the block runs (a job's task), unseeded sources draw from ``seeds``."""
    _install()
    streams = Streams(seeds)
    token = _active.set(streams)
    try:
        yield streams
    finally:
        _active.reset(token)
