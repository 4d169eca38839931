"""What a tracker is: the job facts it is given, the settings it is configured with, and
the four calls it answers.

A tracker backend is a module in :mod:`rlsweep.trackers` with ``Settings`` (a dataclass,
one comment per field; the fields of ``hydra.launcher.trackers.<name>``) and
``start(settings, info, resume) -> Tracker``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

# The trackers rlsweep ships, by the name that turns each on.
TRACKER_NAMES = ("tensorboard", "wandb", "mlflow")
# In a job's directory: what each tracker was sent (for resume) and its run's id.
STATE_FILE = ".trackers.json"


@dataclass(frozen=True)
class JobInfo:
    """What a tracker knows of the job it records."""

    # The job's directory (its results, metrics.csv, and TensorBoard's event files).
    directory: Path
    # The job's name: its directory's name (its overrides, e.g. ``agent=ppo,seed=3``).
    name: str
    # The sweep's directory (the job directory's parent in a sweep; itself for one run).
    sweep_dir: Path
    # The sweep's name: its directory's name.
    sweep: str
    # What compares: the agent's name for rlsweep's own jobs, else the app's name.
    agent: str
    # The job's replicate index (its ``seed`` key).
    replicate: int
    # The job's identity digest, and the root of its seeds.
    digest: str
    root: int | None
    # The job's config values (for a tracker's run parameters), without ``hydra``.
    config: Mapping[str, Any] = field(default_factory=dict)
    # Named seeds the job recorded (seeds.json), flattened: ``train_envs.0`` -> seed.
    seeds: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Resume:
    """What earlier attempts of the job left in a tracker when it is opened."""

    # The run to continue: the job resumed from a checkpoint (None: start a new run).
    run_id: str | None
    # The first step this attempt logs. Earlier attempts may have logged steps from here
    # on, which this attempt computes again (bit for bit).
    from_step: int
    # The last step earlier attempts recorded as sent to the run being continued (None:
    # none), in .trackers.json: used only when the tracker cannot say what its run holds.
    sent_until: int | None = None
    # An earlier attempt's run that this fresh start replaces (the job started over).
    replaced_run: str | None = None
    # Whether any earlier attempt of this job logged to this tracker.
    earlier: bool = False


class Tracker(Protocol):
    """One job's run in one tracker."""

    # The run's id in the tracker (kept for the job's later attempts).
    run_id: str

    def held_until(self) -> int | None:
        """The last step the run holds, read where the tracker keeps it (None: no row). A
        continued run holds what earlier attempts' rows reached, which a killed machine can
        leave short of what they sent (a service's unwritten buffer) or past what they
        recorded as sent (killed in between): rlsweep sends the rows after it, and only
        those."""
        ...

    def log(self, step: int, values: Mapping[str, float]) -> None:
        """Record one row of metrics at ``step``, visible in the tracker at once."""
        ...

    def close(self, failed: bool) -> None:
        """End the run (``failed``: the job raised). When it returns, every row is written
        where the tracker keeps it (a reader finds them all), or it raises."""
        ...
