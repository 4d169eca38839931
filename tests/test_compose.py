"""The fast composer gives exactly Hydra's own per-job composition."""

from __future__ import annotations

import pytest
from hydra._internal.callbacks import Callbacks
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.utils import create_config_search_path
from hydra.types import HydraContext, RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from rlsweep.errors import ConfigError
from rlsweep.launch.compose import FastComposer
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
        fast = composer.plan(overrides)[0].compose()
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
            composer.plan(bad)[0].compose()
        with pytest.raises(Exception) as slow_error:
            loader.load_sweep_config(master, bad)
        assert type(fast_error.value) is type(slow_error.value), bad


def test_a_misspelled_key_names_the_allowed_ones(
    setup: tuple[ConfigLoaderImpl, DictConfig],
) -> None:
    loader, master = setup
    composer = FastComposer(HydraContext(config_loader=loader, callbacks=Callbacks()), master)
    with pytest.raises(ConfigError, match="Did you mean 'learning_rate'") as err:
        composer.plan(["agent.lerning_rate=1e-3", "seed=0"])
    assert "Allowed keys in agent:" in str(err.value) and "gamma" in str(err.value)
    with pytest.raises(Exception, match="Could not override"):  # Hydra agrees it is wrong
        loader.load_sweep_config(master, ["agent.lerning_rate=1e-3"])


def composer_for(
    setup: tuple[ConfigLoaderImpl, DictConfig], overrides: list[str] | None = None
) -> tuple[FastComposer, ConfigLoaderImpl, DictConfig]:
    loader, master = setup
    if overrides is not None:  # a master config with other sweep settings
        master = loader.load_configuration(
            config_name="config", overrides=overrides, run_mode=RunMode.MULTIRUN
        )
    return (
        FastComposer(HydraContext(config_loader=loader, callbacks=Callbacks()), master),
        loader,
        master,
    )


@pytest.mark.parametrize(
    ("subdir", "sweep_dir", "by_rule"),
    [
        (None, None, True),  # rlsweep's: ${rlsweep.job_dir:${hydra.job.override_dirname}}
        ("${hydra.job.override_dirname}", None, True),
        ("${hydra.job.num}", None, False),  # Hydra's default
        ("${hydra.job.id}_${hydra.job.override_dirname}", None, False),
        ("seed_${seed}/${agent.name}", None, False),  # the job's own keys
        ("${hydra:runtime.choices.agent}_${hydra.job.num}", None, False),  # the hydra resolver
        ("${hydra.launcher.n_jobs}/${hydra.job.num}", None, False),  # outside the view
        # The sweep directory: what a job sets (name=x in JOBS), a key of the group
        # choice, the app's name and the clock qualify; a swept key, the job's number,
        # the hydra resolver and an interpolated key do not.
        (None, "out/${name}/${agent.name}_${hydra.job.name}", True),
        (None, "out/${now:%Y}/${rlsweep.job_dir:${name}}", True),
        (None, "out/${seed}", True),  # seed=... read: resolved once per value
        (None, "out/${hydra.job.num}", False),
        (None, "out/${hydra:runtime.choices.agent}", False),
        (None, "out/${env.kwargs}", False),  # not a plain value
    ],
)
def test_a_jobs_directory_is_the_one_hydra_resolves(
    setup: tuple[ConfigLoaderImpl, DictConfig],
    subdir: str | None,
    sweep_dir: str | None,
    by_rule: bool,
) -> None:
    """Recipe.directory is where Hydra's run_job writes: from a rule shared by the base's
    jobs (compose.Directories) when it applies, else from the job's own config."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.utils import setup_globals

    from rlsweep.launch.compose import job_dir_of

    setup_globals()  # registers the ${hydra:...} resolver, as Hydra's main does
    extra = [] if subdir is None else [f"hydra.sweep.subdir='{subdir}'"]
    extra += [] if sweep_dir is None else [f"hydra.sweep.dir='{sweep_dir}'"]
    composer, loader, master = composer_for(setup, ["hydra.launcher.n_jobs=2", "name=dirs", *extra])
    for idx, overrides in enumerate(JOBS):
        recipe, _ = composer.plan(overrides)
        assert (recipe.directories is not None) == by_rule, overrides
        slow = loader.load_sweep_config(master, list(overrides))
        with open_dict(slow):
            slow.hydra.job.id = f"{slow.hydra.job.name}_{idx}"
            slow.hydra.job.num = idx
        assert snapshot(recipe.compose(idx)) == snapshot(slow), overrides
        HydraConfig.instance().set_config(slow)  # what run_job resolves with
        expected = job_dir_of(slow)
        HydraConfig.instance().set_config(master)  # what the parent has set
        assert recipe.directory(idx) == expected, (subdir, overrides)


def test_primed_sweep_elements_equal_parsed_ones(
    setup: tuple[ConfigLoaderImpl, DictConfig],
) -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.rlsweep_launcher.rlsweep_sweeper import RLSweepSweeper

    loader, _ = setup
    parser = OverridesParser.create(config_loader=loader)
    sweeps = parser.parse_overrides(
        [
            "seed=range(3)",
            "agent.learning_rate=1e-3,0.0003,2.5e-4",
            "agent.normalize_obs=true,false",
            "+extra=-1,0,7",
            "env.id=CartPole-v1,'Acrobot-v1'",  # strings are left to the parser
            "agent=a2c,ppo",
            "train.total_steps=5000",  # not a sweep
        ]
    )
    primed, _, _ = composer_for(setup)
    primed.prime(sweeps)
    fresh, _, _ = composer_for(setup)
    lines = [line for job in RLSweepSweeper.split_arguments(sweeps, None)[0] for line in job]
    recorded = [line for line in set(lines) if line in primed._parsed]
    assert len(recorded) == 3 + 3 + 2 + 3  # every numeric and bool element
    for line in set(lines):
        assert primed.parse([line]) == fresh.parse([line]), line
