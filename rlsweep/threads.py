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


@contextlib.contextmanager
def job_threads(threads: int) -> Iterator[None]:
    """torch and BLAS use ``threads`` threads for the block (then restored)."""
    torch = loaded("torch")  # only if the app uses torch: importing it costs seconds
    saved_torch = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(threads)
    try:
        with environment({k: str(threads) for k in THREAD_ENV_VARS}):
            yield
    finally:
        if torch is not None and saved_torch is not None:
            torch.set_num_threads(saved_torch)
