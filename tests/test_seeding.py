"""The seeding properties rlsweep exists for, each a test."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Hashable, Iterable
from itertools import combinations, product

import numpy as np
import pytest

from rlsweep.seeding import (
    DERIVATION_VERSION,
    JobSeeds,
    derive_job_seeds,
    key_words,
    leaf_seed,
    seed_sequence,
)

CARTPOLE: dict[str, object] = {"id": "CartPole-v1", "kwargs": {}, "max_episode_steps": None}
ACROBOT: dict[str, object] = {"id": "Acrobot-v1", "kwargs": {}, "max_episode_steps": None}
PPO: dict[str, object] = {"name": "ppo", "learning_rate": 1e-3}
A2C: dict[str, object] = {"name": "a2c", "learning_rate": 7e-4}


def seeds(
    replicate: int, env: dict[str, object] = CARTPOLE, agent: dict[str, object] = PPO, **kw: object
) -> JobSeeds:
    args: dict[str, object] = {
        "root": 0,
        "replicate": replicate,
        "env_identity": env,
        "agent_identity": agent,
        "n_train_envs": 8,
        "n_eval_episodes": 10,
    }
    args.update(kw)
    return derive_job_seeds(**args)  # type: ignore[arg-type]


def test_golden_values_pin_the_derivation() -> None:
    """Property 5: the derivation is versioned and these integers must never change."""
    assert DERIVATION_VERSION == 1
    s = seeds(0)
    assert s.python == 4551809660358705972
    assert s.torch == 3570513135
    assert s.train_envs[:2] == (10677211765494407802, 17027691134728436258)
    assert s.eval_episodes[0] == 1030869767803966810
    assert leaf_seed(0, {"purpose": "x"}) == 176761751917036292


def test_derivation_is_the_documented_scheme() -> None:
    """SeedSequence(entropy=root, spawn_key=SHA-256 of canonical JSON as 8 big-endian words)."""
    text = '{"purpose":"x","v":1}'
    digest = hashlib.sha256(text.encode()).digest()
    words = tuple(int.from_bytes(digest[i : i + 4], "big") for i in range(0, 32, 4))
    expected = np.random.SeedSequence(0, spawn_key=words).generate_state(1, np.uint64)[0]
    assert leaf_seed(0, {"purpose": "x"}) == int(expected)


def test_same_inputs_same_seeds_and_json_record() -> None:
    a, b = seeds(3), seeds(3)
    assert a == b
    record = a.to_json()
    assert record["root"] == 0 and record["replicate"] == 3 and record["version"] == 1
    assert record["seeds"]["train_envs"] == list(a.train_envs)


def test_prefix_stable_when_replicates_or_agents_are_added() -> None:
    """Property 2: growing range(4) to range(8), or adding an agent, changes nothing old."""
    small = {(r, a["name"]): seeds(r, agent=a) for r in range(4) for a in (PPO,)}
    large = {(r, a["name"]): seeds(r, agent=a) for r in range(8) for a in (PPO, A2C)}
    for key, value in small.items():
        assert large[key] == value


def test_identical_under_different_pythonhashseed() -> None:
    """Property 3: no dependence on Python's salted hash()."""
    code = (
        "from rlsweep.seeding import derive_job_seeds as d;"
        "s=d(root=7,replicate=2,env_identity={'id':'CartPole-v1'},agent_identity={'name':'ppo'},"
        "n_train_envs=4,n_eval_episodes=2);print(s.python,s.train_envs,s.eval_episodes)"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": str(h), "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for h in (0, 1, 12345)
    }
    assert len(outs) == 1


def _sweep(crn: bool) -> list[JobSeeds]:
    return [
        seeds(r, env=e, agent=a, common_random_numbers=crn)
        for r, e, a in product(range(8), (CARTPOLE, ACROBOT), (PPO, A2C))
    ]


def test_no_shared_leaf_seeds_except_common_random_numbers() -> None:
    """Property 4: leaves are unique, but for env-side sharing across agents under CRN."""
    owners: dict[int, set[tuple[object, ...]]] = {}
    for s in _sweep(crn=True):
        for name, value in s.leaves().items():
            env_side = name.startswith(("train_env", "eval_episode"))
            # Under CRN the env-side streams of one (replicate, env) are shared by agents.
            owner = (
                (s.replicate, s.env_identity["id"], name)
                if env_side
                else (s.replicate, s.env_identity["id"], s.agent_identity["name"], name)
            )
            owners.setdefault(value, set()).add(owner)
    assert all(len(o) == 1 for o in owners.values())
    # And CRN really shares: PPO and A2C see the same environments at the same replicate.
    assert seeds(5, agent=PPO).train_envs == seeds(5, agent=A2C).train_envs
    assert seeds(5, agent=PPO).eval_episodes == seeds(5, agent=A2C).eval_episodes
    assert seeds(5, agent=PPO).agent != seeds(5, agent=A2C).agent


def test_without_crn_every_leaf_is_unique() -> None:
    values = [v for s in _sweep(crn=False) for v in s.leaves().values()]
    assert len(values) == len(set(values))


def stream_overlaps(
    streams: Iterable[tuple[Hashable, int]], outputs: int = 4096
) -> set[tuple[Hashable, Hashable]]:
    """The pairs of different owners (in the order listed) whose streams share one of their
    first ``outputs`` raw draws (``np.random.default_rng(seed)``, as gymnasium and rlsweep's
    agents seed them); ``streams``: (owner, seed) pairs, one owner's stream counted once
    however often it is listed (common random numbers: a replicate's agents list the same
    env-side owners and seeds).

    Catches one seed given to two owners (gymnasium's ``seed + i`` sub-envs across
    replicates, ``root + i``) and a stream that is another's shifted by fewer than
    ``outputs`` draws, which a correlation test cannot.
    """
    listed = list(dict.fromkeys(streams))
    draws = np.concatenate(
        [np.random.default_rng(seed).bit_generator.random_raw(outputs) for _, seed in listed]
    )
    stream = np.repeat(np.arange(len(listed)), outputs)
    _, value, counts = np.unique(draws, return_inverse=True, return_counts=True)
    drawn_twice = counts[value] > 1
    sharing: dict[int, set[int]] = {}  # a draw seen more than once: the streams drawing it
    for v, i in zip(value[drawn_twice].tolist(), stream[drawn_twice].tolist(), strict=True):
        sharing.setdefault(v, set()).add(i)
    owners = [owner for owner, _ in listed]
    return {
        (owners[a], owners[b])
        for indices in sharing.values()
        for a, b in combinations(sorted(indices), 2)
        if owners[a] != owners[b]
    }


def _sweep_streams(crn: bool) -> list[tuple[Hashable, int]]:
    """Every leaf seed of a sweep with its owner: the job's, or, for an env-side stream
    under common random numbers, the (replicate, env)'s that the agents share."""
    streams: list[tuple[Hashable, int]] = []
    for s in _sweep(crn):
        for name, value in s.leaves().items():
            shared = crn and name.startswith(("train_env", "eval_episode"))
            agent = None if shared else s.agent_identity["name"]
            streams.append(((s.replicate, s.env_identity["id"], agent, name), value))
    return streams


def test_streams_do_not_overlap() -> None:
    """Property 4: the first 4,096 outputs of every stream never appear in another stream."""
    streams = _sweep_streams(crn=True)
    assert len(dict.fromkeys(streams)) == 32 * 5 + 16 * 18  # CRN: env-side streams shared
    assert stream_overlaps(streams) == set()
    assert stream_overlaps(_sweep_streams(crn=False)) == set()


def test_overlap_check_catches_naive_seed_plus_i() -> None:
    """The overlap check above fails gymnasium's reset(seed=int) -> seed + i: replicate r's
    sub-env i is replicate r + 1's sub-env i - 1. rlsweep's sub-env seeds pass it."""
    naive = [((r, i), r + i) for r in range(8) for i in range(8)]  # replicate r, sub-env i
    found = stream_overlaps(naive)
    assert ((0, 1), (1, 0)) in found and ((6, 7), (7, 6)) in found
    # Exactly the pairs the naive scheme collides: same r + i, different sub-env.
    assert found == {
        (a, b) for a, b in product(dict(naive), repeat=2) if a < b and sum(a) == sum(b)
    }
    derived = [((r, i), seed) for r in range(8) for i, seed in enumerate(seeds(r).train_envs)]
    assert len(derived) == len(naive) and stream_overlaps(derived) == set()


def test_keys_are_fixed_width_so_they_never_alias() -> None:
    """SeedSequence flattens ints to 32-bit words; our keys are always 8 words."""
    assert np.random.SeedSequence(0, spawn_key=(2**32,)).generate_state(2).tolist() == (
        np.random.SeedSequence(0, spawn_key=(0, 1)).generate_state(2).tolist()
    )
    assert len(key_words({"replicate": 2**32})) == len(key_words({"replicate": 0})) == 8
    assert leaf_seed(0, {"replicate": 2**32}) != leaf_seed(0, {"replicate": 0, "x": 1})


def test_root_changes_everything_and_is_validated() -> None:
    a, b = seeds(0), seeds(0, root=1)
    assert not set(a.leaves().values()) & set(b.leaves().values())
    with pytest.raises(ValueError, match="non-negative"):
        seed_sequence(-1, {})
    with pytest.raises(ValueError, match="replicate"):
        seeds(-1)


def test_seeds_are_python_ints_and_torch_seed_fits_32_bits() -> None:
    s = seeds(1)
    assert all(type(v) is int for v in s.leaves().values())
    assert 0 <= s.torch < 2**32


@pytest.mark.parametrize(
    ("overrides", "agent", "torch", "train_env"),
    [
        (["agent=ppo"], 14847340902453663883, 4026818937, 10677211765494407802),
        (
            ["agent=a2c", "env=pendulum", "seed=3"],
            11499367572087049032,
            2098999268,
            16309346925760519788,
        ),
        (["agent=dqn"], 5392246908503953972, 3580151829, 10677211765494407802),
        (
            ["agent=es", "env=mountaincar_continuous"],
            14854439733145046331,
            3107460805,
            9233152762235837452,
        ),
        (["+preset=ppo_acrobot"], 3966124345902582597, 1607384138, 14480647355414817277),
    ],
)
def test_shipped_jobs_keep_their_seeds_when_agents_gain_options(
    overrides: list[str], agent: int, torch: int, train_env: int
) -> None:
    """A job's seeds, pinned: values from before PPO and A2C gained gSDE's options. An
    option added without an entry in its Config's ADDED_LATER would change them."""
    from hydra import compose, initialize_config_dir

    from rlsweep.config import load_job_config
    from rlsweep.job import job_seeds
    from rlsweep.paths import conf_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        seeds = job_seeds(load_job_config(compose("config", overrides=overrides)))
    assert (seeds.agent, seeds.torch, seeds.train_envs[0]) == (agent, torch, train_env)


def test_an_option_at_another_value_than_its_neutral_one_is_part_of_the_identity() -> None:
    from rlsweep.agents.ppo import Config

    plain, sde = Config(), Config(use_sde=True)
    assert "use_sde" not in plain.identity() and sde.identity()["use_sde"] is True
    assert plain.identity()["learning_rate"] == plain.learning_rate


TORCH_IMPORTED_BY_ANOTHER_THREAD = """
import sys, threading, time
from rlsweep.identity import Identity
from rlsweep.seeding import Seeds, capture_global_rngs, seed_global_rngs
assert "torch" not in sys.modules
importer = threading.Thread(target=__import__, args=("torch",))
importer.start()
while "torch" not in sys.modules:  # torch's import has begun in the other thread
    time.sleep(0.0005)
seeds = Seeds(Identity(config={}, replicate=1, shared={"id": "x"}, root=3))
seed_global_rngs(seeds)  # torch partly initialised at this moment
import torch
print(torch.initial_seed(), seeds.seed("torch", bits=32), len(capture_global_rngs()["torch"]))
"""


def test_seeding_waits_for_a_torch_another_thread_is_importing() -> None:
    """Threading backend: one job's thread imports torch while another seeds its global
    RNGs. The seeding waits for the import and seeds torch (a partly initialised torch has
    no manual_seed yet: failed once in CI)."""
    out = subprocess.run(
        [sys.executable, "-c", TORCH_IMPORTED_BY_ANOTHER_THREAD],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[0] == out[1] and int(out[2]) > 0
