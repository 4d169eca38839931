"""The shipped presets compose with Hydra and validate as job configs."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from rlsweep.config import load_job_config
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
    with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
        cfg = compose("config", overrides=[f"+preset={preset}", "seed=3"])
    job = load_job_config(cfg)
    assert (job.agent.name, job.env.id, job.train.total_steps) == (agent, env_id, steps)
    assert job.seed == 3


def test_command_line_overrides_win_over_the_preset() -> None:
    with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
        cfg = compose("config", overrides=["+preset=ppo_acrobot", "agent.n_epochs=3"])
    job = load_job_config(cfg)
    assert job.agent.n_epochs == 3  # type: ignore[attr-defined]
    assert job.agent.normalize_obs and job.agent.normalize_reward  # type: ignore[attr-defined]
