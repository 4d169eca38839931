"""Options of the submitit executors (``launcher=slurm`` and ``launcher=submitit_local``).

It lives in ``rlsweep`` rather than beside the plugin: Hydra's plugin scan executes the
plugin's modules a second time outside ``sys.modules``, and a config class from such a copy
cannot be pickled back from a worker. It is part of the launcher's structured config, so
its annotations stay evaluated (no postponed annotations).
"""

from dataclasses import dataclass, field


@dataclass
class SlurmOptions:
    # SLURM partition to submit to (null: the cluster's default partition).
    partition: str | None = None
    # Account to charge (sbatch --account).
    account: str | None = None
    # Quality of service (sbatch --qos).
    qos: str | None = None
    # Time limit of each job in minutes.
    timeout_min: int = 60
    # CPUs per task; null = the job's torch_threads (they agree by default).
    cpus_per_task: int | None = None
    # GPUs per node; each job gets its own GPU(s).
    gpus_per_node: int = 0
    # Memory per node in GB (null: the cluster's default).
    mem_gb: int | None = None
    # Node features required (sbatch --constraint).
    constraint: str | None = None
    # Nodes to avoid (sbatch --exclude).
    exclude: str | None = None
    # Jobs of one array running at once (null: no limit).
    array_parallelism: int | None = None
    # Shell lines run before each job (e.g. module load, source venv).
    setup: list[str] = field(default_factory=list)
    # Additional raw sbatch parameters, e.g. {"mail-type": "END"}.
    additional_parameters: dict[str, str] = field(default_factory=dict)
    # Where submitit keeps its pickles and logs; null = <sweep dir>/.submitit.
    submitit_folder: str | None = None
    # Times a job may be requeued after a time-out or preemption.
    max_num_requeue: int = 3
