"""The launcher's engine, behind rlsweep's Hydra launcher plugin.

- :mod:`~rlsweep.launch.options`: the launcher's validated options.
- :mod:`~rlsweep.launch.compose`: composing many jobs' configs, sharing the expensive part.
- :mod:`~rlsweep.launch.jobs`: one job of a sweep, and running it through Hydra's ``run_job``.
- :mod:`~rlsweep.launch.worker`: what a worker process (or SLURM job) runs.
- :mod:`~rlsweep.launch.core`: checking a batch, then handing it to an executor
  (:mod:`rlsweep.executors`).
"""
