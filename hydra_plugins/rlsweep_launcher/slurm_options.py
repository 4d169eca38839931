"""Options of the submitit executors (``launcher=slurm`` and ``launcher=submitit_local``).

No ``from __future__ import annotations`` here: Hydra's plugin scan executes this package's
modules outside ``sys.modules``, where postponed annotations break dataclasses.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional


@dataclass
class SlurmOptions:
    # SLURM partition to submit to (null: the cluster's default partition).
    partition: Optional[str] = None
    # Account to charge (sbatch --account).
    account: Optional[str] = None
    # Quality of service (sbatch --qos).
    qos: Optional[str] = None
    # Time limit of each job in minutes.
    timeout_min: int = 60
    # CPUs per task; null = the job's torch_threads (they agree by default).
    cpus_per_task: Optional[int] = None
    # GPUs per node; each job gets its own GPU(s).
    gpus_per_node: int = 0
    # Memory per node in GB (null: the cluster's default).
    mem_gb: Optional[int] = None
    # Node features required (sbatch --constraint).
    constraint: Optional[str] = None
    # Nodes to avoid (sbatch --exclude).
    exclude: Optional[str] = None
    # Jobs of one array running at once (null: no limit).
    array_parallelism: Optional[int] = None
    # Shell lines run before each job (e.g. module load, source venv).
    setup: List[str] = field(default_factory=list)
    # Additional raw sbatch parameters, e.g. {"mail-type": "END"}.
    additional_parameters: Dict[str, str] = field(default_factory=dict)
    # Where submitit keeps its pickles and logs; null = <sweep dir>/.submitit.
    submitit_folder: Optional[str] = None
    # Times a job may be requeued after a time-out or preemption.
    max_num_requeue: int = 3
