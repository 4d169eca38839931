"""A job's ``result.json`` from what its task returned: the values, and under ``rlsweep`` the
identity of the job they were computed for, which keys were its replicate and root, and the
numerics fingerprint of the process that computed them (:mod:`rlsweep.numerics`)."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlsweep.identity import Identity, Keys
from rlsweep.numerics import fingerprint
from rlsweep.store import RESULT_FILE, recorded_identity, write_record

log = logging.getLogger(__name__)


def write_result(
    directory: Path,
    identity: Identity,
    value: Any,
    keys: Keys,
    *,
    gpus: dict[str, Any] | None = None,
    code: dict[str, Any] | None = None,
) -> None:
    """Write the job's ``result.json`` from its task's return value ``value`` (a result.json
    the task wrote itself is kept as ``result.app.json``), with the GPUs it ran on, if any,
    the numerics fingerprint of this process, which computed it, and the fingerprint of the
    code it ran (rlsweep.code: where and how it ran; part of its identity only under
    ``hydra.launcher.identity.code``)."""
    path = directory / RESULT_FILE
    if path.is_file() and not _is_record(path):
        kept = path.with_name("result.app.json")
        path.replace(kept)
        log.warning(
            f"the task wrote its own {RESULT_FILE}, the name of rlsweep's record of a "
            f"finished job: it is kept as {kept.name}. Return the values instead."
        )
    write_record(
        directory,
        result_values(value),
        identity,
        {"replicate": keys.replicate, "root": keys.root},
        gpus=gpus,
        numerics=fingerprint(identity.numerics),
        code=code,
    )


def _is_record(path: Path) -> bool:
    """Whether ``path`` is a result.json rlsweep wrote (one holding a job's identity)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and recorded_identity(data) is not None


# How result.json writes a number JSON has no literal for (as JSON mappings of protobuf and
# others write them): every JSON reader reads the file.
NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _json_number(x: float) -> float | str:
    return x if math.isfinite(x) else NON_FINITE[repr(float(x))]


def _scalar(x: Any) -> Any:
    """A numpy or torch scalar (``np.float32(2.0)``, a 0-d tensor) as the Python number it
    holds; anything else as it is."""
    item = getattr(x, "item", None)
    if item is None or isinstance(x, str | bytes) or getattr(x, "shape", ()) != ():
        return x
    try:
        value = item()
    except (TypeError, ValueError, RuntimeError):
        return x
    return value if isinstance(value, bool | int | float) else x


def result_values(value: Any) -> dict[str, Any]:
    """What a task returned, as ``result.json`` keeps it: a mapping's JSON values as they
    are, a number as ``{"return": x}``, anything else by its ``repr``; NaN and infinities as
    the strings ``NaN``, ``Infinity``, ``-Infinity`` (a file any JSON reader reads)."""

    def finite(x: Any) -> Any:
        if isinstance(x, float):
            return _json_number(x)
        if isinstance(x, list | tuple):
            return [finite(v) for v in x]
        if isinstance(x, Mapping):
            return {k: finite(v) for k, v in x.items()}
        return x

    def plain(x: Any) -> Any:
        x = _scalar(x)
        try:
            json.dumps(x)
        except (TypeError, ValueError):
            return repr(x)
        return finite(x)

    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items() if str(k) != "rlsweep"}
    if isinstance(value, bool) or value is None:
        return {"return": value}
    if isinstance(value, int | float):
        return {"return": plain(value)}
    try:
        return {"return": plain(float(value))}  # numpy and torch scalars
    except (TypeError, ValueError):
        return {"return": repr(value)}
