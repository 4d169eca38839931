"""A job's ``result.json`` from what its task returned: the values, and under ``rlsweep`` the
identity of the job they were computed for, which keys were its replicate and root, and the
numerics fingerprint of the process that computed them (:mod:`rlsweep.numerics`)."""

from __future__ import annotations

import json
import logging
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


def result_values(value: Any) -> dict[str, Any]:
    """What a task returned, as ``result.json`` keeps it: a mapping's JSON values as they
    are, a number as ``{"return": x}``, anything else by its ``repr``."""

    def plain(x: Any) -> Any:
        try:
            json.dumps(x, allow_nan=True)
        except (TypeError, ValueError):
            return repr(x)
        return x

    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items() if str(k) != "rlsweep"}
    if isinstance(value, bool) or value is None:
        return {"return": value}
    if isinstance(value, int | float):
        return {"return": value}
    try:
        return {"return": float(value)}  # numpy and torch scalars
    except (TypeError, ValueError):
        return {"return": repr(value)}
