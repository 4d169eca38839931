"""A job's thread count reaches numpy's BLAS, from whichever thread the job runs in.

OpenBLAS's products round differently with 1 and 2 threads, and PPO's and A2C's updates
are numpy products: a job's BLAS thread count is part of its numbers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import threadpoolctl

from rlsweep.threads import job_threads, limit_blas


def blas_threads() -> set[int]:
    return {
        int(info["num_threads"])
        for info in threadpoolctl.threadpool_info()
        if info["user_api"] == "blas"
    }


@pytest.fixture(autouse=True)
def restore_blas_threads() -> Iterator[None]:
    """Each loaded BLAS library's own count put back after the test. They may differ: a job
    run earlier in this process left its limit on the libraries loaded then (by design, see
    limit_blas), and one loaded since (scipy's own OpenBLAS, by a test importing scipy)
    starts at its default."""
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy's BLAS is loaded
    blas = threadpoolctl.ThreadpoolController().select(user_api="blas").lib_controllers
    before = [(library, library.num_threads) for library in blas]
    yield
    openblas = threadpoolctl.OpenBLASController
    openblas.clear_controlling_thread(force=True)  # the right to set it, from any thread
    for library, threads in before:
        library.set_num_threads(threads)
    openblas.clear_controlling_thread()


def in_thread(target: Callable[[], None]) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(20)
    if errors:
        raise errors[0]


def test_a_job_sets_numpys_blas_threads_in_any_thread() -> None:
    """A job in another thread sets the limit after one in this thread did, and the other
    way round (threadpoolctl ignores a thread that did not set it first unless the first
    hands it back), and each job runs with its own count."""
    seen: list[set[int]] = []

    def job(threads: int) -> None:
        with job_threads(threads):
            seen.append(blas_threads())
            a = np.ones((256, 64), dtype=np.float32)
            a @ a.T  # a product large enough for OpenBLAS to use its threads

    job(2)
    in_thread(lambda: job(1))
    job(2)
    in_thread(lambda: job(1))
    assert seen == [{2}, {1}, {2}, {1}]


def test_overlapping_jobs_keep_the_limit_when_the_first_ends() -> None:
    """Under the threading backend: the first job to end must not put back the limit from
    before it under a job still running."""
    limit_blas(2)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[set[int]] = []

    def first() -> None:
        with job_threads(1):
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with job_threads(1):
            second_in.set()
            first_out.wait(10)
            seen.append(blas_threads())  # the first job has ended; this one runs on

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == [{1}]


def test_a_limit_held_by_another_thread_does_not_stop_a_job_setting_its_own() -> None:
    """A thread inside threadpoolctl's own ``with threadpool_limits`` holds OpenBLAS's
    limit (threadpoolctl ignores other threads' limits meanwhile); a job elsewhere still
    runs with its own count, not silently with the holder's."""
    holding, done = threading.Event(), threading.Event()
    seen: list[set[int]] = []

    def holder() -> None:
        with threadpoolctl.threadpool_limits(2, user_api="blas"):
            holding.set()
            done.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        holding.wait(10)
        with job_threads(1):
            seen.append(blas_threads())
    finally:
        done.set()
        thread.join(20)
    assert seen == [{1}]
