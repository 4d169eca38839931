"""The one interface every executor implements."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from hydra.core.utils import JobReturn

    from rlsweep.launch.jobs import Job, LaunchContext
    from rlsweep.launch.options import LauncherOptions
    from rlsweep.progress import Progress


class Runner(Protocol):
    """Run a batch of checked jobs: one ``JobReturn`` per job, in the jobs' order, failed
    jobs included (a failing job never stops the others)."""

    def __call__(
        self,
        context: LaunchContext,
        options: LauncherOptions,
        jobs: list[Job],
        progress: Progress,
    ) -> list[JobReturn]: ...
