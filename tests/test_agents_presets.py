"""The shipped presets compose with Hydra and validate as job configs."""

from __future__ import annotations

import pytest
from agent_cases import job_config

from rlsweep.paths import conf_dir

# initialize_config_dir sets Hydra's process-wide version base; restore Hydra's singletons
# after each test so that later tests (Hydra's launcher suites) see the default again.
pytestmark = pytest.mark.usefixtures("hydra_restore_singletons")

PRESETS = {
    "ppo_cartpole": ("ppo", "CartPole-v1", 100_000),
    "a2c_cartpole": ("a2c", "CartPole-v1", 500_000),
    "ppo_acrobot": ("ppo", "Acrobot-v1", 1_000_000),
    "a2c_acrobot": ("a2c", "Acrobot-v1", 500_000),
    "ppo_pendulum": ("ppo", "Pendulum-v1", 100_000),
    "dqn_cartpole": ("dqn", "CartPole-v1", 100_000),
    "es_mountaincar_continuous": ("es", "MountainCarContinuous-v0", 1_000_000),
}


def test_every_preset_file_is_listed() -> None:
    assert sorted(p.stem for p in (conf_dir() / "preset").glob("*.yaml")) == sorted(PRESETS)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_preset_selects_agent_env_and_budget(preset: str) -> None:
    agent, env_id, steps = PRESETS[preset]
    job = job_config([f"+preset={preset}", "seed=3"])
    assert (job.agent.name, job.env.id, job.train.total_steps) == (agent, env_id, steps)
    assert job.seed == 3


def test_command_line_overrides_win_over_the_preset() -> None:
    job = job_config(["+preset=ppo_acrobot", "agent.n_epochs=3"])
    assert job.agent.n_epochs == 3
    assert job.agent.normalize_obs and job.agent.normalize_reward
