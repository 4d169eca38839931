"""Any Hydra app's sweep, read into the runs table: one run per job directory, grouped by keys.

rlsweep runs any Hydra app as a job (:mod:`rlsweep.task_api`). Each job directory then holds
``result.json`` (what the task function returned, and under ``rlsweep`` the job's identity:
its config values, replicate, root...), optionally ``metrics.csv`` (``rlsweep.current().log``)
and ``.hydra/`` (Hydra's record of the job's config and overrides), or ``error.txt``.

This module reads such sweeps into :class:`AppSweep`:

- the *swept keys* are the config keys whose values differ between the jobs: from the
  identity in ``result.json`` for completed jobs, from ``.hydra/config.yaml`` (else
  ``.hydra/overrides.yaml``) for failed and incomplete ones;
- a *group* is the jobs with the same values of the swept keys other than the replicate
  key (``seed`` unless told or evident otherwise) and the root key; its label reads like
  Hydra's job names (``algo=a,lr=0.1``);
- a run's *values* are the numbers its task function returned.

:func:`to_runs` turns it into the report's data contract, :class:`rlsweep.report.runs.Run`
(the group label as the ``agent``, the metric's name as the ``env``, the metric's value as the
``final_return``), so the statistics of the built-in report serve any app unchanged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsweep.report.runs import UNKNOWN, JobRun, Run, last_line, unique_dirs
from rlsweep.store import (
    HYDRA_DIR,
    RECORD_KEY,
    JobRecord,
    iter_job_dirs,
    read_job,
    read_sweep,
    recorded_identity,
)

__all__ = [
    "ALL",
    "REPLICATE_KEY",
    "AppRun",
    "AppSweep",
    "choose_metric",
    "group_label",
    "is_app_sweep",
    "override_lines",
    "read_app_sweep",
    "to_runs",
]

REPLICATE_KEY = "seed"
ALL = "all"  # the one group's label when no key but the replicate varies
UNKNOWN_VALUE = "?"  # a swept key's value that a failed job's files do not say
NO_METRIC = "–"  # the runs' "env" when no job returned a number
BUILT_IN_KEYS = ("agent", "env", "final_return")  # result.json of rlsweep's own agents


@dataclass(frozen=True)
class AppRun(JobRun):
    """One job directory of any app's sweep."""

    group: str  # label: the values of the group keys, e.g. "algo=a,lr=0.1"
    keys: Mapping[str, Any]  # group key -> value (a key the job's files do not give: absent)
    replicate: int | None
    root: int | None
    common_random_numbers: bool | None  # from the recorded identity (None: none recorded)
    shared: str | None  # the identity's shared values and root: equal => same shared seeds
    values: Mapping[str, float]  # the numbers the task function returned, by name
    error: str | None  # the last line of error.txt


@dataclass(frozen=True)
class AppSweep:
    """Every job directory of one or several sweeps of any app."""

    sweeps: tuple[Path, ...]
    runs: tuple[AppRun, ...]
    group_keys: tuple[str, ...]  # the swept keys other than the replicate and the root
    replicate_key: str
    root_key: str | None  # a swept key that is the identity's root (None: not swept)
    numeric: tuple[str, ...]  # names of the numbers completed jobs returned, sorted


# --------------------------------------------------------------------------------------------
# Values


def _canon(value: Any) -> str:
    """A value's text for comparisons (the same for 0.1 from YAML and from JSON)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def show(value: Any) -> str:
    """A config value as a label shows it: strings bare, the rest as JSON."""
    return value if isinstance(value, str) else _canon(value)


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of nested mappings by dotted path (an empty mapping is a leaf)."""
    if isinstance(node, Mapping) and node:
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: node} if prefix else {}


def _index(value: Any) -> int | None:
    """``value`` if it is an index (an int >= 0), as identities take replicates and roots."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _override_value(text: str) -> Any:
    """A Hydra override's value as a config would hold it (int, float, bool, null, str)."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none"):
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _load_yaml(path: Path) -> Any:
    """A YAML file's content; None when it is absent or unreadable. Parsed by libyaml when
    PyYAML has it (its safe loader in C: the same values, 5 times faster than Python's)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(path.read_text(), Loader=loader) if path.is_file() else None
    except (OSError, yaml.YAMLError):
        return None


def override_lines(job_dir: Path) -> list[tuple[str, str]]:
    """(key, value) of each ``key=value`` line of the job's ``.hydra/overrides.yaml``, the key
    as written (``+key``, ``~key``)."""
    lines = _load_yaml(job_dir / HYDRA_DIR / "overrides.yaml")
    pairs = [str(line).partition("=") for line in (lines if isinstance(lines, list) else [])]
    return [(key, value) for key, sep, value in pairs if sep]


def _hydra_values(job_dir: Path) -> tuple[dict[str, Any], bool]:
    """A job's config values from Hydra's record: ``.hydra/config.yaml`` (its whole config;
    interpolations left out), else ``.hydra/overrides.yaml`` (only what was overridden).
    The flag says whether the values are the whole config."""
    data = _load_yaml(job_dir / HYDRA_DIR / "config.yaml")
    if isinstance(data, dict):
        data.pop("hydra", None)
        flat = _flatten(data)
        return {k: v for k, v in flat.items() if not (isinstance(v, str) and "${" in v)}, True
    out: dict[str, Any] = {}
    for written, value in override_lines(job_dir):
        key = written.lstrip("+")
        if key and not written.startswith("~") and not key.startswith("hydra"):
            out[key] = _override_value(value)
    return out, False


def _numbers(result: Mapping[str, Any] | None) -> dict[str, float]:
    """The numbers a task function returned (its result.json without rlsweep's record)."""
    out: dict[str, float] = {}
    for key, value in (result or {}).items():
        if key != RECORD_KEY and isinstance(value, int | float) and not isinstance(value, bool):
            out[str(key)] = float(value)
    return out


# --------------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True)
class _Job:
    """A job directory before the sweep's swept keys are known."""

    sweep: Path
    record: JobRecord
    values: dict[str, Any]  # flattened config values that are known
    whole: bool  # values are the job's whole config (absent = not set)
    identity: dict[str, Any] | None  # the recorded identity (result.json's rlsweep.job)


def _read_job(sweep: Path, record: JobRecord) -> _Job:
    recorded = recorded_identity(record.result) if record.result is not None else None
    if recorded is not None and isinstance(recorded[1].get("config"), dict):
        return _Job(sweep, record, _flatten(recorded[1]["config"]), True, recorded[1])
    values, whole = _hydra_values(record.path)
    return _Job(sweep, record, values, whole, None)


def _swept(jobs: Sequence[_Job]) -> list[str]:
    """Keys whose values differ between jobs.

    Recorded identities hold every value the job depends on, so when some exist only
    their keys count (keys Hydra records but the identity ignores, such as a tag, do not);
    a key absent from a whole config is a value of its own (``+extra=1`` in some jobs).
    """
    recorded = [j for j in jobs if j.identity is not None]
    keys = sorted({k for j in (recorded or jobs) for k in j.values})
    absent = object()
    swept = []
    for key in keys:
        seen = {
            _canon(j.values[key]) if key in j.values else absent
            for j in jobs
            if key in j.values or j.whole
        }
        if len(seen) > 1:
            swept.append(key)
    return swept


def _index_keys(jobs: Sequence[_Job], swept: Sequence[str], field: str) -> list[str]:
    """Swept keys equal to the recorded identity's ``field`` (replicate, root) in every job
    that recorded one, where it takes two values or more."""
    recorded = [(j.values, j.identity) for j in jobs if j.identity is not None]
    if len({_canon(identity.get(field)) for _, identity in recorded}) < 2:
        return []
    return [
        key
        for key in swept
        if all(
            _index(values.get(key)) is not None and values.get(key) == identity.get(field)
            for values, identity in recorded
        )
    ]


def group_label(keys: Mapping[str, Any], group_keys: Sequence[str]) -> str:
    """``algo=a,lr=0.1`` (``?`` for a value the job's files do not give), or ``all``."""
    if not group_keys:
        return ALL
    return ",".join(f"{k}={show(keys[k]) if k in keys else UNKNOWN_VALUE}" for k in group_keys)


def _to_app_run(job: _Job, sweep: AppSweep) -> AppRun:
    """One job as a run of the sweep's groups (``sweep`` without its runs yet)."""
    identity, record = job.identity, job.record
    keys = {k: job.values[k] for k in sweep.group_keys if k in job.values}
    if identity is not None:
        replicate = _index(identity.get("replicate"))
        root = _index(identity.get("root"))
        crn = identity.get("crn")
        shared: str | None = _canon([identity.get("root"), identity.get("shared")])
    else:
        # The identity's rule: a replicate (root) that is not set, or no index, is 0.
        replicate = _index(job.values.get(sweep.replicate_key))
        if replicate is None and job.whole:
            replicate = 0
        root = (_index(job.values.get(sweep.root_key)) or 0) if sweep.root_key else 0
        crn, shared = None, None
    return AppRun(
        sweep=job.sweep,
        path=record.path,
        status=record.status,
        group=group_label(keys, sweep.group_keys),
        keys=keys,
        replicate=replicate,
        root=root,
        common_random_numbers=crn if isinstance(crn, bool) else None,
        shared=shared,
        values=_numbers(record.result) if record.status == "completed" else {},
        error=last_line(record.error),
    )


def read_app_sweep(sweep_dirs: Sequence[Path], *, replicate_key: str | None = None) -> AppSweep:
    """Every job directory of the sweeps (sweep order, then name order), grouped.

    ``replicate_key`` defaults to ``seed``, unless another swept key, and not ``seed``, is the
    recorded replicate index in every completed job (an app's ``Keys(replicate=...)``).
    """
    sweeps = unique_dirs(sweep_dirs)
    jobs = [_read_job(sweep, record) for sweep in sweeps for record in read_sweep(sweep)]
    swept = _swept(jobs)
    if replicate_key is None:
        candidates = _index_keys(jobs, swept, "replicate")
        replicate_key = (
            candidates[0]
            if len(candidates) == 1 and REPLICATE_KEY not in candidates
            else REPLICATE_KEY
        )
    roots = [k for k in _index_keys(jobs, swept, "root") if k != replicate_key]
    root_key = roots[0] if len(roots) == 1 else None
    group_keys = tuple(k for k in swept if k not in (replicate_key, root_key))
    shape = AppSweep(tuple(sweeps), (), group_keys, replicate_key, root_key, ())
    runs = tuple(_to_app_run(job, shape) for job in jobs)
    numeric = tuple(sorted({k for r in runs for k in r.values}))
    return AppSweep(tuple(sweeps), runs, group_keys, replicate_key, root_key, numeric)


def is_app_sweep(sweep_dirs: Sequence[Path]) -> bool:
    """Whether the sweeps hold another app's jobs, not (only) rlsweep's own agents'.

    A completed job whose result.json lacks the built-in agents' keys, or a failed one whose
    Hydra config names no agent and env, is another app's; a sweep with one is.
    """
    for sweep in unique_dirs(sweep_dirs):
        for record in map(read_job, iter_job_dirs(sweep)):  # job by job: the first decides
            if record.result is not None:
                if not all(k in record.result for k in BUILT_IN_KEYS):
                    return True
            elif (record.path / HYDRA_DIR / "config.yaml").is_file() and UNKNOWN in (
                record.agent,
                record.env,
            ):
                return True
    return False


# --------------------------------------------------------------------------------------------
# The metric, and the report's runs


def choose_metric(numeric: Sequence[str], requested: str | None = None) -> tuple[str | None, str]:
    """The value the statistics are computed on, and why that one.

    ``requested`` (``--metric``) if given; else ``return`` (a task that returns a plain
    number); else the only number returned; else the first in sorted order. Raises
    ValueError for a requested name that no completed job returned as a number.
    """
    names = sorted(numeric)
    listed = ", ".join(f"`{n}`" for n in names)
    if requested is not None:
        if names and requested not in names:
            raise ValueError(
                f"--metric {requested}: no completed job returned a number by that name "
                f"(the numbers returned: {', '.join(names)})"
            )
        return requested, "chosen with --metric"
    if not names:
        return None, "no completed job returned a number"
    if "return" in names:
        more = f" (the numbers returned: {listed})" if len(names) > 1 else ""
        return "return", f"the number the task function returned{more}"
    if len(names) == 1:
        return names[0], "the only number the task function returned"
    return names[
        0
    ], f"the first in sorted order of the numbers the task function returned: {listed}"


def to_runs(sweep: AppSweep, metric: str | None) -> list[Run]:
    """The report's runs: a group as the agent, the metric as the env, its value as the
    final return (None when the job returned no finite value by that name)."""
    out = []
    for r in sweep.runs:
        value = r.values.get(metric) if metric is not None else None
        out.append(
            Run(
                sweep=r.sweep,
                path=r.path,
                status=r.status,
                agent=r.group,
                env=metric if metric is not None else NO_METRIC,
                replicate=r.replicate,
                root=r.root,
                common_random_numbers=r.common_random_numbers,
                seed_fingerprint=None,
                final_return=value if value is not None and math.isfinite(value) else None,
                random_score=None,
                reference_score=None,
                error=r.error,
            )
        )
    return out
