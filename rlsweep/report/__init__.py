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

Every sweep is read the same way: rlsweep's own agents are an app whose groups are agents,
tasks envs and metric ``final_return`` (plus scores normalised per env); any other Hydra app's
jobs are grouped by its swept keys, on a metric it returned or logged (``--metric``). Pairwise
sections compare the groups of several replicates, at most the best few; a grid of many groups
gets its top groups and the metric against each swept key.

One data contract, pure functions (as rliable), one module each:

- :mod:`~rlsweep.report.runs`: the runs table (:class:`~rlsweep.report.runs.Run`),
  :mod:`~rlsweep.report.read`: the one loader (:mod:`~rlsweep.report.variants` for rlsweep's
  agents, :mod:`~rlsweep.report.jobfiles` for a job's files), :mod:`~rlsweep.report.metrics`:
  the metric; :mod:`~rlsweep.report.tidy`: the tidy table and the learning curves;
- the statistics themselves (point statistics, tests, bootstrap intervals) are
  :mod:`rlsweep.stats`, pure numpy, shared with the search and the comparison;
- :mod:`~rlsweep.report.analysis` (per group and task, across envs, probability of
  improvement), :mod:`~rlsweep.report.comparisons` (paired comparisons),
  :mod:`~rlsweep.report.ranking` (which groups are compared, the top groups, the swept keys),
  :mod:`~rlsweep.report.curves` (the bands the figures draw): the numbers, each from a
  Generator seeded by the report's seed and the statistic's name, so the same sweep gives the
  same report byte for byte;
- :mod:`~rlsweep.report.markdown` (shared), :mod:`~rlsweep.report.sections` (optional) and
  :mod:`~rlsweep.report.render`: report.md; :mod:`~rlsweep.report.html`: report.html,
  report.md rendered as a page; :mod:`~rlsweep.report.plots`: the figures, drawing exactly
  the numbers computed (no randomness of their own);
- :mod:`~rlsweep.report.figures`: which figures, their bands, drawn and written;
  :mod:`~rlsweep.report.files`: the files, written atomically;
  :mod:`~rlsweep.report.build`: all of it for some sweep directories
  (:func:`~rlsweep.report.build.write_report`); :mod:`~rlsweep.report.cli`: the command.

This package imports none of its modules: import the one you need.
"""
