"""The one interface every executor implements."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from hydra.core.utils import JobReturn

    from rlsweep.launch.jobs import LaunchContext, SweepJob
    from rlsweep.launch.options import LauncherOptions
    from rlsweep.progress import Progress

# A streaming launch's callback: a job ended for good (after its retries; failed, timed out
# and crashed jobs included) with this JobReturn; the checked jobs to run now (maybe none).
More = Callable[["SweepJob", "JobReturn"], "list[SweepJob]"]


class Runner(Protocol):
    """Run a batch of checked jobs: one ``JobReturn`` per job, failed jobs included (a
    failing job never stops the others).

    With ``more``, the launch streams: the executor calls it once per job, in the sweep's
    own thread, as soon as the job has its final JobReturn, and runs the jobs it returns
    as soon as a worker is free (no barrier between the first jobs and the released ones).
    The launch ends when no job runs or waits and ``more`` released nothing more. The
    returns are the first jobs' in their order, then the released jobs' in release order.
    """

    def __call__(
        self,
        context: LaunchContext,
        options: LauncherOptions,
        jobs: list[SweepJob],
        progress: Progress,
        more: More | None = None,
    ) -> list[JobReturn]: ...
