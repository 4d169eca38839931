"""Job config validation: memoised per section, yet every job is checked."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from rlsweep.config import JobConfig, load_job_config
from rlsweep.errors import ConfigError
from rlsweep.paths import conf_dir

pytestmark = pytest.mark.usefixtures("hydra_restore_singletons")


def job(*overrides: str) -> JobConfig:
    with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
        return load_job_config(compose("config", overrides=list(overrides)))


def test_jobs_sharing_sections_get_their_own_objects() -> None:
    a, b = job("seed=1"), job("seed=2")
    assert (a.seed, b.seed) == (1, 2)
    assert a.agent == b.agent and a.agent is not b.agent  # cached, but never shared
    a.agent.n_envs = 99
    assert job("seed=3").agent.n_envs == 8


def test_a_bad_value_is_refused_after_good_ones_were_cached() -> None:
    assert job("agent.gamma=0.9").agent.gamma == 0.9  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="gamma"):
        job("agent.gamma=1.5")
    with pytest.raises(ConfigError, match="seed must be a replicate index"):
        job("seed=-1")


def test_interpolations_are_resolved_per_job() -> None:
    """env=fault's replicate is ${seed}: sections differ by job through interpolation."""
    assert job("env=fault", "seed=4").env.kwargs["replicate"] == 4
    assert job("env=fault", "seed=5").env.kwargs["replicate"] == 5


def test_an_agent_by_dotted_path_alone_needs_its_own_config_group() -> None:
    """agent.name=mypkg.qlearning keeps the default group's (ppo's) settings: the error
    names the first of them and says where the agent's own settings go."""
    with pytest.raises(ConfigError) as info:
        job("agent.name=mypkg.qlearning")
    message = str(info.value)
    assert "Unknown config key 'agent.n_steps'" in message
    assert "agent=ppo" in message
    assert "own config group file" in message
    assert "conf/agent/<name>.yaml" in message and "--config-dir" in message
    assert "examples/mypkg/conf/agent/qlearning.yaml" in message
    assert "Did you mean" not in message  # not a misspelling of qlearning's n_envs


def test_a_misspelt_agent_key_is_still_reported_as_such() -> None:
    with pytest.raises(ConfigError, match=r"'agent\.gama'\. Did you mean 'gamma'\?"):
        job("+agent.gama=0.9")


def test_the_env_made_to_check_the_action_space_is_closed() -> None:
    """load_job_config makes the env once to read its action space, and closes it."""
    import gymnasium as gym

    from rlsweep.config import env_ids

    class Counted(gym.Env):
        action_space = gym.spaces.Discrete(2)
        observation_space = gym.spaces.Box(-1.0, 1.0, (3,))

        def __init__(self, **kwargs: object) -> None:
            self.closed = False
            made.append(self)

        def close(self) -> None:
            self.closed = True

    made: list[Counted] = []
    env_id = "tests/ClosedAfterTheCheck-v0"
    gym.register(env_id, entry_point=Counted)
    try:
        env_ids.env_action_kind.cache_clear()
        assert env_ids.env_action_kind(env_id) == "discrete"
        assert len(made) == 1 and made[0].closed
    finally:
        gym.registry.pop(env_id)
        env_ids.env_action_kind.cache_clear()
