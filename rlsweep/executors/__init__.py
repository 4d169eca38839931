"""Executors: siblings behind one small interface, each running a batch of checked jobs.

An executor is a function ``run(context, options, jobs, progress, more=None) ->
list[JobReturn]`` (:class:`~rlsweep.executors.base.Runner`): one ``JobReturn`` per job, in
the jobs' order, failed jobs included (a failing job never stops the others). With ``more``
the launch streams: each job's final outcome is handed to it, and the jobs it releases run
in the same launch as soon as a worker is free, their returns after the batch's. :func:`rlsweep.launch.core.runner` picks one by
``hydra.launcher.executor``:

- :mod:`~rlsweep.executors.serial`: an in-process loop (debugging; a debugger stops in the job).
- :mod:`~rlsweep.executors.pool`: a process (or thread) pool, through the fault-tolerant
  :mod:`~rlsweep.executors.dispatch`.
- :mod:`~rlsweep.executors.submitit`: SLURM job arrays, or submitit's local executor.
- :mod:`~rlsweep.executors.ray`: a Ray cluster, one Ray task per job.
"""
