"""Any Hydra app's task function as an rlsweep job: the public API for user code.

```python
import hydra
import rlsweep

@hydra.main(config_path="conf", config_name="config", version_base="1.3")
@rlsweep.task(keys=rlsweep.Keys(agent=("algo", "lr"), ignore=("tag",)))
def main(cfg) -> dict[str, float]:
    job = rlsweep.current()
    env.reset(seed=job.seeds.seeds("env", n_envs, shared=True))
    rng = job.seeds.generator("minibatches")
    ...
    job.log(step, episode_return=ret)  # metrics.csv
    return {"return": final_return}    # result.json
```

Around the task function, every job (run alone, or by any launcher) then:

1. computes its :class:`~rlsweep.identity.Identity` from its config values;
2. runs with the job's own thread count (torch, BLAS) and seeds Python's ``random``,
   numpy's global state and torch from its own streams, so the app's global draws are the
   same in any worker, after any other job (not under ``backend=threading``, where jobs
   running at once share those generators: draw from ``current().seeds`` there);
3. makes :func:`current` return the job (its seeds, directory and metrics log);
4. records what the task returns (a number or a dict of numbers) in ``result.json``,
   written last and atomically with the job's identity: the job is done iff it exists,
   and a result counts only for the job it was computed for.

rlsweep's launcher wraps an undecorated task function the same way, so an app that imports
nothing from rlsweep gets 1, 2 and 4.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import logging
import os
import pickle
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast, overload

import cloudpickle
from omegaconf import DictConfig, OmegaConf

from rlsweep import numerics, results, trust
from rlsweep.app_seeds import replicate_seed, write_seeds
from rlsweep.checkpoint import stop_requested
from rlsweep.choices import installed_choices
from rlsweep.code import code_fingerprint, packages
from rlsweep.errors import ConfigError
from rlsweep.gpus import gpus_text, job_gpus
from rlsweep.identity import (
    Identity,
    Keys,
    hydra_ignored_keys,
    identity_of,
    key_settings,
    task_config,
)
from rlsweep.outside_logs import keeping_app_logs
from rlsweep.seeding import Seeds, capture_global_rngs, restore_global_rngs, seed_global_rngs
from rlsweep.store import (
    CHECKPOINT_FILE,
    METRICS_FILE,
    PACKAGES_FILE,
    LinkRefused,
    atomic_write_json,
    atomic_write_text,
    open_no_follow,
)
from rlsweep.threads import job_threads
from rlsweep.trackers.feed import Feed
from rlsweep.trackers.opening import open_trackers
from rlsweep.unseeded import job_streams

log = logging.getLogger(__name__)

HOOKS_ATTR = "__rlsweep_task__"
FORMAT = 1  # of a Job checkpoint

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class TaskHooks:
    """What an app declares through :func:`task` (all optional)."""

    # Which config keys are the replicate, the root, agent-side, ignored, the threads.
    keys: Keys = field(default_factory=Keys)
    # The job's identity from its config, instead of the rule that ``keys`` gives.
    identity: Callable[[DictConfig], Identity] | None = None
    # Called in the sweep's process on every job's config before any job starts; raises
    # (rlsweep.ConfigError for a message without a traceback) to refuse the sweep.
    validate: Callable[[DictConfig], None] | None = None
    # Called on resume for a completed job whose recorded identity differs from its
    # identity now: returns what changed (the sweep is refused), or None (it is the same).
    changed_since: Callable[[DictConfig, dict[str, Any]], str | None] | None = None
    # Called after the sweep's last job, failures or not, with the sweep directory;
    # None writes the summary of every job (rlsweep.summary).
    on_sweep_end: Callable[[Path], None] | None = None
    # ``hydra.launcher.numerics``: the kernels the jobs run, part of each job's identity.
    numerics: str = "native"
    # The digest of the app's code (rlsweep.code) when ``keys.code``: part of each identity.
    code: str | None = None

    def configured(self, hydra_cfg: Any, function: Callable[..., Any] | None = None) -> TaskHooks:
        """These declarations with the keys named in ``hydra.launcher.identity`` (YAML or
        the command line) in their place, the launcher's ``numerics``, and, when the code is
        part of a job, the digest of ``function``'s app; ``hydra_cfg``: the config's
        ``hydra`` node (None: as declared)."""
        if hydra_cfg is None:
            return self
        node = OmegaConf.select(hydra_cfg, "launcher.identity")
        keys = self.keys if node is None else key_settings(node).apply(self.keys)
        setting = numerics.check_setting(OmegaConf.select(hydra_cfg, "launcher.numerics"))
        code = str(code_fingerprint(function)["digest"]) if keys.code else None
        if (keys, setting, code) == (self.keys, self.numerics, self.code):
            return self
        return dataclasses.replace(self, keys=keys, numerics=setting, code=code)

    def replicate_key(self, mode: str) -> str:
        """The replicate key, which ``mode`` (a search, a comparison) sets itself; a
        ConfigError when the task has none."""
        if self.keys.replicate is None:
            raise ConfigError(
                f"{mode} runs replicates, but the task has no replicate key: name it with "
                "hydra.launcher.identity.replicate=<key> (e.g. seed, or env.seed)."
            )
        return self.keys.replicate

    def identify(
        self,
        cfg: DictConfig,
        ignored: Sequence[str] | None = None,
        choices: Mapping[str, Any] | None = None,
    ) -> Identity:
        """The identity of the job whose config is ``cfg`` and whose config-group choices
        are ``choices`` (Hydra's ``runtime.choices``; None: those of the config Hydra has
        installed, as in a running job); ``ignored``: Hydra's ``exclude_keys`` (by default
        read from ``cfg`` or the installed Hydra config). A task's own ``identity`` rule
        decides alone (the built-in app's: its typed config, which its choices only fill)."""
        if self.identity is not None:
            identity = self.identity(cfg)
        else:
            ignored = hydra_ignored_keys(cfg) if ignored is None else ignored
            chosen = installed_choices() if choices is None else choices
            identity = identity_of(task_config(cfg), self.keys, ignored, chosen)
        return dataclasses.replace(identity, numerics=self.numerics, code=self.code)


@overload
def task(
    function: F,
    *,
    keys: Keys | None = None,
    identity: Callable[[DictConfig], Identity] | None = None,
    validate: Callable[[DictConfig], None] | None = None,
    changed_since: Callable[[DictConfig, dict[str, Any]], str | None] | None = None,
    on_sweep_end: Callable[[Path], None] | None = None,
) -> F: ...


@overload
def task(
    function: None = None,
    *,
    keys: Keys | None = None,
    identity: Callable[[DictConfig], Identity] | None = None,
    validate: Callable[[DictConfig], None] | None = None,
    changed_since: Callable[[DictConfig, dict[str, Any]], str | None] | None = None,
    on_sweep_end: Callable[[Path], None] | None = None,
) -> Callable[[F], F]: ...


def task(
    function: F | None = None,
    *,
    keys: Keys | None = None,
    identity: Callable[[DictConfig], Identity] | None = None,
    validate: Callable[[DictConfig], None] | None = None,
    changed_since: Callable[[DictConfig, dict[str, Any]], str | None] | None = None,
    on_sweep_end: Callable[[Path], None] | None = None,
) -> F | Callable[[F], F]:
    """Make a Hydra task function an rlsweep job (see the module docstring).

    Use it under ``@hydra.main``, bare (``@rlsweep.task``) or with declarations
    (``@rlsweep.task(keys=...)``). Either way the decorated function keeps its type (its
    parameters and return type) for type checkers: the job returns what the function does.
    """
    hooks = TaskHooks(keys or Keys(), identity, validate, changed_since, on_sweep_end)

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(cfg: DictConfig) -> Any:
            return run_task(fn, hooks, cfg)

        setattr(wrapper, HOOKS_ATTR, hooks)
        return cast(F, wrapper)

    return decorate(function) if function is not None else decorate


def hooks_of(function: Callable[..., Any]) -> TaskHooks | None:
    """The declarations of a task function made with :func:`task` (None: undecorated)."""
    seen = 0
    fn: Any = function
    while fn is not None and seen < 16:
        hooks = getattr(fn, HOOKS_ATTR, None)
        if isinstance(hooks, TaskHooks):
            return hooks
        fn, seen = getattr(fn, "__wrapped__", None), seen + 1
    return None


def as_task(function: Callable[[DictConfig], Any]) -> Callable[[DictConfig], Any]:
    """``function`` as an rlsweep job: itself if made with :func:`task`, else wrapped."""
    if hooks_of(function) is not None:
        return function
    return task(function)


# ------------------------------------------------------------------------------- the job


class Job:
    """The running job, as user code sees it (:func:`current`)."""

    def __init__(self, identity: Identity, directory: Path, trackers: Feed | None = None) -> None:
        # What the job is (its config values, replicate, root...).
        self.identity = identity
        # The job's seeds for named purposes.
        self.seeds = Seeds(identity)
        # The job's directory: its outputs go here.
        self.directory = directory
        self._metrics: list[dict[str, Any]] = []
        self._columns: list[str] = []
        self._last_save = time.monotonic()
        # Steps (the last logged step) at which this job resumed from its checkpoint.
        self.resumed_at: list[int] = []
        # The trackers the job's config chose (rlsweep.trackers), fed every row.
        self._trackers = trackers
        # The GPUs rlsweep gave the job ({"devices": [...], "per_job": share}), or None.
        self.gpus = job_gpus()

    @property
    def replicate(self) -> int:
        return self.identity.replicate

    @property
    def checkpoint_path(self) -> Path:
        """Where the job keeps its checkpoint; deleted once its result is recorded."""
        return self.directory / CHECKPOINT_FILE

    def log(self, step: int, **values: float | int | None) -> None:
        """Append a row to the job's ``metrics.csv`` (written through at once) and send it
        to the job's trackers (``logger=...``). Integers stay integers; None is an empty
        cell (and is not sent)."""
        step, cells = int(step), {k: _cell(v) for k, v in values.items()}
        row = {"step": step, **cells}
        new = [k for k in row if k not in self._columns]
        if self._trackers is not None:
            self._trackers.send(step, cells)
        self._metrics.append(row)
        path = self.directory / METRICS_FILE
        fd = None
        if not new:  # appended to the file, never through a link planted at its path
            try:
                fd = open_no_follow(path, os.O_WRONLY | os.O_APPEND)
            except FileNotFoundError:
                fd = None
            except LinkRefused as exc:  # the link is replaced by the job's own file
                log.warning(f"{exc} The job writes its own {METRICS_FILE} in its place.")
        if fd is None:
            self._columns += new
            self._rewrite_metrics()
            return
        with os.fdopen(fd, "a", newline="", encoding="utf-8") as f:
            csv.DictWriter(f, self._columns).writerow(row)

    # -------------------------------------------------------------------- checkpoints

    def stop_requested(self) -> str | None:
        """Why the job was asked to stop (SLURM's USR2 before a time limit or on
        preemption), or None."""
        return stop_requested()

    def checkpoint(self, state: Any, *, every_s: float | None = None) -> None:
        """Call where the loop can resume from (between iterations) with everything the
        rest of the job depends on (networks, optimisers, envs, counters: anything
        cloudpickle can write). It is saved, atomically, when a stop was requested, and every
        ``every_s`` seconds if given, with the global RNGs and the metrics so far. After
        saving on a stop request it raises :class:`rlsweep.errors.Preempted`: the launcher
        requeues the job, whose :meth:`restore` then returns ``state``."""
        from rlsweep.errors import Preempted
        from rlsweep.store import atomic_open

        reason = self.stop_requested()
        due = every_s is not None and time.monotonic() - self._last_save >= every_s
        if not (reason or due):
            return
        payload = {
            "format": FORMAT,
            "identity": self.identity.digest,
            "state": state,
            "rngs": capture_global_rngs(),
            "metrics": self._metrics,
            "numerics": numerics.fingerprint(self.identity.numerics),
        }
        # cloudpickle: a vector env holds the lambdas that made its sub-envs. Signed with
        # the user's key for this job: restore() unpickles nothing else (rlsweep.trust).
        pickled = cloudpickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        signed = trust.sign(pickled, self.identity.digest)
        with atomic_open(self.checkpoint_path, "wb") as f:
            f.write(signed)
        self._last_save = time.monotonic()
        if reason:
            step = self._metrics[-1]["step"] if self._metrics else 0
            log.info(f"checkpointed at step {step:,d} and stopped ({reason})")
            raise Preempted(f"stopped ({reason}); resumes from {self.checkpoint_path}")

    def restore(self) -> Any | None:
        """The state this job last saved with :meth:`checkpoint` (a job resumed after a
        preemption, a time limit, a kill), or None to start fresh. The global RNGs and the
        metrics logged so far are put back as they were, so the resumed job computes
        exactly what an uninterrupted one does. A file not signed with the user's key for
        this job (another job's, planted, damaged) is not unpickled: the job starts fresh,
        and its log says why."""
        path = self.checkpoint_path
        if not path.is_file():
            return None
        payload = self._signed_payload(path)
        if payload is None:
            return None
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            log.warning(f"not resuming from {path.name}: not an rlsweep.Job checkpoint")
            return None
        if payload.get("identity") != self.identity.digest:
            log.warning(f"not resuming from {path.name}: it is another job's (other settings)")
            return None
        restore_global_rngs(payload["rngs"])
        self.restore_metrics(payload["metrics"])
        step = int(self._metrics[-1]["step"]) if self._metrics else 0
        self.resumed_at.append(step)
        log.info(f"resumed from {path.name} at step {step:,d}")
        numerics.say_resumed(payload.get("numerics"), self.identity.numerics)
        return payload["state"]

    def _signed_payload(self, path: Path) -> Any | None:
        """What ``path`` holds, unpickled only once its signature is checked; None (and
        the log says why) if it is not this job's, not signed by this user, or damaged."""
        why = "not resuming from {name}: {why}; starting from scratch"
        pickled, refused = trust.read_verified(
            path, self.identity.digest, "another job's (other settings)"
        )
        if pickled is None:
            log.warning(why.format(name=path.name, why=refused))
            return None
        try:
            return pickle.loads(pickled)
        except Exception as exc:  # signed, so ours: its code changed since? start over
            log.warning(why.format(name=path.name, why=f"unreadable ({exc!r})"))
            return None

    @property
    def metrics(self) -> list[dict[str, Any]]:
        """The rows logged so far (a checkpoint keeps them)."""
        return list(self._metrics)

    def restore_metrics(self, rows: list[dict[str, Any]]) -> None:
        """Start the metrics over from ``rows`` (those of a checkpoint being resumed)."""
        self._metrics = [dict(r) for r in rows]
        self._columns = list(dict.fromkeys(k for r in rows for k in r))
        self._rewrite_metrics()
        if self._trackers is not None:  # the trackers' runs may lack some of them
            self._trackers.restored(self._metrics)

    def _rewrite_metrics(self) -> None:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, self._columns or ["step"])
        writer.writeheader()
        writer.writerows(self._metrics)
        atomic_write_text(self.directory / METRICS_FILE, buf.getvalue())


def _cell(value: Any) -> float | int | None:
    """A metrics value as metrics.csv keeps it: an int (not a bool), a float, or None."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if hasattr(value, "item") and isinstance(value.item(), int):  # numpy / torch integers
        return int(value.item())
    return float(value)


_current: ContextVar[Job | None] = ContextVar("rlsweep_current_job", default=None)


def current() -> Job:
    """The job running in this process (or thread): inside a task made with :func:`task`,
    or any task run by rlsweep's launcher."""
    job = _current.get()
    if job is None:
        raise RuntimeError(
            "rlsweep.current() is called outside a job: decorate the task function with "
            "@rlsweep.task (under @hydra.main), or run it with rlsweep's launcher."
        )
    return job


def output_dir() -> Path:
    """The job's directory: Hydra's output dir when run by Hydra, else the cwd."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir)
    return Path.cwd()


def installed_hydra() -> Any:
    """The running job's ``hydra`` node as Hydra installed it (None outside Hydra)."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get() if HydraConfig.initialized() else None


def run_task(function: Callable[[DictConfig], Any], hooks: TaskHooks, cfg: DictConfig) -> Any:
    """Run one job of ``function`` (see the module docstring); return what it returns."""
    hooks = hooks.configured(installed_hydra(), function)
    numerics.pin(hooks.numerics)  # (the worker started pinned; this process may not have)
    identity = hooks.identify(cfg)
    directory = output_dir()
    job = Job(identity, directory, open_trackers(cfg, identity, directory))
    if job.gpus is not None:  # in the job's log, beside its result.json
        log.info(f"rlsweep: this job's GPU(s): {gpus_text(job.gpus)}")
    token, failed = _current.set(job), True
    try:
        with (
            keeping_app_logs(directory),  # linked wherever the app writes them, whole at the end
            job_threads(identity.threads),
            job_streams(job.seeds) as streams,
        ):
            seed_global_rngs(job.seeds)
            feed = replicate_seed(cfg, hooks.keys, identity, job.seeds)
            value = function(cfg)
            if hooks.identity is None:  # rlsweep's own agents write their seeds.json
                write_seeds(directory, hooks.keys, identity, job.seeds, feed, streams)
        failed = False
    finally:
        _current.reset(token)
        if job._trackers is not None:
            job._trackers.close(failed)
    record(job, value, hooks.keys, code_fingerprint(function))
    return value


def record(
    job: Job, value: Any, keys: Keys | None = None, code: dict[str, Any] | None = None
) -> None:
    """Write the job's ``result.json`` from its task's return value, with the fingerprint
    of the code that computed it; drop its checkpoint."""
    atomic_write_json(job.directory / PACKAGES_FILE, {"packages": packages()})
    results.write_result(
        job.directory, job.identity, value, keys or Keys(), gpus=job.gpus, code=code
    )
    job.checkpoint_path.unlink(missing_ok=True)


def resolve_seed(purpose: str, index: int = 0, *, shared: bool, root: Any) -> int:
    """``${rlsweep.seed:purpose[,index]}`` (``rlsweep.shared_seed``: a shared stream): the
    running job's seed, or, outside a job, the seed from the config's own identity."""
    job = _current.get()
    if job is not None:
        return job.seeds.seed(str(purpose), int(index), shared=shared)
    identity = identity_of(task_config(root), Keys(), hydra_ignored_keys(root), installed_choices())
    return Seeds(identity).seed(str(purpose), int(index), shared=shared)
