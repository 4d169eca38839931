"""What a sweep is, written once for the whole sweep (``sweep.json``) and said when it starts.

Job directories are named by the keys the sweep varies (``optim.lr=0.001,seed=3``); what
every job shares is recorded here once: the constant overrides, which key is the replicate
(and what the app reads there), and the command that ran the sweep (the determinism check,
``python -m rlsweep.check``, runs one of its jobs again with it).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.types import Override
from omegaconf import DictConfig

from rlsweep.store import SWEEP_FILE, atomic_write_json
from rlsweep.task_api import TaskHooks

FORMAT = 1
# The opt-in group's choice: how jobs run, not what they are.
OPT_IN = "rlsweep"


def _constant(overrides: Sequence[Override]) -> dict[str, str]:
    """The sweep's single-valued overrides of the app's keys, ``{key: value text}``."""
    out: dict[str, str] = {}
    for o in overrides:
        if o.is_sweep_override() or o.is_hydra_override() or o.key_or_group == OPT_IN:
            continue
        out[o.key_or_group] = o.get_value_element_as_str()
    return out


def command() -> dict[str, Any]:
    """How this process was started: the interpreter and script (or ``-m module``) before
    Hydra's arguments, the arguments, and the working directory."""
    argv = list(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    arguments = sys.argv[1:]
    prefix = argv[: len(argv) - len(arguments)] if arguments else argv
    return {"command": prefix, "arguments": arguments, "cwd": os.getcwd()}


def sweep_record(
    overrides: Sequence[Override],
    hooks: TaskHooks,
    varying: Sequence[str],
    jobs: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The sweep's ``sweep.json``; ``jobs``: the names of its grid's job directories, when
    the sweep planned them before running any (the report then lists a grid job with no
    directory as missing, rather than infer the grid from the directories left)."""
    record = {
        "format": FORMAT,
        "replicate_key": hooks.keys.replicate,
        "replicate_value": hooks.keys.replicate_value,
        "root_key": hooks.keys.root,
        "varying": sorted(varying),
        "constant": _constant(overrides),
        "app": command(),
    }
    if jobs is not None:
        record["jobs"] = list(dict.fromkeys(jobs))
    return record


def write_sweep_record(sweep_dir: Path, record: dict[str, Any]) -> None:
    atomic_write_json(sweep_dir / SWEEP_FILE, record)


def name_the_app(config: DictConfig) -> None:
    """Give a sweep's jobs the app's script name when Hydra named them after a library's
    private module: hydra-zen's ``zen(task).hydra_main()`` calls Hydra from its own
    ``_implementations`` module, which would name the sweep ``multirun/_implementations``.
    Set in Hydra's job runtime (every job composed from now on, and the workers, take it)
    and in the sweep's config; an app that sets ``hydra.job.name`` itself keeps its own."""
    from hydra.core.utils import JobRuntime
    from omegaconf import OmegaConf, open_dict, read_write

    if not str(config.hydra.job.name).startswith("_"):
        return
    script = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else ""
    given = OmegaConf.to_container(config.hydra.overrides.hydra, resolve=False)
    overridden = any(str(o).startswith("hydra.job.name=") for o in given or [])
    if not script or script.startswith("_") or overridden:
        return
    JobRuntime.instance().set("name", script)
    with read_write(config.hydra.job), open_dict(config.hydra.job):
        config.hydra.job.name = script


def _count(o: Override) -> int | None:
    """How many values a sweep override gives (None: not countable, e.g. an interval)."""
    if not o.is_discrete_sweep():
        return None
    return sum(1 for _ in o.sweep_string_iterator())


def _has_key(config: DictConfig | None, key: str) -> bool:
    """Whether the app's config has ``key`` (unknown without a config: assumed so)."""
    if config is None:
        return True
    from omegaconf import OmegaConf

    missing = object()
    return OmegaConf.select(config, key, default=missing, throw_on_missing=False) is not missing


def _replicate_hint(key: str, counts: dict[str, int | None], config: DictConfig | None) -> str:
    """How to sweep replicates, written as this app needs it."""
    seeds = sorted(k for k in counts if k.split(".")[-1] in ("seed", "seeds") and k != key)
    if seeds:
        return (
            f"'{seeds[0]}' is swept as a setting: to make it the replicate index, add "
            f"hydra.launcher.identity.replicate={seeds[0]}"
        )
    plus = "" if _has_key(config, key) else "+"
    return (
        f"sweep it, e.g. '{plus}{key}=range(4)', for replicates; another key: "
        "hydra.launcher.identity.replicate=<key>"
    )


def start_line(
    overrides: Sequence[Override], hooks: TaskHooks, jobs: int, config: DictConfig | None = None
) -> str:
    """The line a grid sweep starts with: its groups, and its replicates by which key and
    what rlsweep sets there (the app may read it or not)."""
    key = hooks.keys.replicate
    counts = {o.key_or_group: _count(o) for o in overrides if o.is_sweep_override()}
    others = [n for k, n in counts.items() if k != key]
    groups = math.prod(n or 1 for n in others)
    group_text = f"{groups} group{'s' if groups != 1 else ''}"
    job_text = f"{jobs} job{'s' if jobs != 1 else ''}"
    if key is None:
        return (
            f"[rlsweep] {job_text}, no replicate key (hydra.launcher.identity.replicate is "
            "null): every job is a group of its own"
        )
    sets = (
        f"rlsweep sets '{key}' to each job's own seed"
        if hooks.keys.replicate_value == "derived"
        else f"rlsweep sets '{key}' to the replicate index"
    )
    if key not in counts:
        return (
            f"[rlsweep] {job_text} in {group_text} of one replicate each: the replicate key "
            f"'{key}' is not swept ({_replicate_hint(key, counts, config)})"
        )
    n = counts[key]
    replicates = f"{n} replicate{'s' if n != 1 else ''}" if n is not None else "replicates"
    return f"[rlsweep] {job_text}: {group_text} x {replicates} (replicate key '{key}'; {sets})"
