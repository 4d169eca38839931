"""A job directory's files as values: its JSON and YAML records, its config flattened to
dotted keys, the overrides Hydra recorded, the numbers its task returned.

Shared by the loader (:mod:`rlsweep.report.read`) and the summary; nothing here groups or
counts jobs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlsweep.store import HYDRA_DIR, RECORD_KEY, flatten, load_yaml

__all__ = [
    "OPT_IN_KEY",
    "canon",
    "flatten",
    "hydra_values",
    "index",
    "job_overrides",
    "load_yaml",
    "override_lines",
    "read_json",
    "returned_numbers",
    "show",
]

# The opt-in config group (``+rlsweep=joblib``): how jobs run, never a setting of a job.
OPT_IN_KEY = "rlsweep"


def canon(value: Any) -> str:
    """A value's text for comparisons (the same for 0.1 from YAML and from JSON)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def show(value: Any) -> str:
    """A config value as a label shows it: strings bare, the rest as JSON."""
    return value if isinstance(value, str) else canon(value)


def index(value: Any) -> int | None:
    """``value`` if it is an index (an int >= 0), as identities take replicates and roots."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``; None when absent, unreadable or not an object."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def override_value(text: str) -> Any:
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


def override_lines(job_dir: Path) -> list[tuple[str, str]]:
    """(key, value) of each ``key=value`` line of the job's ``.hydra/overrides.yaml``, the key
    as written (``+key``, ``~key``)."""
    lines = load_yaml(job_dir / HYDRA_DIR / "overrides.yaml")
    pairs = [str(line).partition("=") for line in (lines if isinstance(lines, list) else [])]
    return [(key, value) for key, sep, value in pairs if sep]


def job_overrides(job_dir: Path) -> dict[str, str]:
    """The job's settings as Hydra recorded its overrides, by key (``+``/``~`` removed):
    neither Hydra's own keys nor the opt-in ``rlsweep=...`` (how the job ran, not what it is)."""
    out = {}
    for written, value in override_lines(job_dir):
        key = written.lstrip("+~")
        if key and not key.startswith("hydra") and key != OPT_IN_KEY:
            out[key] = value
    return out


def hydra_values(job_dir: Path) -> tuple[dict[str, Any], bool]:
    """A job's config values from Hydra's record: ``.hydra/config.yaml`` (its whole config;
    interpolations left out), else ``.hydra/overrides.yaml`` (only what was overridden).
    The flag says whether the values are the whole config."""
    data = load_yaml(job_dir / HYDRA_DIR / "config.yaml")
    if isinstance(data, dict):
        data.pop("hydra", None)
        flat = flatten(data)
        return {k: v for k, v in flat.items() if not (isinstance(v, str) and "${" in v)}, True
    out: dict[str, Any] = {}
    for written, value in override_lines(job_dir):
        key = written.lstrip("+")
        if key and not written.startswith("~") and not key.startswith(("hydra", OPT_IN_KEY)):
            out[key] = override_value(value)
    return out, False


# How result.json writes the numbers JSON has no literal for (rlsweep.results.NON_FINITE).
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _number(value: Any) -> float | None:
    """A returned number as a float: an integer too large for one is an infinity of its sign,
    ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"`` are those; None for anything else."""
    if isinstance(value, str):
        return _NON_FINITE.get(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # 10**400: beyond any float
        return math.inf if value > 0 else -math.inf


def returned_numbers(result: Mapping[str, Any] | None) -> dict[str, float]:
    """The numbers a task function returned (its result.json without rlsweep's record), by
    name (NaN and infinities kept: a run without a finite value is counted apart)."""
    out: dict[str, float] = {}
    for key, value in (result or {}).items():
        number = _number(value) if key != RECORD_KEY else None
        if number is not None:
            out[str(key)] = number
    return out
