"""One loader for every sweep: job directories read into the runs table
(:class:`~rlsweep.report.runs.Sweep`).

A sweep of rlsweep's own agents is grouped by agent, with the env as the task
(:mod:`rlsweep.report.variants`). Any other app's jobs are grouped by the keys the sweep
varies:

- the *swept keys* are the config keys whose values differ between the jobs: from the
  identity in ``result.json`` for completed jobs, from ``.hydra/config.yaml`` (else
  ``.hydra/overrides.yaml``) for failed and incomplete ones;
- the *replicate key* is ``--replicate-key``, else the one the jobs recorded
  (``result.json``'s ``rlsweep.keys``), else the sweep's (``sweep.json``), else inferred:
  ``seed`` unless another swept key is evidently the recorded replicate index; a key
  recorded as null means none: every job is then a group of its own;
- a job's config-group choices are among its values by group name (``algo``: ``b``), from
  its recorded identity, else from ``.hydra/hydra.yaml``;
- a *group* is the jobs with the same values of the swept keys other than the replicate
  and the root key; its label reads like Hydra's job names (``algo=a,lr=0.1``), a chosen
  group option by its name (``task=nav/small``, not the option's values, when the choices
  determine them), and groups sort by their values, numbers as numbers.

Directory names are never parsed for values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlsweep.choices import CHOICES_PATH, choices_in, job_choices, package_of
from rlsweep.report.jobfiles import (
    OPT_IN_KEY,
    canon,
    flatten,
    hydra_values,
    index,
    read_json,
    returned_numbers,
    show,
)
from rlsweep.report.runs import Run, Sweep, code_of, last_line, numerics_of, unique_dirs
from rlsweep.report.variants import agent_runs, is_built_in
from rlsweep.series import job_series
from rlsweep.store import (
    HYDRA_DIR,
    RECORD_KEY,
    SEEDS_FILE,
    SWEEP_FILE,
    JobRecord,
    read_sweep,
    recorded_choices,
    recorded_identity,
)

__all__ = ["ALL", "REPLICATE_KEY", "group_label", "read_runs"]

REPLICATE_KEY = "seed"
ALL = "all"  # the one group's label when no key but the replicate varies
UNKNOWN_VALUE = "?"  # a swept key's value that a failed job's files do not say
_UNSET = "unset"


@dataclass(frozen=True)
class _Job:
    """A job directory before the sweep's swept keys are known."""

    sweep: Path
    record: JobRecord
    values: dict[str, Any]  # flattened config values that are known
    whole: bool  # values are the job's whole config (absent = not set)
    identity: dict[str, Any] | None  # the recorded identity (result.json's rlsweep.job)
    keys: dict[str, Any] | None  # the recorded keys (result.json's rlsweep.keys)
    digest: str | None = None  # the recorded identity's SHA-256
    choices: dict[str, str] = field(default_factory=dict)  # group -> option (in values too)


def _read_job(sweep: Path, record: JobRecord) -> _Job:
    """A job's values: its recorded identity's (completed), else Hydra's record of its
    config; its group choices among them by group name (``algo``: ``b``)."""
    recorded = recorded_identity(record.result) if record.result is not None else None
    meta = (record.result or {}).get(RECORD_KEY)
    keys = meta.get("keys") if isinstance(meta, dict) else None
    keys = keys if isinstance(keys, dict) else None
    if recorded is not None and isinstance(recorded[1].get("config"), dict):
        config = recorded[1]["config"]
        chosen = choices_in(config)
        values = flatten({k: v for k, v in config.items() if k != CHOICES_PATH[0]})
        return _Job(
            sweep, record, {**values, **chosen}, True, recorded[1], keys, recorded[0], chosen
        )
    values, whole = hydra_values(record.path)
    chosen = job_choices(recorded_choices(record.path / HYDRA_DIR / "hydra.yaml"))
    return _Job(sweep, record, {**values, **chosen}, whole, None, keys, None, chosen)


def _swept(jobs: Sequence[_Job]) -> list[str]:
    """Keys whose values differ between jobs.

    Recorded identities hold every value the job depends on, so when some exist only
    their keys count (keys Hydra records but the identity ignores, such as a tag, do not);
    a key absent from a whole config is a value of its own (``+extra=1`` in some jobs).
    """
    recorded = [j for j in jobs if j.identity is not None]
    keys = sorted({k for j in (recorded or jobs) for k in j.values} - {OPT_IN_KEY})
    absent = object()
    swept = []
    for key in keys:
        seen = {
            canon(j.values[key]) if key in j.values else absent
            for j in jobs
            if key in j.values or j.whole
        }
        if len(seen) > 1:
            swept.append(key)
    return swept


def _shown_by_choice(jobs: Sequence[_Job], swept: Sequence[str]) -> set[str]:
    """Swept values that belong to a swept group's option (under its package: ``task.size``
    of group ``task``) and that the swept choices determine: the label shows the choice
    (``task=nav/small``), not the option's expanded values."""
    groups = [g for g in swept if any(g in j.choices for j in jobs)]
    out = set()
    for key in swept:
        if key in groups or not any(key.startswith(package_of(g) + ".") for g in groups):
            continue
        seen: dict[tuple[str, ...], set[str]] = {}
        for job in jobs:
            if key in job.values:
                chosen = tuple(job.choices.get(g, "") for g in groups)
                seen.setdefault(chosen, set()).add(canon(job.values[key]))
        if all(len(values) == 1 for values in seen.values()):
            out.add(key)
    return out


def _index_keys(jobs: Sequence[_Job], swept: Sequence[str], field: str) -> list[str]:
    """Swept keys equal to the recorded identity's ``field`` (replicate, root) in every job
    that recorded one, where it takes two values or more."""
    recorded = [(j.values, j.identity) for j in jobs if j.identity is not None]
    if len({canon(identity.get(field)) for _, identity in recorded}) < 2:
        return []
    return [
        key
        for key in swept
        if all(
            index(values.get(key)) is not None and values.get(key) == identity.get(field)
            for values, identity in recorded
        )
    ]


def _recorded_key(jobs: Sequence[_Job], sweeps: Sequence[Path], name: str) -> Any:
    """The key ``name`` (replicate, root) the jobs recorded (``rlsweep.keys``), else the
    sweep's ``sweep.json`` (``<name>_key``); ``_UNSET`` when neither says. A key recorded
    as null is None: the sweep has none."""
    for job in jobs:
        if job.keys is not None and name in job.keys:
            value = job.keys[name]
            return value if value is None or isinstance(value, str) else _UNSET
    for sweep in sweeps:
        record = read_json(sweep / SWEEP_FILE)
        if record is not None and f"{name}_key" in record:
            value = record[f"{name}_key"]
            return value if value is None or isinstance(value, str) else _UNSET
    return _UNSET


def _replicate_key(
    jobs: Sequence[_Job], sweeps: Sequence[Path], swept: Sequence[str], given: str | None
) -> tuple[str | None, str]:
    """The replicate key and where it was read: ``--replicate-key``, else the jobs' record,
    else the sweep's, else inferred."""
    if given is not None:
        return given, "--replicate-key"
    recorded = _recorded_key(jobs, sweeps, "replicate")
    if recorded != _UNSET:
        return recorded, "result.json" if any(j.keys for j in jobs) else SWEEP_FILE
    candidates = _index_keys(jobs, swept, "replicate")
    if len(candidates) == 1 and REPLICATE_KEY not in candidates:
        return candidates[0], "inferred"
    return REPLICATE_KEY, "inferred"


def natural(value: Any) -> tuple[int, Any]:
    """A value's place in an order where numbers sort as numbers, before any text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value))
    return (1, show(value))


def group_label(keys: Mapping[str, Any], group_keys: Sequence[str]) -> str:
    """``algo=a,lr=0.1`` (``?`` for a value the job's files do not give), or ``all``."""
    if not group_keys:
        return ALL
    return ",".join(f"{k}={show(keys[k]) if k in keys else UNKNOWN_VALUE}" for k in group_keys)


def _to_run(job: _Job, sweep: Sweep) -> Run:
    """One job as a run of the sweep's groups (``sweep`` without its runs yet)."""
    identity, record = job.identity, job.record
    keys = {k: job.values[k] for k in sweep.group_keys if k in job.values}
    if identity is not None:
        replicate = index(identity.get("replicate"))
        root = index(identity.get("root"))
        crn = identity.get("crn")
        shared: str | None = canon([identity.get("root"), identity.get("shared")])
    else:
        # The identity's rule: a replicate (root) that is not set, or no index, is 0.
        rep_key = sweep.replicate_key
        replicate = index(job.values.get(rep_key)) if rep_key else None
        if replicate is None and job.whole:
            replicate = 0
        root = (index(job.values.get(sweep.root_key)) or 0) if sweep.root_key else 0
        crn, shared = None, None
    missing = (2, "")
    code, code_text = code_of(record.result)
    return Run(
        sweep=job.sweep,
        path=record.path,
        status=record.status,
        group=group_label(keys, sweep.group_keys),
        task="",
        replicate=replicate,
        root=root,
        common_random_numbers=crn if isinstance(crn, bool) else None,
        error=last_line(record.error),
        order=tuple(natural(keys[k]) if k in keys else missing for k in sweep.group_keys),
        keys=keys,
        shared=shared,
        values=returned_numbers(record.result) if record.status == "completed" else {},
        series=job_series(record.path),
        numerics=numerics_of(record.result),
        code=code,
        code_text=code_text,
        fresh_subprocesses=fresh_subprocesses(record.path),
        identity=job.digest,
        problem=record.problem,
    )


def fresh_subprocesses(job_dir: Path) -> int:
    """How many sub-processes a job started fresh (its seeds.json; 0: none or unknown)."""
    unseeded = (read_json(job_dir / SEEDS_FILE) or {}).get("unseeded")
    count = unseeded.get("fresh_subprocesses") if isinstance(unseeded, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def _app_sweep(sweeps: list[Path], jobs: list[_Job], replicate_key: str | None) -> Sweep:
    swept = _swept(jobs)
    rep_key, where = _replicate_key(jobs, sweeps, swept, replicate_key)
    root = _recorded_key(jobs, sweeps, "root")
    if root == _UNSET:
        roots = [k for k in _index_keys(jobs, swept, "root") if k != rep_key]
        root = roots[0] if len(roots) == 1 else None
    by_choice = _shown_by_choice(jobs, swept)
    group_keys = tuple(k for k in swept if k not in (rep_key, root) and k not in by_choice)
    shape = Sweep(tuple(sweeps), (), False, group_keys, rep_key, root, where)
    runs = tuple(_to_run(job, shape) for job in jobs)
    return Sweep(
        tuple(sweeps),
        runs,
        False,
        group_keys,
        rep_key,
        root,
        where,
        _constant(sweeps),
        recorded_grids(sweeps),
    )


def recorded_grids(sweeps: Sequence[Path]) -> dict[Path, tuple[str, ...]]:
    """The job directory names of each sweep's grid, as its ``sweep.json`` recorded them
    ("jobs": a sweep that plans its jobs before it runs them; a search records none)."""
    out = {}
    for sweep in sweeps:
        names = (read_json(sweep / SWEEP_FILE) or {}).get("jobs")
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            # Only names of this directory's own children: never a path out of it.
            out[sweep] = tuple(n for n in names if n and "/" not in n and n not in (".", ".."))
    return out


def _constant(sweeps: Sequence[Path]) -> dict[str, str]:
    """The constant overrides the first sweep with a ``sweep.json`` recorded."""
    for sweep in sweeps:
        record = read_json(sweep / SWEEP_FILE)
        if record is not None and isinstance(record.get("constant"), dict):
            return {str(k): str(v) for k, v in record["constant"].items() if k != OPT_IN_KEY}
    return {}


def read_runs(sweep_dirs: Sequence[Path], *, replicate_key: str | None = None) -> Sweep:
    """Every job directory of the sweeps (sweep order, then name order), grouped."""
    sweeps = unique_dirs(sweep_dirs)
    records = [(sweep, record) for sweep in sweeps for record in read_sweep(sweep)]
    if records and all(is_built_in(record) for _, record in records):
        runs = tuple(agent_runs(records))
        return Sweep(
            tuple(sweeps),
            runs,
            True,
            ("agent",),
            "seed",
            None,
            "rlsweep's agents",
            grids=recorded_grids(sweeps),
        )
    jobs = [_read_job(sweep, record) for sweep, record in records]
    return _app_sweep(sweeps, jobs, replicate_key)
