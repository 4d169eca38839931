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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from rlsweep import resolvers
from rlsweep.executors.ray_options import RayOptions
from rlsweep.identity import Keys, KeySettings, key_settings
from rlsweep.launch.options import Backend, Executor, LauncherOptions, StartMethod
from rlsweep.search.settings import Objective
from rlsweep.slurm_options import SlurmOptions

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override
    from hydra.core.utils import JobReturn

    from rlsweep.launch.core import Launch
    from rlsweep.launch.jobs import SweepJob
    from rlsweep.launch.replicates import Replicates


@dataclass
class RLSweepLauncherConf:
    _target_: str = "hydra_plugins.rlsweep_launcher.rlsweep_launcher.RLSweepLauncher"
    # How jobs run: serial (in-process loop, for debugging), joblib (parallel workers),
    # slurm (SLURM job arrays), submitit_local (submitit's local executor) or ray (a Ray
    # cluster's nodes, one task per job).
    executor: Executor = Executor.joblib
    # Jobs run at once with executor=joblib (ray: handed to Ray at once); null = as many
    # as fit the cores (ray: the cluster's nodes).
    n_jobs: Optional[int] = None
    # Parallel backend for executor=joblib: loky, multiprocessing or threading.
    backend: Backend = Backend.loky
    # Process start method for backend=multiprocessing: spawn, forkserver or fork.
    start_method: StartMethod = StartMethod.spawn
    # Show the live progress line (done / failed / running / total, elapsed, ETA) on stderr.
    progress: bool = True
    # Seconds an idle loky worker stays alive, warm for the next batch or sweep.
    idle_worker_timeout: float = 300.0
    # Wall-time limit of one job in seconds (process backends), counted from when a
    # worker starts it: a job still running then is killed and marked timed out.
    # null = no limit.
    job_timeout_s: Optional[float] = None
    # Times a failed or crashed job is run again before it is marked failed (every
    # attempt is logged to attempts.jsonl in its directory). Timed-out jobs are not retried.
    retries: int = 0
    # GPUs each job gets (executor=joblib, submitit_local, slurm, ray): a whole number (1,
    # 2: each job its own devices) or a share 1/k of one (0.5, 0.25: k jobs to a GPU; not on
    # SLURM). Each job sees only its device(s) through CUDA_VISIBLE_DEVICES, and no more
    # jobs run at once than the shares allow. null = no GPU asked (jobs see what the
    # machine shows). Under ray, Ray's num_gpus: the nodes declare their GPUs.
    gpus_per_job: Optional[float] = None
    # The devices jobs share with gpus_per_job (CUDA_VISIBLE_DEVICES names: [0,1], or GPU
    # UUIDs); null = the GPUs this machine shows (CUDA_VISIBLE_DEVICES if set, else
    # nvidia-smi). Not on SLURM or Ray, which choose each job's devices.
    gpus: Optional[List[str]] = None
    # Which floating-point kernels jobs run (part of each job's identity): native (each
    # machine's fastest; numbers may differ between machines) or portable (the AVX2 kernels
    # of numpy, OpenBLAS, torch and MKL, pinned in every job process: the same bits on any
    # x86-64 CPU with AVX2). See rlsweep/numerics.py.
    numerics: str = "native"
    # Options of executor=slurm / submitit_local (see rlsweep/slurm_options.py).
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    # Options of executor=ray: the cluster (address) and ray.init's other arguments.
    ray: RayOptions = field(default_factory=RayOptions)
    # For Hydra's own sweepers (hydra/sweeper=optuna...), whose jobs are trials: each job
    # runs as this many jobs, the task's replicate key (seed) set to 0..replicates-1, and
    # returns one value, their aggregate. 1: each job runs once, as it is.
    replicates: int = 1
    # A trial's value from its replicates' results (replicates > 1): iqm, mean or lcb.
    objective: Objective = Objective.iqm
    # The result aggregated (a number the task returns); null: the task's main result.
    metric: Optional[str] = None
    # The config keys that play a part in a job's identity, named here with no code edit
    # (each null: the task's @rlsweep.task(keys=...) declaration, else the default):
    # identity.replicate=env.seed (the replicate index's key; default seed),
    # identity.replicate_value=derived|index (what the app reads there: the job's own
    # 31-bit seed, the default, or the index as swept), identity.root, identity.ignore,
    # identity.agent (agent-side keys, for common random numbers), identity.threads.
    identity: KeySettings = field(default_factory=KeySettings)
    # Trackers fed every row a job logs, by name, with their settings: chosen with
    # rlsweep/trackers=[tensorboard,wandb,mlflow] (the built-in app: logger=[...]).
    trackers: Optional[Dict[str, Any]] = field(default_factory=dict)


ConfigStore.instance().store(
    group="hydra/launcher", name="rlsweep", node=RLSweepLauncherConf, provider="rlsweep"
)

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


def _typed(kind: Any, node: Any) -> Any:
    """A nested options node as its dataclass (Hydra passes a DictConfig, or nothing)."""
    if isinstance(node, kind):
        return node
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(kind), node or {}))


class RLSweepLauncher(Launcher):
    def __init__(
        self,
        executor: "Executor | str" = "joblib",
        n_jobs: Optional[int] = None,
        backend: "Backend | str" = "loky",
        start_method: "StartMethod | str" = "spawn",
        progress: bool = True,
        idle_worker_timeout: float = 300.0,
        job_timeout_s: Optional[float] = None,
        retries: int = 0,
        gpus_per_job: Optional[float] = None,
        gpus: Optional[Sequence[Any]] = None,
        numerics: str = "native",
        slurm: "SlurmOptions | DictConfig | None" = None,
        ray: "RayOptions | DictConfig | None" = None,
        replicates: int = 1,
        objective: "Objective | str" = "iqm",
        metric: Optional[str] = None,
        trackers: Any = None,
        identity: Any = None,
    ) -> None:
        from rlsweep.launch.replicates import Replicates
        from rlsweep.trackers.settings import of_node

        # The submitit and Ray executors' options, typed (Hydra passes DictConfigs).
        self.slurm: SlurmOptions = _typed(SlurmOptions, slurm)
        self.options = LauncherOptions.create(
            executor=executor,
            n_jobs=n_jobs,
            backend=backend,
            start_method=start_method,
            progress=progress,
            idle_worker_timeout=idle_worker_timeout,
            job_timeout_s=job_timeout_s,
            retries=retries,
            gpus_per_job=gpus_per_job,
            gpus=gpus,
            slurm_gpus_per_node=self.slurm.gpus_per_node,
            numerics=numerics,
            ray=_typed(RayOptions, ray),
        )
        # Options are checked now, before the sweep directory or anything is made.
        self.slurm.check(self.options.executor)
        of_node(trackers)  # checked here, named by their key; each job reads its own
        key_settings(identity).apply(Keys())  # checked here; each job reads its own
        self.replicates: "Replicates" = Replicates.create(replicates, objective, metric)
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
        context = LaunchContext(hydra_context, task_function, config, composer, self.slurm)
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
