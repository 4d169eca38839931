"""Results an older rlsweep recorded without config-group choices (:mod:`rlsweep.choices`).

Such a ``result.json`` holds the job's identity without its choices. It is this job's when
its identity, the choices left out, is the recorded one, and the choices Hydra recorded in
the job directory's ``.hydra/hydra.yaml`` are the job's: it is then recorded again with the
identity it has now (so that every reader, the report's groups included, sees its choices),
and the job is skipped as done. Otherwise it is a result of other settings, and the sweep
says so (:func:`rlsweep.sweep.plan.changed_message`): a directory without Hydra's record of
its choices cannot show that the job ran the option chosen now.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlsweep.choices import CHOICES_PATH, choices_in, job_choices
from rlsweep.identity import Identity, without_choices
from rlsweep.store import (
    HYDRA_DIR,
    RECORD_KEY,
    RESULT_FILE,
    atomic_write_json,
    recorded_choices,
    recorded_identity,
)

__all__ = ["is_legacy", "legacy_change", "record_choices"]


def is_legacy(recorded: dict[str, Any]) -> bool:
    """Whether a recorded identity (result.json's ``rlsweep.job``) holds no choices: an
    older rlsweep's record (or one of a job that had none)."""
    config = recorded.get("config")
    return isinstance(config, dict) and CHOICES_PATH[0] not in config


def legacy_change(directory: Path, identity: Identity, result: dict[str, Any]) -> str | None:
    """What keeps a result recorded without choices from being this job's (None: it is the
    job's, and is recorded again with ``identity``); "" when it is no such result."""
    recorded = recorded_identity(result)
    chosen = choices_in(identity.config)
    if recorded is None or not chosen or not is_legacy(recorded[1]):
        return ""
    if without_choices(identity).digest != recorded[0]:
        return ""  # other values too: said as for any other result
    then = recorded_choices(directory / HYDRA_DIR / "hydra.yaml")
    if then is None:
        return (
            "it was recorded before config-group choices were part of a job, and its "
            f".hydra/hydra.yaml, which would say which options it ran, is missing (now: "
            f"{', '.join(f'{g}={o}' for g, o in chosen.items())})"
        )
    ran = {g: o for g, o in job_choices(then).items() if g in chosen}
    if ran != chosen:
        shown = "; ".join(
            f"{g}: {ran.get(g, 'unset')!r} then, {o!r} now"
            for g, o in chosen.items()
            if ran.get(g) != o
        )
        return f"the config-group choices differ ({shown})"
    record_choices(directory, result, identity)
    return None


def record_choices(directory: Path, result: dict[str, Any], identity: Identity) -> None:
    """Write ``result.json`` again with ``identity`` (its choices) as the job's record."""
    record = dict(result)
    record[RECORD_KEY] = {
        **result[RECORD_KEY],
        "identity": identity.digest,
        "job": identity.to_json(),
    }
    atomic_write_json(directory / RESULT_FILE, record)
    result.clear()
    result.update(json.loads(json.dumps(record)))
