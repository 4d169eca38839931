"""Every agent (tests/agent_cases.py: PPO and A2C, with gSDE and normalisation, DQN's
variants, ES, the SB3 adapter) is a function of its seeds: same seeds, bitwise-equal
runs; a checkpoint resumes bit for bit; a saved state is a snapshot; sync and async
vector envs train alike."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest
import torch
from agent_cases import (
    BY_ID,
    CASES,
    Case,
    assert_replays_identically,
    assert_same_global_rngs,
    fingerprint,
    global_rngs,
    parameters,
    same,
)

from rlsweep.checkpoint import state_fingerprint

# Agents train with one torch thread, as jobs do by default (see conftest).
pytestmark = pytest.mark.usefixtures("one_torch_thread")
IDS = [case.id for case in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_same_seeds_give_bitwise_equal_runs_and_other_seeds_differ(case: Case) -> None:
    """The process-global generators are not reseeded between the runs (building a
    network may advance them): equal runs show that nothing depends on them, and training
    does not even draw from them."""
    runs = []
    for seed in (0, 0, 1):
        agent, envs = case.make(seed)
        before = global_rngs()
        infos = [agent.train_iteration() for _ in range(case.iterations)]
        assert_same_global_rngs(before)
        returns = [i.episode_returns for i in infos]
        runs.append((fingerprint(agent), parameters(agent), returns, infos[-1].stats))
        envs.close()
    assert runs[0][0] == runs[1][0]
    assert same(runs[0][1], runs[1][1])
    assert runs[0][2] == runs[1][2]
    np.testing.assert_equal(runs[0][3], runs[1][3])
    assert not same(runs[0][1], runs[2][1])
    if case.module.__name__.endswith("sb3"):
        assert runs[0][2][0]  # episodes ended in the first iteration: returns compared


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_checkpoint_restore_continues_bit_for_bit(case: Case) -> None:
    """N iterations, state_dict, N more; against a new agent (other seeds, other global
    generators' states) that loads the state on a copy of the envs: identical returns,
    stats, parameters and state, then actions."""
    agent, envs = case.make(3)
    for _ in range(case.iterations):
        agent.train_iteration()
    env_copy = copy.deepcopy(envs)
    state = copy.deepcopy(agent.state_dict())
    case.check_state(state)
    continued = [agent.train_iteration() for _ in range(case.iterations)]

    # Another agent trains in between, from other global generators' states: a restored
    # agent need not be the first of its process.
    random.seed(99)
    np.random.seed(99)
    torch.manual_seed(99)
    fresh, fresh_envs = case.make(99, env_seed=7)
    fresh.train_iteration()
    fresh_envs.close()
    restored = case.restore(env_copy, state)
    assert state_fingerprint(restored.state_dict()) == state_fingerprint(state)
    replayed = [restored.train_iteration() for _ in range(case.iterations)]

    assert same(parameters(agent), parameters(restored))
    assert fingerprint(agent) == fingerprint(restored)
    assert_replays_identically(agent, restored, continued, replayed, envs)
    assert continued[-1].stats  # the update's losses and diagnostics were compared
    if case.env_id == "CartPole-v1":  # short episodes: returns were compared
        assert sum(len(i.episode_returns) for i in replayed) > 0
    envs.close()
    env_copy.close()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_state_dict_is_a_snapshot(case: Case) -> None:
    """A saved state does not change when the agent trains on, and the agent's does."""
    agent, envs = case.make(0)
    for _ in range(2):
        agent.train_iteration()
    state = agent.state_dict()
    before = state_fingerprint(copy.deepcopy(state))
    agent.train_iteration()
    assert state_fingerprint(state) == before
    assert fingerprint(agent) != before
    envs.close()


# One process per sub-env (spawned): PPO with gSDE, DQN (with 3-step returns), ES.
ASYNC = ["ppo-sde-freq4", "dqn-polyak", "dqn-3-step", "es-continuous"]


@pytest.mark.parametrize("case", [BY_ID[i] for i in ASYNC], ids=ASYNC)
def test_sync_and_async_vector_envs_train_identically(case: Case) -> None:
    prints = []
    for mode in ("sync", "async"):
        agent, envs = case.make(0, vectorization=mode)
        for _ in range(2):
            agent.train_iteration()
        prints.append(fingerprint(agent))
        envs.close()
    assert prints[0] == prints[1]
