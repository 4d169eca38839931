"""A job's thread count: torch's and the BLAS libraries', for the job and nothing else.

A job's numbers can depend on how many threads its reductions split across, so the count
is the job's own setting (``Keys.threads``), never derived from the worker count.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from types import ModuleType

import threadpoolctl

# The BLAS/OpenMP libraries' thread-count variables (read when they load).
THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore them."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def loaded(name: str) -> ModuleType | None:
    """The module ``name`` if this process imports it, else None. Under the threading
    backend another job's thread may be importing it right now (its module partly
    initialised until then): importing it here waits for that import to finish."""
    return importlib.import_module(name) if name in sys.modules else None


# The BLAS libraries this process has loaded, found by threadpoolctl (a scan of the loaded
# shared libraries, far costlier than using what it found), with the number of Python
# modules loaded when it looked: found again only after an import (libraries loaded during
# a job also read its environment variables, set by job_threads).
_blas: tuple[int, threadpoolctl.ThreadpoolController] | None = None


def _blas_libraries() -> threadpoolctl.ThreadpoolController:
    global _blas
    modules = len(sys.modules)
    if _blas is None or _blas[0] != modules:
        _blas = (modules, threadpoolctl.ThreadpoolController().select(user_api="blas"))
    return _blas[1]


def limit_blas(threads: int) -> None:
    """Limit the BLAS libraries this process has loaded (numpy's OpenBLAS) to ``threads``
    threads, from now on.

    OpenBLAS's limit is process-wide, so it is not restored after the job: under the
    threading backend, a job restoring it on exit would change it under the jobs still
    running. Jobs that run side by side in one process need the same ``threads`` (the
    launcher's default). threadpoolctl (>= 3.8, as required) lets only the thread that set
    OpenBLAS's limit first set it again and silently ignores the others, so each job takes
    that right before it sets the limit (from any thread that holds it, even one inside
    threadpoolctl's own ``with threadpool_limits``) and hands it back after: a job in any
    thread gets its count.
    """
    openblas = threadpoolctl.OpenBLASController
    openblas.clear_controlling_thread(force=True)  # from whichever thread holds the right
    _blas_libraries().limit(limits=threads)
    openblas.clear_controlling_thread()


@contextlib.contextmanager
def job_threads(threads: int) -> Iterator[None]:
    """torch and BLAS use ``threads`` threads for the block (torch's count and the
    environment variables are restored after it; the BLAS limit is left, see
    :func:`limit_blas`).

    The BLAS libraries already loaded (numpy's OpenBLAS: the environment variables only
    reach a library when it loads) are limited through threadpoolctl. This is about the
    numbers, not only speed: OpenBLAS's products round differently with 1 and 2 threads
    (a 256x64 @ 64x64 float32 product does), and PPO's and A2C's updates are numpy products.
    """
    torch = loaded("torch")  # only if the app uses torch: importing it costs seconds
    saved_torch = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(threads)
    try:
        limit_blas(threads)
        with environment({k: str(threads) for k in THREAD_ENV_VARS}):
            yield
    finally:
        if torch is not None and saved_torch is not None:
            torch.set_num_threads(saved_torch)
