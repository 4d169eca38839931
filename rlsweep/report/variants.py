"""rlsweep's own agents as groups: a group is an agent, labelled by its name, or, when runs of
one name differ in their agent, train or eval settings (a hyperparameter sweep), by what
differs (``ppo[learning_rate=0.001]``); a task is the env id; the env's random and reference
scores are its baselines. Read from each job's ``result.json``, ``seeds.json`` and
``.hydra/config.yaml``, into the runs table of every report (:class:`~rlsweep.report.runs.Run`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsweep.identity import canonical_json
from rlsweep.report.jobfiles import read_json, returned_numbers
from rlsweep.report.runs import Run, code_of, last_line, numerics_of
from rlsweep.seeding import identity_digest
from rlsweep.series import job_series
from rlsweep.store import HYDRA_DIR, SEEDS_FILE, JobRecord, recorded_identity

__all__ = ["BUILT_IN_KEYS", "agent_runs", "is_built_in"]

BUILT_IN_KEYS = ("agent", "env", "final_return")  # result.json of rlsweep's own agents


def is_built_in(record: JobRecord) -> bool:
    """Whether a job is one of rlsweep's own agents': a completed job whose result.json has
    their keys, or a failed one whose Hydra config names an agent and an env."""
    if record.result is not None:
        return all(k in record.result for k in BUILT_IN_KEYS)
    if (record.path / HYDRA_DIR / "config.yaml").is_file():
        if "?" not in (record.agent, record.env):
            return True
        # An agent name or env id that is an interpolation: unknown, but named.
        cfg = _hydra_config(record.path) or {}
        agent, env = cfg.get("agent"), cfg.get("env")
        return isinstance(agent, dict) and "name" in agent and isinstance(env, dict) and "id" in env
    return True


@dataclass(frozen=True)
class _Raw:
    """What one job directory holds, before agents get their display labels."""

    sweep: Path
    record: JobRecord
    seeds: dict[str, Any] | None
    hydra: dict[str, Any] | None


def _hydra_config(job_dir: Path) -> dict[str, Any] | None:
    """The job's composed config from ``.hydra/config.yaml``, never resolved: a value that
    is an interpolation (``${oc.env:...}``) is unknown, shown as written (resolving it here
    would read the reader's environment and files, not the job's)."""
    path = job_dir / HYDRA_DIR / "config.yaml"
    if not path.is_file():
        return None
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        data: Any = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except (OSError, ValueError, OmegaConfBaseException, yaml.YAMLError):
        return None
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
    # Among the configs that have the key: a result of an rlsweep without an option
    # lacks it, which is not a difference (AgentConfig.ADDED_LATER).
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
    """A display label per (name, identity, config): the name when it has one identity;
    else what differs between their configs, by a short hash when that is not enough."""
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
    values = returned_numbers(record.result)
    if record.result is not None:
        values["final_return"] = float(record.result["final_return"])
    code, code_text = code_of(record.result)
    recorded = recorded_identity(record.result) if record.result is not None else None
    return Run(
        sweep=raw.sweep,
        path=record.path,
        status=record.status,
        group=agent,
        task=record.env,
        replicate=record.replicate,
        root=root,
        common_random_numbers=crn if isinstance(crn, bool) else None,
        error=last_line(record.error),
        order=(agent,),
        seed_fingerprint=fingerprint,
        values=values,
        baselines=(
            _float_or_none(env_cfg.get("random_score")),
            _float_or_none(env_cfg.get("reference_score")),
        ),
        series=job_series(record.path),
        numerics=numerics_of(record.result),
        code=code,
        code_text=code_text,
        identity=recorded[0] if recorded is not None else None,
        problem=record.problem,
    )


def agent_runs(jobs: Sequence[tuple[Path, JobRecord]]) -> list[Run]:
    """The runs of rlsweep's own agents, in the order given."""
    raws = [
        _Raw(sweep, record, read_json(record.path / SEEDS_FILE), _hydra_config(record.path))
        for sweep, record in jobs
    ]
    items = []
    for r in raws:
        treatment = _treatment(r)
        identity = None if treatment is None else identity_digest(treatment)
        items.append((r.record.agent, identity, treatment))
    return [_to_run(r, agent) for r, agent in zip(raws, _labels(items), strict=True)]
