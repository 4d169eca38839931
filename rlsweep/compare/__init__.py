"""Adaptive comparison of a grid's points (``compare.rounds=N``): every grid point an arm,
replicates run in rounds until AdaStop decides every pair of arms (see
docs/search.md). This package imports none of its modules: the sweeper's plugin scan imports
:mod:`rlsweep.compare.settings`, and :mod:`rlsweep.compare.run` only when a comparison is
asked for."""
