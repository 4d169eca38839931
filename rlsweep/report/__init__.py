"""The statistical report of one or several sweeps: ``python -m rlsweep.report SWEEP_DIR ...``.

It reads the sweep directories (the job directories' ``result.json``, ``seeds.json``,
``metrics.csv`` and ``error.txt``) and writes, into the first sweep directory or ``--out``:

- ``report.md``: per (agent, env) statistics of the final evaluation return; scores
  normalised per env and aggregated across envs (IQM, mean, median, optimality gap); the
  probability of improvement of every pair of agents; paired comparisons under common random
  numbers (paired bootstrap CI, Wilcoxon signed-rank test, Holm correction); the list of
  failed, incomplete and missing jobs;
- ``report.html``: report.md as one self-contained page (real tables, the plots inlined,
  links to every job's directory and a failed job's error.txt), readable on a phone;
- ``report_learning_curves.png``, ``report_performance_profiles.png``,
  ``report_probability_of_improvement.png``;
- ``evaluations.csv`` and ``evaluations.parquet``: the tidy table, one row per (job,
  evaluation step), readable with one ``pd.read_csv`` / ``pd.read_parquet`` call.

A sweep of any other Hydra app gets the same statistics on its runs, grouped by the swept
keys, on a metric the task function returned (``--metric``).

One data contract, pure functions (as rliable), one module each:

- :mod:`~rlsweep.report.runs`: the runs table (:class:`~rlsweep.report.runs.Run`), and a sweep
  of rlsweep's own agents read into it; :mod:`~rlsweep.report.app_runs`: any app's sweep read
  into it; :mod:`~rlsweep.report.tidy`: the tidy table of evaluations and the learning curves;
- the statistics themselves (point statistics, tests, bootstrap intervals) are
  :mod:`rlsweep.stats`, pure numpy, shared with the search and the comparison;
- :mod:`~rlsweep.report.analysis` (per cell, across envs, probability of improvement),
  :mod:`~rlsweep.report.comparisons` (paired comparisons), :mod:`~rlsweep.report.curves`
  (the bands the figures draw): the numbers, each from a Generator seeded by the report's
  seed and the statistic's name, so the same sweep gives the same report byte for byte;
- :mod:`~rlsweep.report.markdown` (shared), :mod:`~rlsweep.report.markdown_agents`,
  :mod:`~rlsweep.report.markdown_app`: report.md; :mod:`~rlsweep.report.html`: report.html,
  report.md rendered as a page; :mod:`~rlsweep.report.plots`: the figures, drawing exactly
  the numbers computed (no randomness of their own);
- :mod:`~rlsweep.report.figures`: which figures, their bands, drawn and written;
  :mod:`~rlsweep.report.files`: the files, written atomically;
  :mod:`~rlsweep.report.build`: all of it for some sweep directories
  (:func:`~rlsweep.report.build.write_report`); :mod:`~rlsweep.report.cli`: the command.

This package imports none of its modules: import the one you need.
"""
