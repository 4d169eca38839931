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
