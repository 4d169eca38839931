"""Hyperparameter search with replicates: every trial run as several identity-seeded jobs,
its objective an aggregate over them (see docs/search.md). This package imports none of
its modules: of them, the sweeper's plugin scan imports only :mod:`rlsweep.search.settings`."""
