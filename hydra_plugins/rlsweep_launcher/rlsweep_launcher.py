"""The rlsweep launcher plugin: its config and a thin ``Launcher`` translating Hydra's calls
into rlsweep's engine (:mod:`rlsweep.launch`, :mod:`rlsweep.executors`).

Works for any Hydra app. Jobs run in-process (``executor: serial``), in worker processes
through joblib's loky (``executor: joblib``, the default), or through submitit (``slurm``,
``submitit_local``). Each job's overrides are checked and validated in the parent before
any job starts; a failing job never stops the others, and its full traceback lands in
``error.txt`` in its job directory.

Hydra's plugin scan imports this module in every Hydra app, so it stays light: no torch,
gymnasium, joblib or submitit imports here.
"""

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from rlsweep import resolvers
from rlsweep.launch.options import Executor, LauncherOptions

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override
    from hydra.core.utils import JobReturn

    from rlsweep.launch.core import Launch
    from rlsweep.launch.jobs import SweepJob
    from rlsweep.launch.replicates import Replicates


class RLSweepLauncherConf(LauncherOptions):
    """``hydra/launcher=rlsweep``: the launcher's options, declared once (a field and a
    comment each) in :class:`rlsweep.launch.options.LauncherOptions`, under the name Hydra's
    messages about the node show."""


# The options are frozen, their config node is not: Hydra merges overrides into it.
_node = OmegaConf.structured(RLSweepLauncherConf)
OmegaConf.set_readonly(_node, None)
ConfigStore.instance().store(group="hydra/launcher", name="rlsweep", node=_node, provider="rlsweep")

# The one-line opt-in for any Hydra app: ``defaults: [{rlsweep: joblib}, _self_]`` in its
# primary config (or ``+rlsweep=joblib`` on the command line) selects rlsweep's launcher
# with that executor and rlsweep's sweeper, and a stable sweep directory (multirun/<app>,
# so the same command resumes) with job directories named by their overrides.
for _executor in Executor:
    ConfigStore.instance().store(
        group="rlsweep",
        name=_executor.value,
        package="_global_",
        provider="rlsweep",
        node={
            "defaults": [
                # Trackers, under hydra.launcher.trackers (never an app's key):
                # rlsweep/trackers=tensorboard, rlsweep/trackers=[tensorboard,wandb,mlflow].
                {"/rlsweep/trackers": None},
                {"override /hydra/launcher": "rlsweep"},
                {"override /hydra/sweeper": "rlsweep"},
            ],
            "hydra": {
                "launcher": {"executor": _executor.value},
                "sweep": {
                    "dir": "multirun/${rlsweep.job_dir:${hydra.job.name}}",
                    "subdir": "${rlsweep.job_dir:${hydra.job.override_dirname}}",
                },
            },
        },
    )

resolvers.register()


class RLSweepLauncher(Launcher):
    def __init__(self, **node: Any) -> None:
        """Hydra makes the launcher with its node's keys (``hydra.launcher.*``) as keyword
        arguments: they are :class:`LauncherOptions` at once, checked now, before the sweep
        directory or anything is made."""
        from rlsweep.launch.replicates import Replicates

        self.options = LauncherOptions.of(node, "RLSweepLauncher.__init__()").checked()
        options = self.options
        self.replicates: "Replicates" = Replicates.create(
            options.replicates, options.objective, options.metric
        )
        self._launch: Optional["Launch"] = None

    def setup(
        self,
        *,
        hydra_context: HydraContext,
        task_function: TaskFunction,
        config: DictConfig,
    ) -> None:
        from rlsweep.launch.compose import FastComposer
        from rlsweep.launch.core import Launch
        from rlsweep.launch.jobs import LaunchContext

        composer = FastComposer(hydra_context, config)
        context = LaunchContext(hydra_context, task_function, config, composer, self.options.slurm)
        self._launch = Launch(context, self.options)

    @property
    def task_function(self) -> TaskFunction:
        return self.engine.context.task_function

    @property
    def engine(self) -> "Launch":
        if self._launch is None:
            raise RuntimeError("RLSweepLauncher used before Hydra called its setup()")
        return self._launch

    # The calls rlsweep's sweeper makes (it checks for each; Hydra's own sweepers make none).

    def jobs_elsewhere(self, jobs: int) -> bool:
        """Whether a launch of ``jobs`` jobs runs them in other processes (the sweep's
        process idle meanwhile)."""
        # A single job runs in a worker forked from the sweep's process: no thread (the
        # report's imports) may run there meanwhile, so the sweep says it runs here.
        return self.options.jobs_elsewhere and not self.options.forks_single_job(jobs)

    def prepare(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> None:
        """Check and validate every job of a batch now, before anything starts."""
        self.replicates.refuse_own_sweeper()
        self.engine.prepare(job_overrides, initial_job_idx)

    def refuse_twins(self) -> None:
        """Refuse the sweep when two of its jobs checked so far are the same job."""
        self.engine.refuse_twins()

    def prime(self, overrides: Sequence["Override"]) -> None:
        """The sweep's parsed overrides: their elements need not be parsed again per job."""
        self.replicates.refuse_own_sweeper()
        self.engine.context.composer.prime(overrides)

    def name_jobs_by(self, keys: Sequence[str]) -> None:
        """Name each job's directory by the values of ``keys``, the keys the sweep varies
        (``optim.lr=0.001,seed=3``), under rlsweep's hydra.sweep.subdir rule."""
        self.engine.name_jobs_by(keys)

    def job_keys(self, overrides: Sequence[str]) -> DictConfig:
        """A job's own keys (its config without ``hydra``), every override applied."""
        return self.engine.job_keys(overrides)

    def launcher_settings(self) -> dict[tuple[str, ...], str]:
        """Each set of config-group choices composed, with its launcher's settings."""
        return self.engine.context.composer.launcher_settings()

    def prepared_job(self, overrides: Sequence[str]) -> "SweepJob":
        """A job checked by ``prepare``: its directory and identity."""
        return self.engine.prepared[tuple(overrides)]

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence["JobReturn"]:
        return self.replicates.launch(self.engine, job_overrides, initial_job_idx)

    def launch_stream(
        self,
        job_overrides: Sequence[Sequence[str]],
        initial_job_idx: int,
        more: Callable[["JobReturn"], Sequence[Sequence[str]]],
    ) -> Sequence["JobReturn"]:
        """A streaming launch, for sweeps whose next jobs depend on earlier results.

        Runs the batch and, in the same launch, every job ``more`` releases: ``more`` is
        called once per job, from this thread, with its final JobReturn (after its retries;
        failed, timed-out and crashed jobs included), and returns the overrides of the jobs
        to start as soon as a worker is free (each checked by :meth:`prepare` first; none
        is fine). Returns when no job runs or waits and ``more`` released nothing more: the
        batch's JobReturns in input order, then the released jobs' in release order."""
        return self.engine.launch(job_overrides, initial_job_idx, more=more)
