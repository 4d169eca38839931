"""The code a completed job ran, against the app's code now (:mod:`rlsweep.code`).

Every ``result.json`` records the fingerprint of the code that computed it. On a resume:

- by default the code is not part of a job: a completed job that ran other code is kept,
  and the sweep says how many did (:func:`ran_other_code`), so that a group mixing two
  versions of the code never goes unsaid (the report flags it too);
- under ``hydra.launcher.identity.code=true`` the code's digest is part of each identity:
  a completed job whose record differs from the job now in its code alone is *stale*
  (:func:`is_stale`) and runs again, from scratch; one recorded with the setting off,
  whose recorded fingerprint is the code's now, is the same job (:func:`same_but_code_field`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from rlsweep.code import code_text
from rlsweep.identity import Identity, canonical_json
from rlsweep.store import RECORD_KEY, recorded_identity

__all__ = ["is_stale", "ran_other_code", "recorded_code", "same_but_code_field"]


def recorded_code(result: Any) -> dict[str, Any] | None:
    """The code fingerprint a result.json recorded (None: none)."""
    meta = result.get(RECORD_KEY) if isinstance(result, dict) else None
    code = meta.get("code") if isinstance(meta, dict) else None
    return code if isinstance(code, dict) else None


def _rest_equal(identity: Identity, result: Any) -> tuple[bool, str | None]:
    """Whether a result's recorded identity is ``identity`` but for its code, and the code
    digest it ran (its identity's, else its recorded fingerprint's)."""
    recorded = recorded_identity(result) if isinstance(result, dict) else None
    if recorded is None:
        return False, None
    rest = {k: v for k, v in recorded[1].items() if k != "code"}
    digest = hashlib.sha256(canonical_json(rest).encode("ascii")).hexdigest()
    code = recorded[1].get("code") or (recorded_code(result) or {}).get("digest")
    return digest == dataclasses.replace(identity, code=None).digest, code


def is_stale(identity: Identity, result: Any) -> bool:
    """Whether a completed job, its code part of its identity, ran other code than now."""
    if identity.code is None:
        return False
    equal, code = _rest_equal(identity, result)
    return equal and code != identity.code


def same_but_code_field(identity: Identity, result: Any) -> bool:
    """Whether a result recorded without the code in its identity is this job's (its code
    part of the identity now): the same values, and a recorded fingerprint of this code."""
    if identity.code is None:
        return False
    equal, code = _rest_equal(identity, result)
    return equal and code == identity.code


def ran_other_code(results: list[Any], now: dict[str, Any], rerun_all: str) -> str | None:
    """A line saying how many completed jobs kept ran other code than ``now``, or None."""
    other = [
        code
        for code in (recorded_code(r) for r in results)
        if code is not None and code.get("digest") != now.get("digest")
    ]
    if not other:
        return None
    then = sorted({code_text(c) for c in other})
    return (
        f"[rlsweep] {len(other)} of the {len(results)} completed jobs kept ran other code "
        f"than the app's now ({', '.join(then[:3])}{', ...' if len(then) > 3 else ''} then; "
        f"{code_text(now)} now): their results are kept, and the report flags each group "
        "that mixes them. hydra.launcher.identity.code=true runs jobs again when the code "
        f"changes; {rerun_all} runs everything again."
    )
