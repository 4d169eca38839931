"""Which jobs of a sweep run: every job whose directory holds no result of the same job
runs (``rerun`` chooses among failed and completed ones); a result computed for other
settings is never taken for a job's, and a sweep over what configures the sweep as a whole
is refused."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.override_parser.types import Override
from hydra.core.utils import JobReturn
from omegaconf import DictConfig, OmegaConf

from rlsweep.choices import choices_in
from rlsweep.errors import ConfigError
from rlsweep.identity import Identity
from rlsweep.launch.jobs import completed_return
from rlsweep.store import (
    RERUN_MODES,
    clear_for_rerun,
    iter_job_dirs,
    job_status,
    recorded_lookup_digest,
    remove_leftovers,
    should_run,
)
from rlsweep.task_api import TaskHooks

# Overrides that configure the launcher or sweeper themselves.
_HYDRA_SWEEP_PREFIXES = ("hydra.launcher", "hydra/launcher", "hydra.sweeper", "hydra/sweeper")
# ``${key}`` in a config string (resolver arguments included): the keys it reads.
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.]*)\}")


def sweep_level_keys(config: DictConfig) -> set[str]:
    """The app's keys the sweep as a whole reads: those that ``hydra.launcher``,
    ``hydra.sweeper`` and ``hydra.sweep.dir`` interpolate (e.g. ``n_jobs``, ``name``)."""
    texts: list[str] = []
    for path in ("hydra.launcher", "hydra.sweeper", "hydra.sweep"):
        node = OmegaConf.select(config, path)
        if node is not None:
            texts.append(json.dumps(OmegaConf.to_container(node, resolve=False), default=str))
    keys = {m for text in texts for m in _INTERPOLATION.findall(text)}
    return {k for k in keys if not k.startswith("hydra.")}


def refuse_sweep_level_sweeps(
    overrides: Sequence[Override],
    config: DictConfig,
    launchers: Mapping[tuple[str, ...], str],
) -> None:
    """Refuse sweeping what configures the sweep as a whole: Hydra would silently run every
    job with one value. ``launchers``: the launcher and sweeper settings of each set of
    config-group choices the sweep composes (a group whose choice changes them is refused)."""
    keys = sweep_level_keys(config) | launcher_groups(launchers)
    for o in overrides:
        key = o.key_or_group
        if o.is_sweep_override() and (key in keys or key.startswith(_HYDRA_SWEEP_PREFIXES)):
            raise ConfigError(
                f"Sweeping over '{key}' ({o.input_line}) is not supported: a sweep runs with "
                "one launcher, and Hydra would silently run every job with the first value. "
                f"Run one sweep per value instead, e.g. '{key}={next(o.sweep_string_iterator())}'."
            )


def varying_keys(overrides: Sequence[Override], hooks: TaskHooks, replicates: bool) -> list[str]:
    """The keys a sweep varies, which name its jobs: those the command line (or
    ``hydra.sweeper.params``) sweeps, plus the replicate key when the sweep chooses the
    replicates itself (``replicates``: a search or a comparison)."""
    keys = {o.key_or_group for o in overrides if o.is_sweep_override()}
    if replicates and hooks.keys.replicate is not None:
        keys.add(hooks.keys.replicate)
    return sorted(keys)


def launcher_groups(launchers: Mapping[tuple[str, ...], str]) -> set[str]:
    """The config groups whose choice alone changes the launcher's settings."""
    groups = set()
    for choices, settings in launchers.items():
        for i, choice in enumerate(choices):
            rest = choices[:i] + choices[i + 1 :]
            for other, other_settings in launchers.items():
                if (
                    len(other) == len(choices)
                    and other[:i] + other[i + 1 :] == rest
                    and other_settings != settings
                ):
                    groups.add(choice.split("=", 1)[0])
    return groups


def check_rerun(rerun: str) -> None:
    """``hydra.sweeper.rerun`` is one of the modes, or a ConfigError says which there are."""
    if rerun not in RERUN_MODES:
        raise ConfigError(
            f"rerun (hydra.sweeper.rerun)={rerun!r} is not allowed; choose one of "
            f"{', '.join(RERUN_MODES)}: missing runs every job without result.json, "
            "failed only the jobs that failed, all every job from scratch."
        )


def holds_jobs(sweep_dir: Path) -> bool:
    """Whether the sweep directory has any sub-directory (a job's, from an earlier run)."""
    try:
        return any(entry.is_dir() for entry in sweep_dir.iterdir())
    except OSError:
        return False


@dataclass
class Plan:
    """Each batch's jobs to run (with the batch's first index) and the completed jobs
    skipped."""

    batches: list[tuple[int, list[list[str]]]] = field(default_factory=list)
    skipped: list[JobReturn] = field(default_factory=list)

    @property
    def running(self) -> int:
        return sum(len(jobs) for _, jobs in self.batches)


@dataclass
class Planner:
    """Decides, job by job, from its directory: run it, or skip it as done."""

    sweep_dir: Path
    rerun: str
    # A job's directory and identity, by its overrides (None: a launcher that cannot say,
    # so every job runs).
    prepared: Callable[[list[str]], tuple[Path, Identity]] | None
    # Whether a completed job's result is a record rlsweep can compare.
    is_record: Callable[[JobReturn], bool]
    # What changed between a completed job's result and the job now (None: nothing).
    changed: Callable[[list[str], Identity, JobReturn], str | None]
    # Files left by killed runs, removed while planning.
    removed: int = 0
    # Say nothing while planning (a search plans job by job: SweepRun says it once, at
    # the end, with say_removed).
    quiet: bool = False
    # Whether the sweep directory's own leftovers were removed: once, by the first plan,
    # before any job runs (a search plans again while its jobs write there).
    cleaned: bool = False
    # The lookup digest a job directory's config gives (None: cannot say); finds a job an
    # earlier run named otherwise (see adopt).
    identify_dir: Callable[[Path], str | None] | None = None
    # Job directories of the sweep by identity digest, read once when first needed.
    _by_identity: dict[str, Path] | None = None
    # Directories of this sweep's jobs planned so far (never adopted by another job).
    _claimed: set[Path] = field(default_factory=set)
    # Jobs found under another name and moved to their name now.
    adopted: int = 0
    # How this app's command line asks for every job again (rerun=all for the built-in app,
    # whose YAML aliases the sweeper's setting; hydra.sweeper.rerun=all for any app).
    rerun_all: str = "hydra.sweeper.rerun=all"
    # Whether a completed job ran other code than its identity has now (the code part of
    # it: hydra.launcher.identity.code): it runs again, from scratch (None: never).
    stale: Callable[[Identity, JobReturn], bool] | None = None
    # Completed jobs run again as stale, from scratch.
    _fresh: set[Path] = field(default_factory=set)

    def plan(self, batches: list[list[list[str]]]) -> Plan:
        plan = Plan()
        changed: list[tuple[list[str], str]] = []  # completed jobs whose settings changed
        to_clear: list[Path] = []  # failed or killed jobs that run again
        check = self.prepared is not None and holds_jobs(self.sweep_dir)
        if not self.cleaned:
            self.removed += len(remove_leftovers(self.sweep_dir, finished=False))
            self.cleaned = True
        start = 0
        for batch in batches:
            to_run = [o for o in batch if not check or self._runs(o, plan, changed, to_clear)]
            plan.batches.append((start, to_run))
            start += len(batch)
        if changed:  # refused before any earlier result is touched
            raise ConfigError(
                changed_message(self.sweep_dir, changed, len(plan.skipped), self.rerun_all)
            )
        for directory in to_clear:
            clear_for_rerun(directory, fresh=self.rerun == "all" or directory in self._fresh)
        self._say(plan, start)
        return plan

    def _runs(
        self,
        overrides: list[str],
        plan: Plan,
        changed: list[tuple[list[str], str]],
        to_clear: list[Path],
    ) -> bool:
        assert self.prepared is not None
        directory, identity = self.prepared(overrides)
        self._claimed.add(directory)
        status = job_status(directory)
        if status == "missing":
            status = self.adopt(directory, identity)
        done = completed_return(overrides, directory) if status == "completed" else None
        if status == "completed" and (done is None or not self.is_record(done)):
            status = "incomplete"  # a result.json rlsweep did not write
        if (
            status == "completed"
            and done is not None
            and self.rerun != "failed"
            and self.stale is not None
            and self.stale(identity, done)
        ):
            status = "stale"  # runs again, as a new job would
            self._fresh.add(directory)
        # Whatever runs or is skipped, nothing a killed process left stays behind.
        self.removed += len(remove_leftovers(directory, finished=status == "completed"))
        if should_run(status, self.rerun):
            if status != "missing":
                to_clear.append(directory)
            return True
        if status == "completed" and done is not None:
            what = self.changed(overrides, identity, done)
            if what is not None:
                changed.append((overrides, what))
            plan.skipped.append(done)
        return False

    def adopt(self, directory: Path, identity: Identity) -> str:
        """A job an earlier run of this sweep ran under another name (its directory is named
        by the keys the sweep varied then): its directory is moved to the job's name now, so
        that what it did counts. Identity, not the name, decides what a job is. Returns the
        job's status after the move (``missing``: none found)."""
        index = self._index(legacy=bool(choices_in(identity.config)))
        found = index.get(identity.lookup_digest)
        if found is None or found in self._claimed or not found.is_dir():
            return "missing"
        found.rename(directory)
        for digest in [d for d, path in index.items() if path == found]:
            del index[digest]
        self.adopted += 1
        return job_status(directory)

    def _index(self, *, legacy: bool) -> dict[str, Path]:
        """The sweep's job directories by lookup digest: their result's, else their config's
        (``legacy``: the config's too, for results an older rlsweep recorded without
        choices, whose digest has none)."""
        if self._by_identity is None:
            self._by_identity = {}
            for job_dir in iter_job_dirs(self.sweep_dir):
                digests = [recorded_lookup_digest(job_dir)]
                if self.identify_dir is not None and (digests[0] is None or legacy):
                    digests.append(self.identify_dir(job_dir))
                for digest in {d for d in digests if d is not None}:
                    # A completed directory wins over another attempt at the same job.
                    kept = self._by_identity.get(digest)
                    if kept is None or job_status(kept) != "completed":
                        self._by_identity[digest] = job_dir
        return self._by_identity

    def say_removed(self) -> None:
        """Say how many files killed runs left, if any were removed."""
        if self.removed:
            print(
                f"[rlsweep] removed {self.removed} file(s) that killed runs left in "
                f"{self.sweep_dir} (writes cut short, checkpoints of finished jobs)",
                file=sys.stderr,
                flush=True,
            )

    def _say(self, plan: Plan, total: int) -> None:
        if self.quiet:
            return
        self.say_removed()
        running = plan.running
        if running == total and not self._fresh:
            return
        left = total - running - len(plan.skipped)
        moved = f"; {self.adopted} found under their earlier names, renamed" if self.adopted else ""
        if self._fresh:
            moved += (
                f"; {len(self._fresh)} completed job(s) ran other code than the app's now and "
                "run again (hydra.launcher.identity.code=true)"
            )
        print(
            f"[rlsweep] resuming {self.sweep_dir}: {len(plan.skipped)} of {total} jobs already "
            f"complete (skipped), {running} to run"
            + (f", {left} left alone by rerun={self.rerun}" if left else "")
            + f"{moved}. Use {self.rerun_all} to run everything again.",
            file=sys.stderr,
            flush=True,
        )


def changed_message(
    sweep_dir: Path, changed: list[tuple[list[str], str]], completed: int, rerun_all: str
) -> str:
    overrides, what = changed[0]
    new_dir = "name=<new name>" if rerun_all == "rerun=all" else f"hydra.sweep.dir={sweep_dir}_2"
    return (
        f"{len(changed)} of the {completed} completed jobs in {sweep_dir} were computed with "
        f"other settings than this command gives them now, e.g. {' '.join(overrides)}: "
        f"{what}. (A config file changed since they ran?) Skipping them would mix old and "
        f"new results. Nothing was run: add {rerun_all} to the command to run every job "
        f"again with the current settings, or {new_dir} for a separate sweep."
    )
