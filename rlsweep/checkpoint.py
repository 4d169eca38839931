"""Job checkpoints: stop anywhere between iterations, resume bit for bit.

A checkpoint holds everything the rest of a job depends on:

- the agent's ``state_dict()``: networks, optimisers, normalisation statistics, replay
  buffer, its numpy Generator and step counters;
- every training sub-env, pickled (its dynamics state, its ``np_random``, the time
  limit's step count) and whether its next step is an autoreset; the vector env's
  action-space RNG;
- the process-global RNGs: Python's ``random``, numpy's global state, torch's generator;
- the job loop: env steps, the next evaluation, the metrics rows so far.

It is written at iteration boundaries, atomically (a temporary name, then a rename), every
``train.checkpoint_every_s`` seconds and when a stop is requested (SLURM's USR2 before the
time limit, or preemption). A job that finds a checkpoint of the same config in its
directory resumes from it; the finished job deletes it. The file is signed with the user's
key for the job's config (:mod:`rlsweep.trust`): one that is not this job's, not signed by
this user (planted by someone else who can write to the sweep directory, or written by an
rlsweep older than signatures) or damaged is never unpickled, and the job starts from
scratch, its log saying why.

The state is loaded with ``torch.load(..., weights_only=False)``, once the signature is
checked: ``weights_only=True`` refuses what it holds (numpy arrays and RNG states, the job
loop's dataclasses), and the sub-envs are pickles of their own, unpickled as they are
restored, so only the signature can keep a planted file from running code.

Evaluation needs no state: every evaluation resets its envs from the same fixed seeds.
:func:`state_fingerprint` hashes an agent's state bit for bit (result.json's
``state_sha256``), to compare runs without keeping their states.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rlsweep import trust
from rlsweep.errors import RLSweepError
from rlsweep.store import atomic_open

if TYPE_CHECKING:
    from typing import TypeAlias

    import gymnasium as gym

    # Sync and async vector envs both have ``call`` and ``set_attr`` (VectorEnv does not).
    VectorEnvWithCalls: TypeAlias = gym.vector.SyncVectorEnv | gym.vector.AsyncVectorEnv

FORMAT = 1

_stop_reason: str | None = None


def request_stop(reason: str) -> None:
    """Ask the running job to checkpoint and stop at its next iteration boundary.

    Safe to call from a signal handler: it only sets a flag.
    """
    global _stop_reason
    _stop_reason = reason


def stop_requested() -> str | None:
    """Why a stop was requested (None if it was not)."""
    return _stop_reason


def clear_stop() -> None:
    global _stop_reason
    _stop_reason = None


# ---------------------------------------------------------------- environments


class NotCheckpointable(RLSweepError):
    """The job's state cannot be saved (an env that cannot be pickled)."""


def capture_envs(envs: gym.vector.VectorEnv) -> dict[str, Any]:
    """The training vector env's state: each sub-env (wrapped in
    :class:`rlsweep.envs.Snapshot`) and the action space's RNG."""
    snapshots = cast("VectorEnvWithCalls", envs).call("rlsweep_snapshot")
    problems = [why for payload, _, why in snapshots if payload is None]
    if problems:
        raise NotCheckpointable(f"the env cannot be pickled ({problems[0]})")
    return {
        "sub_envs": [(payload, ended) for payload, ended, _ in snapshots],
        "action_space_rng": envs.action_space.np_random.bit_generator.state,
    }


def restore_envs(envs: gym.vector.VectorEnv, state: dict[str, Any]) -> None:
    """Put a freshly reset vector env back in the captured state."""
    cast("VectorEnvWithCalls", envs).set_attr("rlsweep_restore", list(state["sub_envs"]))
    envs.action_space.np_random.bit_generator.state = state["action_space_rng"]


# ---------------------------------------------------------------- the agent's state


def state_fingerprint(state: Any) -> str:
    """SHA-256 of every number in a (nested) state dict: equal iff bitwise equal."""
    import numpy as np
    import torch

    digest = hashlib.sha256()

    def feed(obj: Any) -> None:
        if isinstance(obj, dict):
            for key in sorted(obj, key=str):
                digest.update(str(key).encode())
                feed(obj[key])
        elif isinstance(obj, list | tuple):
            for item in obj:
                feed(item)
        elif isinstance(obj, torch.Tensor):
            digest.update(obj.detach().cpu().contiguous().numpy().tobytes())
        elif isinstance(obj, np.ndarray):
            digest.update(np.ascontiguousarray(obj).tobytes())
        else:
            digest.update(repr(obj).encode())

    feed(state)
    return digest.hexdigest()


# ---------------------------------------------------------------- the file


def config_digest(plain_config: dict[str, Any]) -> str:
    """What a checkpoint must match to be resumed: the job's computation-relevant config."""
    text = json.dumps(plain_config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def save(path: Path, state: dict[str, Any]) -> None:
    """Write the checkpoint, signed for the config ``state["config_sha256"]``, atomically:
    a reader sees the previous one or the new one."""
    import torch

    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **state}, buffer)
    signed = trust.sign(buffer.getvalue(), state["config_sha256"])
    with atomic_open(path, "wb") as f:
        f.write(signed)


def load(path: Path, digest: str) -> tuple[dict[str, Any] | None, str]:
    """``(state, "")`` if ``path`` holds a checkpoint of this config signed by this user,
    else ``(None, why)``; nothing of the file is unpickled before its signature is checked."""
    import torch

    if not path.is_file():
        return None, "no checkpoint"
    payload, why = trust.read_verified(path, digest, "a checkpoint of a different config")
    if payload is None:
        return None, why
    try:
        state = torch.load(io.BytesIO(payload), weights_only=False)
    except Exception as exc:  # signed, so ours: written by an rlsweep that torch cannot read
        return None, f"unreadable checkpoint ({type(exc).__name__}: {exc})"
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        return None, "checkpoint written by another rlsweep version"
    if state.get("config_sha256") != digest:
        return None, "checkpoint of a different config"
    return state, ""
