"""The runs table: one :class:`Run` per job directory, the data contract of every report.

A sweep of rlsweep's own agents is read here (:func:`load_runs`): a job directory's
``result.json``, ``seeds.json``, ``.hydra/config.yaml`` and ``error.txt``. A sweep of any other
Hydra app is read by :mod:`rlsweep.report.app_runs`, which feeds the same :class:`Run` (a group
of runs as the agent, the metric as the env). Everything after this table is a pure function of
it: :mod:`rlsweep.report.analysis`, :mod:`rlsweep.report.comparisons`,
:mod:`rlsweep.report.markdown`.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlsweep.identity import canonical_json
from rlsweep.seeding import identity_digest
from rlsweep.stats import FloatArray
from rlsweep.store import HYDRA_DIR, SEEDS_FILE, JobRecord, read_sweep

__all__ = [
    "STATUSES",
    "UNKNOWN",
    "JobRun",
    "Run",
    "deduplicate",
    "load_runs",
    "missing_runs",
]

STATUSES = ("completed", "failed", "incomplete")
UNKNOWN = "?"
_RANK = {status: rank for rank, status in enumerate(STATUSES)}


@dataclass(frozen=True)
class JobRun:
    """One job directory: where it is, and whether it completed."""

    sweep: Path
    path: Path
    status: str  # "completed" | "failed" | "incomplete"

    @property
    def job(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class Run(JobRun):
    """One job directory, as the report sees it."""

    agent: str  # display label: the agent's name, plus what differs if a name is ambiguous
    env: str  # likewise for the env id
    replicate: int | None
    root: int | None
    common_random_numbers: bool | None  # from seeds.json (None: the job wrote none)
    seed_fingerprint: str | None  # short SHA-256 of every concrete seed in seeds.json
    final_return: float | None
    random_score: float | None
    reference_score: float | None
    error: str | None  # the last line of error.txt


def last_line(text: str | None) -> str | None:
    """The last line of an error.txt (None for none)."""
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else None


def unique_dirs(sweep_dirs: Sequence[Path]) -> list[Path]:
    """The sweep directories, resolved, each once, in the order given."""
    return list(dict.fromkeys(Path(d).resolve() for d in sweep_dirs))


# --------------------------------------------------------------------------------------------
# Reading a sweep of rlsweep's own agents


@dataclass(frozen=True)
class _Raw:
    """What one job directory holds, before agents and envs get their display labels."""

    sweep: Path
    record: JobRecord
    seeds: dict[str, Any] | None
    hydra: dict[str, Any] | None


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _hydra_config(job_dir: Path) -> dict[str, Any] | None:
    """The job's composed config from ``.hydra/config.yaml`` (interpolations kept if broken)."""
    path = job_dir / HYDRA_DIR / "config.yaml"
    if not path.is_file():
        return None
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(path)
    try:
        data: Any = OmegaConf.to_container(cfg, resolve=True)
    except Exception:
        data = OmegaConf.to_container(cfg, resolve=False)
    return {str(k): v for k, v in data.items()} if isinstance(data, dict) else None


def _section(raw: _Raw, name: str) -> dict[str, Any] | None:
    """A config section (agent, env, seeding): the typed one in result.json, else Hydra's."""
    for source in ((raw.record.result or {}).get("config"), raw.hydra):
        if isinstance(source, dict) and isinstance(source.get(name), dict):
            return dict(source[name])
    return None


def _treatment(raw: _Raw) -> dict[str, Any] | None:
    """What was run on the env: the agent, train and eval config sections, flattened.

    Read from ``.hydra/config.yaml`` for every job (one source, so completed and failed jobs
    compare alike), else from result.json. Agent keys keep their name; the others are
    prefixed (``train.total_steps``).
    """
    result_config = (raw.record.result or {}).get("config")
    for source in (raw.hydra, result_config):
        if isinstance(source, dict) and isinstance(source.get("agent"), dict):
            flat: dict[str, Any] = {}
            for section in ("agent", "train", "eval"):
                values = source.get(section)
                for key, value in (values if isinstance(values, dict) else {}).items():
                    flat[str(key) if section == "agent" else f"{section}.{key}"] = value
            return flat
    return None


def _variant_labels(
    name: str, configs: Mapping[str, Mapping[str, Any]], ids: set[str]
) -> dict[str, str]:
    """A label per identity of one name: what differs between their configs, else a hash."""
    keys = sorted({k for c in configs.values() for k in c})
    # Among the configs that have the key: results written before an option existed
    # lack it, which is not a difference (AgentConfig.ADDED_LATER).
    differing = [
        k for k in keys if len({canonical_json(c[k]) for c in configs.values() if k in c}) > 1
    ]
    label_of: dict[str, str] = {}
    for identity in sorted(ids):
        if identity in configs and differing:
            config = configs[identity]
            parts = [f"{k}={canonical_json(config.get(k))}" for k in differing]
            label_of[identity] = f"{name}[{', '.join(parts)}]"
        else:
            label_of[identity] = f"{name}@{identity[:8]}"
    if len(set(label_of.values())) < len(ids):  # configs alone do not separate them
        label_of = {identity: f"{name}@{identity[:8]}" for identity in ids}
    return label_of


def _labels(items: Sequence[tuple[str, str | None, Mapping[str, Any] | None]]) -> list[str]:
    """A display label per (name, identity, config).

    A name with one identity keeps its name. Identities sharing a name (a hyperparameter
    sweep) are told apart by the config entries that differ between them, e.g.
    ``ppo[learning_rate=0.001]``; by a short hash of the identity when that is not enough.
    """
    configs: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    identities: dict[str, set[str]] = defaultdict(set)
    for name, identity, config in items:
        if identity is not None:
            identities[name].add(identity)
            if config is not None:
                configs[name].setdefault(identity, config)
    label_of = {
        (name, identity): label
        for name, ids in identities.items()
        if len(ids) >= 2
        for identity, label in _variant_labels(name, configs[name], ids).items()
    }
    labels: list[str] = []
    for name, identity, _ in items:
        if len(identities.get(name, ())) < 2:
            labels.append(name)
        elif identity is None:
            labels.append(f"{name}[unknown config]")
        else:
            labels.append(label_of[(name, identity)])
    return labels


def _int_or_none(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _float_or_none(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _to_run(raw: _Raw, agent: str) -> Run:
    record, seeds = raw.record, raw.seeds
    seeding = _section(raw, "seeding") or {}
    # Baselines only from completed runs: the typed config the job validated.
    env_cfg = (_section(raw, "env") or {}) if record.result is not None else {}
    root = _int_or_none(seeds.get("root")) if seeds else _int_or_none(seeding.get("root"))
    crn = seeds.get("common_random_numbers") if seeds else None
    fingerprint = (
        identity_digest(seeds["seeds"]) if seeds and isinstance(seeds.get("seeds"), dict) else None
    )
    return Run(
        sweep=raw.sweep,
        path=record.path,
        status=record.status,
        agent=agent,
        env=record.env,
        replicate=record.replicate,
        root=root,
        common_random_numbers=crn if isinstance(crn, bool) else None,
        seed_fingerprint=fingerprint,
        final_return=record.final_return,
        random_score=_float_or_none(env_cfg.get("random_score")),
        reference_score=_float_or_none(env_cfg.get("reference_score")),
        error=last_line(record.error),
    )


def load_runs(sweep_dirs: Sequence[Path]) -> list[Run]:
    """Every job directory of the sweeps, in sweep order then directory name order.

    An agent is its name, unless runs of that name differ in their agent, train or eval
    config (a hyperparameter sweep): each variant is then an agent of its own, labelled by
    what differs. An env is its gymnasium id.
    """
    raws = [
        _Raw(sweep, record, _read_json(record.path / SEEDS_FILE), _hydra_config(record.path))
        for sweep in unique_dirs(sweep_dirs)
        for record in read_sweep(sweep)
    ]
    items = []
    for r in raws:
        treatment = _treatment(r)
        identity = None if treatment is None else identity_digest(treatment)
        items.append((r.record.agent, identity, treatment))
    agents = _labels(items)
    return [_to_run(r, agent) for r, agent in zip(raws, agents, strict=True)]


# --------------------------------------------------------------------------------------------
# The grid: cells, duplicates, missing runs


def deduplicate(runs: Sequence[Run]) -> tuple[list[Run], list[Run]]:
    """One run per (agent, env, root, replicate): the first completed one, else the first.

    Returns (kept, superseded); the same job found in two sweep directories, or a failed
    attempt that a later sweep completed, is counted once.
    """
    best: dict[tuple[Any, ...], Run] = {}
    for run in runs:
        if run.replicate is None or UNKNOWN in (run.agent, run.env):
            key: tuple[Any, ...] = ("path", str(run.path))
        else:
            key = (run.agent, run.env, run.root, run.replicate)
        current = best.get(key)
        if current is None or _RANK[run.status] < _RANK[current.status]:
            best[key] = run
    kept_ids = {id(r) for r in best.values()}
    kept = [r for r in runs if id(r) in kept_ids]
    superseded = [r for r in runs if id(r) not in kept_ids]
    return kept, superseded


def agents_of(runs: Iterable[Run]) -> list[str]:
    return sorted({r.agent for r in runs if r.agent != UNKNOWN})


def envs_of(runs: Iterable[Run]) -> list[str]:
    return sorted({r.env for r in runs if r.env != UNKNOWN})


def cells_of(runs: Sequence[Run]) -> list[tuple[str, str]]:
    """The (agent, env) pairs with at least one job directory, in agent then env order."""
    present = {(r.agent, r.env) for r in runs}
    return [(a, e) for a in agents_of(runs) for e in envs_of(runs) if (a, e) in present]


def missing_runs(runs: Sequence[Run]) -> list[tuple[str, str, int]]:
    """(agent, env, replicate) of the grid with no job directory at all.

    The grid is inferred: every (agent, env) cell that has at least one job directory, times
    every replicate index seen in the sweeps. Cells are not crossed: a sweep of presets (each
    agent variant on its own env) is not a factorial grid, and its other combinations were
    never asked for.
    """
    replicates = sorted({r.replicate for r in runs if r.replicate is not None})
    present = {(r.agent, r.env, r.replicate) for r in runs}
    return [
        (agent, env, rep)
        for agent, env in cells_of(runs)
        for rep in replicates
        if (agent, env, rep) not in present
    ]


def run_order(run: Run) -> tuple[int, int, str, str]:
    """Runs of one cell in (root, replicate, sweep, job) order."""
    rep = -1 if run.replicate is None else run.replicate
    root = -1 if run.root is None else run.root
    return root, rep, str(run.sweep), run.job


def completed_runs(runs: Iterable[Run], agent: str, env: str) -> list[Run]:
    """The completed runs of one cell, by (root, replicate, sweep, job)."""
    cell = [r for r in runs if r.agent == agent and r.env == env and r.status == "completed"]
    return sorted(cell, key=run_order)


def finals(runs: Iterable[Run]) -> FloatArray:
    """The final returns of the runs that have one."""
    return np.array([r.final_return for r in runs if r.final_return is not None], dtype=float)
