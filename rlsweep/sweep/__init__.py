"""The sweep's engine, behind rlsweep's Hydra sweeper plugin.

- :mod:`~rlsweep.sweep.plan`: which jobs run (resume, ``rerun``), which are refused (a
  result of other settings; a sweep over what configures the sweep as a whole).
- :mod:`~rlsweep.sweep.run`: the sweep from lock to summary: batches through the launcher,
  interrupts, the end-of-sweep hook, the failure report.
"""
