"""Options of the submitit executors (``launcher=slurm`` and ``launcher=submitit_local``).

It lives in ``rlsweep`` rather than beside the plugin: Hydra's plugin scan executes the
plugin's modules a second time outside ``sys.modules``, and a config class from such a copy
cannot be pickled back from a worker. It is part of the launcher's structured config, so
its annotations stay evaluated (no postponed annotations).
"""

import shutil
from dataclasses import dataclass, field

from rlsweep.errors import ConfigError

# The SLURM commands submitit uses: sbatch submits, srun runs the job in its allocation.
SLURM_COMMANDS = ("sbatch", "srun")


@dataclass
class SlurmOptions:
    # SLURM partition to submit to (null: the cluster's default partition).
    partition: str | None = None
    # Account to charge (sbatch --account; null: your default account).
    account: str | None = None
    # Quality of service (sbatch --qos; null: the default QOS).
    qos: str | None = None
    # Time limit of each job in minutes (sbatch --time; submitit_local: the job is killed).
    timeout_min: int = 60
    # CPUs per task; null = the job's torch_threads (they agree by default). The job's
    # thread caps (OMP_NUM_THREADS, ...) are set to this value.
    cpus_per_task: int | None = None
    # GPUs per node; each job gets its own GPU(s) (0: no GPU requested).
    gpus_per_node: int = 0
    # Memory per node in GB (sbatch --mem; null: the cluster's default).
    mem_gb: int | None = None
    # Node features required (sbatch --constraint).
    constraint: str | None = None
    # Nodes to avoid (sbatch --exclude).
    exclude: str | None = None
    # Jobs of one array running at once (null: no limit under SLURM; with submitit_local,
    # cores // cpus_per_task). A batch larger than the cluster's MaxArraySize is submitted
    # as several arrays, each with this limit.
    array_parallelism: int | None = None
    # Shell lines run before each job (e.g. module load, source venv).
    setup: list[str] = field(default_factory=list)
    # Additional raw sbatch parameters, e.g. {"mail-type": "END"}.
    additional_parameters: dict[str, str] = field(default_factory=dict)
    # Where submitit keeps its pickles and logs; null = <sweep dir>/.submitit. Each batch
    # writes into a fresh sub-folder <time stamp>/<SLURM job id>.
    submitit_folder: str | None = None
    # Times a job may be requeued after a time-out or preemption (submitit's
    # max_num_timeout; a preempted job is requeued and runs again from the start).
    max_num_requeue: int = 3

    def check(self, executor: str) -> None:
        """Refuse invalid values, and SLURM on a machine without it, before anything runs."""
        key = "hydra.launcher.slurm"
        # (option, its value, the least it may be, what null means: None if not allowed)
        minimums: list[tuple[str, float | None, int, str | None]] = [
            ("timeout_min", self.timeout_min, 1, None),
            ("cpus_per_task", self.cpus_per_task, 1, "the job's torch_threads"),
            ("gpus_per_node", self.gpus_per_node, 0, None),
            ("mem_gb", self.mem_gb, 1, "no request"),
            ("array_parallelism", self.array_parallelism, 1, "no limit"),
            ("max_num_requeue", self.max_num_requeue, 0, None),
        ]
        for name, value, least, null in minimums:
            if value is not None and value < least:
                nullable = f", or null ({null})" if null else ""
                raise ConfigError(f"{key}.{name} must be >= {least}{nullable}; got {value}.")
        if executor == "slurm":
            missing = [c for c in SLURM_COMMANDS if shutil.which(c) is None]
            if missing:
                raise ConfigError(
                    f"launcher=slurm needs SLURM's {' and '.join(missing)} on PATH, and this "
                    "machine has none: run the sweep on a cluster's login node, or start a "
                    "local test cluster with `sudo bash scripts/start-local-slurm.sh`; or run "
                    "here with launcher=submitit_local (submitit's local executor), "
                    "launcher=joblib (parallel workers) or launcher=serial. Nothing was started."
                )
