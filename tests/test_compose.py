"""The fast composer gives exactly Hydra's own per-job composition."""

from __future__ import annotations

import pytest
from hydra._internal.callbacks import Callbacks
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.utils import create_config_search_path
from hydra.types import HydraContext, RunMode
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.rlsweep_launcher._compose import FastComposer
from rlsweep.errors import ConfigError
from rlsweep.paths import conf_dir


@pytest.fixture(scope="module")
def setup() -> tuple[ConfigLoaderImpl, DictConfig]:
    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(str(conf_dir())))
    master = loader.load_configuration(
        config_name="config",
        overrides=["hydra.launcher.n_jobs=2", "hydra/job_logging=disabled"],
        run_mode=RunMode.MULTIRUN,
    )
    return loader, master


def snapshot(cfg: DictConfig) -> tuple[object, ...]:
    return (
        OmegaConf.to_container(cfg, resolve=False),
        OmegaConf.is_struct(cfg),
        OmegaConf.is_readonly(cfg.hydra),
        OmegaConf.select(cfg, "hydra.job.override_dirname"),
    )


JOBS = [
    ["seed=3"],
    ["agent=a2c", "seed=0"],
    ["seed=1", "agent=a2c"],  # order of overrides is kept in hydra.overrides.task
    ["agent=a2c", "agent.learning_rate=0.01", "seed=2"],
    ["env=acrobot", "train.total_steps=5000", "name=x"],
    ["+extra=1", "seed=4"],
    ["++eval.episodes=3"],
    ["~seeding.common_random_numbers"],
    ["++env.kwargs={a: 1, b: [1, 2]}", "seed=5"],
    ["env=fault", "env.kwargs.fault_replicates=[1, 2]", "seed=1"],
    ["agent=ppo", "agent.clip_range_vf=0.2"],
]


def test_fast_composition_equals_hydra(setup: tuple[ConfigLoaderImpl, DictConfig]) -> None:
    loader, master = setup
    composer = FastComposer(HydraContext(config_loader=loader, callbacks=Callbacks()), master)
    for overrides in JOBS * 2:  # the second pass comes from the cache
        fast = composer.compose(overrides)
        slow = loader.load_sweep_config(master, list(overrides))
        assert snapshot(fast) == snapshot(slow), overrides
    # Jobs that differ only in values share one composition.
    assert len(composer.bases) == len(
        {tuple(o for o in j if o.startswith(("agent=", "env="))) for j in JOBS}
    )


def test_fast_composition_raises_hydras_errors(setup: tuple[ConfigLoaderImpl, DictConfig]) -> None:
    loader, master = setup
    composer = FastComposer(HydraContext(config_loader=loader, callbacks=Callbacks()), master)
    for bad in (["agent=nope"], ["+seed=1"]):
        with pytest.raises(Exception) as fast_error:
            composer.compose(bad)
        with pytest.raises(Exception) as slow_error:
            loader.load_sweep_config(master, bad)
        assert type(fast_error.value) is type(slow_error.value), bad


def test_a_misspelled_key_names_the_allowed_ones(
    setup: tuple[ConfigLoaderImpl, DictConfig],
) -> None:
    loader, master = setup
    composer = FastComposer(HydraContext(config_loader=loader, callbacks=Callbacks()), master)
    with pytest.raises(ConfigError, match="Did you mean 'learning_rate'") as err:
        composer.compose(["agent.lerning_rate=1e-3", "seed=0"])
    assert "Allowed keys in agent:" in str(err.value) and "gamma" in str(err.value)
    with pytest.raises(Exception, match="Could not override"):  # Hydra agrees it is wrong
        loader.load_sweep_config(master, ["agent.lerning_rate=1e-3"])
