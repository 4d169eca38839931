"""Per-job seed derivation: the reason rlsweep exists.

The ``seed`` a user sweeps is a *replicate index*, not an RNG seed. Every concrete seed a
job uses is a pure function of

    (root seed, replicate index, environment identity, agent identity, purpose, index)

computed with numpy's ``SeedSequence``: the root seed is the entropy and the rest is a
fixed-width spawn key (the SHA-256 of canonical JSON, as eight 32-bit words). Nothing
depends on Python's ``hash()``, the job number, the process, the launcher or the order in
which jobs run, so a job gets the same seeds serial, under joblib, or on SLURM, and adding
replicates or agents never changes the seeds of existing jobs.

Environment-side streams (training sub-envs, evaluation episodes) leave the agent out of
their key by default, so that replicate r of agent A and replicate r of agent B see the
same environments (common random numbers, for paired comparisons). Agent-side streams
(network initialisation, action sampling, minibatch order) always include the agent.

``DERIVATION_VERSION`` is part of every key; golden values in the tests pin it.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlsweep.identity import Identity, canonical_json
from rlsweep.threads import loaded

DERIVATION_VERSION = 1

# Purposes of the agent-side streams (key includes the agent identity).
AGENT_PURPOSES = ("python", "numpy_global", "torch", "agent", "action_space")
# Purposes of the environment-side streams (key includes the agent only without CRN).
ENV_PURPOSES = ("train_env", "eval_episode")


def key_words(key: Mapping[str, Any]) -> tuple[int, ...]:
    """A key as eight 32-bit words: fixed width, so no two keys alias in SeedSequence."""
    digest = hashlib.sha256(canonical_json(dict(key)).encode("ascii")).digest()
    return tuple(int.from_bytes(digest[i : i + 4], "big") for i in range(0, 32, 4))


def identity_digest(obj: Any) -> str:
    """Short stable fingerprint of a config section (for file names and reports)."""
    return hashlib.sha256(canonical_json(obj).encode("ascii")).hexdigest()[:16]


def seed_sequence(root: int, key: Mapping[str, Any]) -> np.random.SeedSequence:
    """The SeedSequence of one stream: root entropy, versioned fixed-width key."""
    if not isinstance(root, int) or isinstance(root, bool) or root < 0:
        raise ValueError(f"seeding.root must be a non-negative integer, got {root!r}")
    words = key_words({"v": DERIVATION_VERSION, **key})
    return np.random.SeedSequence(entropy=root, spawn_key=words)


def leaf_seed(root: int, key: Mapping[str, Any]) -> int:
    """A 64-bit Python int for one consumer (gymnasium rejects numpy integers)."""
    return int(seed_sequence(root, key).generate_state(1, np.uint64)[0])


@dataclass(frozen=True)
class JobSeeds:
    """Every concrete seed one job uses, and the keys they came from."""

    root: int
    replicate: int
    common_random_numbers: bool
    env_identity: dict[str, Any]
    agent_identity: dict[str, Any]
    python: int  # random.seed
    numpy_global: int  # np.random.seed, as two 32-bit words
    torch: int  # torch.manual_seed (32 bits: the CPU generator keeps only those)
    agent: int  # the agent's own numpy Generator
    action_space: int  # the training vector env's action space (a stream apart from the env's)
    train_envs: tuple[int, ...]  # one per training sub-env, reset(seed=[...])
    eval_episodes: tuple[int, ...]  # one per evaluation episode, the same at every evaluation

    def to_json(self) -> dict[str, Any]:
        """What the job writes to seeds.json."""
        return {
            "version": DERIVATION_VERSION,
            "root": self.root,
            "replicate": self.replicate,
            "common_random_numbers": self.common_random_numbers,
            "env_identity": self.env_identity,
            "agent_identity_sha256": identity_digest(self.agent_identity),
            "seeds": {
                "python": self.python,
                "numpy_global": self.numpy_global,
                "torch": self.torch,
                "agent": self.agent,
                "action_space": self.action_space,
                "train_envs": list(self.train_envs),
                "eval_episodes": list(self.eval_episodes),
            },
        }

    def leaves(self) -> dict[str, int]:
        """Every leaf seed by a unique name (for overlap checks)."""
        out = {p: int(getattr(self, p)) for p in AGENT_PURPOSES}
        out.update({f"train_env[{i}]": s for i, s in enumerate(self.train_envs)})
        out.update({f"eval_episode[{i}]": s for i, s in enumerate(self.eval_episodes)})
        return out


def stream_key(
    *,
    replicate: int,
    env_identity: Mapping[str, Any],
    agent_identity: Mapping[str, Any] | None,
    purpose: str,
    index: int = 0,
) -> dict[str, Any]:
    """The key of one stream; ``agent_identity`` None means shared across agents (CRN)."""
    key: dict[str, Any] = {
        "replicate": replicate,
        "env": dict(env_identity),
        "purpose": purpose,
        "index": index,
    }
    if agent_identity is not None:
        key["agent"] = dict(agent_identity)
    return key


class Seeds:
    """The seeds of one job, for named purposes: a pure function of its identity.

    A stream's key is (root, replicate, purpose, index, the identity's shared values, and
    its agent-side values unless the stream is ``shared`` and common random numbers are on):
    the same integers in any process, under any launcher, in any order.

    >>> seeds = Seeds(identity)                     # or rlsweep.current().seeds
    >>> seeds.seed("env")                           # a 64-bit int
    >>> seeds.seeds("train_env", 8, shared=True)    # one per sub-env, never seed + i
    >>> seeds.generator("policy")                   # a numpy Generator
    """

    def __init__(self, identity: Identity) -> None:
        self.identity = identity

    def sequence(
        self, purpose: str, index: int = 0, *, shared: bool = False
    ) -> np.random.SeedSequence:
        """The SeedSequence of one stream (spawn from it for more)."""
        agent = None if shared and self.identity.crn else self.identity.agent
        key = stream_key(
            replicate=self.identity.replicate,
            env_identity=self.identity.shared,
            agent_identity=agent,
            purpose=purpose,
            index=index,
        )
        return seed_sequence(self.identity.root, key)

    def seed(self, purpose: str, index: int = 0, *, shared: bool = False, bits: int = 64) -> int:
        """A Python int of ``bits`` (31, 32 or 64) bits: torch's CPU generator keeps 32;
        31 leave room for an app's ``seed + i`` and for signed 32-bit consumers."""
        if bits not in (31, 32, 64):
            raise ValueError(f"bits must be 31, 32 or 64, got {bits}")
        value = int(self.sequence(purpose, index, shared=shared).generate_state(1, np.uint64)[0])
        return value & ((1 << bits) - 1)

    def seeds(self, purpose: str, n: int, *, shared: bool = False) -> list[int]:
        """``n`` seeds of one purpose (index 0 to n - 1), e.g. one per sub-environment."""
        return [self.seed(purpose, i, shared=shared) for i in range(n)]

    def generator(
        self, purpose: str, index: int = 0, *, shared: bool = False
    ) -> np.random.Generator:
        """A numpy Generator on its own stream."""
        return np.random.default_rng(self.sequence(purpose, index, shared=shared))


def derive_job_seeds(
    *,
    root: int,
    replicate: int,
    env_identity: Mapping[str, Any],
    agent_identity: Mapping[str, Any],
    n_train_envs: int,
    n_eval_episodes: int,
    common_random_numbers: bool = True,
) -> JobSeeds:
    """Derive all seeds of a built-in agent's job. Pure: same inputs, same integers."""
    if replicate < 0:
        raise ValueError(f"seed (the replicate index) must be >= 0, got {replicate}")
    seeds = Seeds(
        Identity(
            config={},
            replicate=replicate,
            shared=dict(env_identity),
            agent=dict(agent_identity),
            root=root,
            crn=common_random_numbers,
        )
    )
    return JobSeeds(
        root=root,
        replicate=replicate,
        common_random_numbers=common_random_numbers,
        env_identity=dict(env_identity),
        agent_identity=dict(agent_identity),
        python=seeds.seed("python"),
        numpy_global=seeds.seed("numpy_global"),
        torch=seeds.seed("torch", bits=32),
        agent=seeds.seed("agent"),
        action_space=seeds.seed("action_space"),
        train_envs=tuple(seeds.seeds("train_env", n_train_envs, shared=True)),
        eval_episodes=tuple(seeds.seeds("eval_episode", n_eval_episodes, shared=True)),
    )


def seed_global_rngs(seeds: Seeds) -> None:
    """Seed Python's ``random``, numpy's global state and torch (if imported) from the
    job's own streams (purposes ``python``, ``numpy_global`` and ``torch``). A torch
    another job's thread is importing right now (threading backend) is waited for, not
    seeded half-initialised.

    Called first thing in every job, so that nothing a worker ran before (loky reuses
    workers) or inherited by fork can leak into this job.
    """
    random.seed(seeds.seed("python"))
    numpy_global = seeds.seed("numpy_global")
    np.random.seed([numpy_global & 0xFFFFFFFF, numpy_global >> 32])
    torch = loaded("torch")
    if torch is not None:
        torch.manual_seed(seeds.seed("torch", bits=32))


def capture_global_rngs() -> dict[str, Any]:
    """Python's, numpy's global and (if imported) torch's RNG states, for a checkpoint."""
    torch = loaded("torch")
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": None if torch is None else torch.get_rng_state(),
    }


def restore_global_rngs(state: dict[str, Any]) -> None:
    """Put back what :func:`capture_global_rngs` returned."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch = loaded("torch")
    if torch is not None and state.get("torch") is not None:
        torch.set_rng_state(state["torch"])
