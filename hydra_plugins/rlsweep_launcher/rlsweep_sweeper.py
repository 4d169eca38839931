"""rlsweep's sweeper plugin: Hydra's basic grid sweeper, with the sweep-level guarantees of
rlsweep's engine (:mod:`rlsweep.sweep`).

- Every job of every batch is checked and validated before anything is written.
- Sweeping what configures the sweep as a whole is refused (Hydra would silently run every
  job with one launcher).
- A failed job never stops the sweep: all batches run, then the task's end-of-sweep hook
  (``rlsweep.task(on_sweep_end=...)``; by default the summary of every job) runs, then the
  sweep exits non-zero naming the failed jobs and where their tracebacks are.
- Resume: with the rlsweep launcher, running the same command again into the same sweep
  directory skips every job whose ``result.json`` was computed for the same job (its
  identity: its config values); ``rerun`` chooses: ``missing``, ``failed`` or ``all``. A
  result of other settings is never taken for a job's: the sweep is refused, naming what
  changed. A lock keeps two sweeps out of one directory.
- ``search.trials=N``: a hyperparameter search whose trials each run as replicates
  (:mod:`rlsweep.search`); ``compare.rounds=N``: as many replicates as a sequential test
  needs to decide every pair of arms (:mod:`rlsweep.compare`).
"""

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import TaskFunction

from rlsweep.compare.settings import CompareSettings
from rlsweep.search.settings import SearchSettings
from rlsweep.settings import plain_defaults


@dataclass
class RLSweepSweeperConf:
    _target_: str = "hydra_plugins.rlsweep_launcher.rlsweep_sweeper.RLSweepSweeper"
    # Jobs handed to the launcher at once; null = the whole grid in one batch.
    max_batch_size: Optional[int] = None
    # The grid in YAML, one entry per key, written as on the command line:
    # {lr: "0.1,0.01", seed: "range(8)"}.
    params: Optional[Dict[str, str]] = None
    # Which jobs run when the sweep directory already holds results: missing (every job
    # without result.json), failed (only jobs that failed), all (everything, from scratch).
    rerun: str = "missing"
    # Whether the sweep ends with rlsweep's summary and report (summary.csv, report.md and
    # .html, plots); false: it ends with its last job, rlsweep never imports what the
    # report needs, and `python -m rlsweep.report <sweep dir>` writes it later. A task's
    # own on_sweep_end runs either way. (Typed Any so that a wrong value is refused by
    # rlsweep, naming the key, rather than by OmegaConf's interpolation.)
    report: Any = True
    # The number that report's statistics are on: a name the task returns or a series it
    # logs (metric=eval/reward); null: `return`, else the only number returned, else a logged
    # evaluation return or reward. Same as `python -m rlsweep.report <sweep dir> --metric`.
    metric: Optional[str] = None
    # A hyperparameter search over the swept keys (interval(a,b), choices), every trial
    # run as replicates: search.trials=16 search.replicates=3. Keys and defaults:
    # rlsweep.search.settings.SearchSettings (a dict here, so that an app can alias it:
    # search: ${search}); unknown keys and values are refused naming the key.
    search: Dict[str, Any] = field(default_factory=lambda: plain_defaults(SearchSettings))
    # An adaptive comparison of the grid's points (AdaStop): compare.rounds=4. Keys and
    # defaults: rlsweep.compare.settings.CompareSettings.
    compare: Dict[str, Any] = field(default_factory=lambda: plain_defaults(CompareSettings))


ConfigStore.instance().store(
    group="hydra/sweeper", name="rlsweep", node=RLSweepSweeperConf, provider="rlsweep"
)


class RLSweepSweeper(BasicSweeper):
    def __init__(
        self,
        max_batch_size: Optional[int] = None,
        params: Optional[Dict[str, str]] = None,
        rerun: str = "missing",
        report: Any = True,
        metric: Optional[str] = None,
        search: Any = None,
        compare: Any = None,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)
        from rlsweep.search.settings import settings_of
        from rlsweep.sweep.plan import check_rerun
        from rlsweep.sweep.run import check_report

        check_rerun(rerun)
        self.rerun = rerun
        self.report = check_report(report)
        self.metric = None if metric is None else str(metric)
        self.search, self.compare = settings_of(search, compare)

    def setup(self, *, hydra_context: Any, task_function: TaskFunction, config: Any) -> None:
        from rlsweep.sweep.record import name_the_app

        name_the_app(config)  # before anything is composed from it
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        from rlsweep.sweep.plan import refuse_sweep_level_sweeps, varying_keys
        from rlsweep.sweep.run import SweepRun, planning_interruptible
        from rlsweep.task_api import TaskHooks, hooks_of

        if self.config is None or self.launcher is None or self.hydra_context is None:
            raise RuntimeError("RLSweepSweeper.sweep() called before Hydra's setup()")
        # Hydra hands the task function to the launcher (which every launcher keeps).
        fn: TaskFunction | None = getattr(self.launcher, "task_function", None)
        hooks = ((hooks_of(fn) if fn is not None else None) or TaskHooks()).configured(
            self.config.hydra, fn
        )
        params_conf = self._parse_config()
        params_conf.extend(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides(params_conf)
        refuse_sweep_level_sweeps(overrides, self.config, {})
        varying = varying_keys(overrides, hooks, self.search.on or self.compare.on)
        name_by = getattr(self.launcher, "name_jobs_by", None)
        if name_by is not None:  # jobs named by the keys the sweep varies
            name_by(varying)
        prime = getattr(self.launcher, "prime", None)
        if prime is not None:  # the launcher need not parse each job's overrides again
            prime(overrides)
        run = SweepRun(
            self.launcher,
            self.config,
            hooks,
            self.rerun,
            self.report,
            overrides,
            varying,
            self.metric,
        )
        if self.search.on:
            from rlsweep.search.run import Search

            return run.drive(Search.create(self.search, overrides, self.config, hooks))
        if self.compare.on:
            from rlsweep.compare.run import AdaptiveComparison

            return run.drive(AdaptiveComparison.create(self.compare, overrides, self.config, hooks))
        with planning_interruptible():
            batches = self._checked_batches(overrides)
        return run.run(batches)

    def _checked_batches(self, overrides: Any) -> list[list[list[str]]]:
        """The grid's batches, every job checked and validated before anything is written."""
        from rlsweep.sweep.plan import refuse_sweep_level_sweeps

        self.overrides = self.split_arguments(overrides, self.max_batch_size)
        batches: list[list[list[str]]] = []
        while not self.is_done():
            batches.append([list(job) for job in self.get_job_batch()])
        prepare = getattr(self.launcher, "prepare", None)
        start = 0
        for batch in batches:
            if prepare is not None:
                prepare(batch, start)
            else:
                self.validate_batch_is_legal(batch)
            start += len(batch)
        launchers = getattr(self.launcher, "launcher_settings", None)
        if launchers is not None and self.config is not None:  # a choice that changes it
            refuse_sweep_level_sweeps(overrides, self.config, launchers())
        refuse_twins = getattr(self.launcher, "refuse_twins", None)
        if refuse_twins is not None:  # two jobs that are one job
            refuse_twins()
        return batches
