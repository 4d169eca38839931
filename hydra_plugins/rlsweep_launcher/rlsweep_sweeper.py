"""rlsweep's sweeper: Hydra's basic grid sweeper, with the sweep-level guarantees.

- Every job of every batch is composed and validated before anything is written.
- Sweeping the launcher is refused (Hydra would silently run every job with one launcher).
- A failed job never stops the sweep: all batches run, then the task's end-of-sweep hook
  (``rlsweep_on_sweep_end``, e.g. the summary) runs, then the sweep exits non-zero
  naming the failed jobs and where their tracebacks are.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.core.utils import JobReturn, JobStatus
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from rlsweep.errors import ConfigError, SweepFailed

# A task function may carry this attribute: called after the last batch, failures or not,
# with (sweep_dir, [JobReturn, ...]).
END_ATTR = "rlsweep_on_sweep_end"
_LAUNCHER_KEYS = ("launcher", "hydra/launcher", "n_jobs")


@dataclass
class RLSweepSweeperConf:
    _target_: str = "hydra_plugins.rlsweep_launcher.rlsweep_sweeper.RLSweepSweeper"
    # Jobs handed to the launcher at once; null = the whole grid in one batch.
    max_batch_size: Optional[int] = None
    # The grid in YAML, one entry per key, written as on the command line:
    # {agent: "a2c,ppo", seed: "range(8)"}.
    params: Optional[Dict[str, str]] = None


ConfigStore.instance().store(
    group="hydra/sweeper", name="rlsweep", node=RLSweepSweeperConf, provider="rlsweep"
)


def refuse_launcher_sweep(overrides: list[Override]) -> None:
    for o in overrides:
        key = o.key_or_group
        if o.is_sweep_override() and (key in _LAUNCHER_KEYS or key.startswith("hydra.launcher")):
            raise ConfigError(
                f"Sweeping over '{key}' ({o.input_line}) is not supported: a sweep runs with one "
                "launcher, and Hydra would silently run every job with the first value. "
                f"Run one sweep per value instead, e.g. '{key}={o.sweep_string_iterator().__next__()}'."
            )


class RLSweepSweeper(BasicSweeper):
    def __init__(
        self, max_batch_size: Optional[int] = None, params: Optional[Dict[str, str]] = None
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)
        self._task_function: Optional[TaskFunction] = None

    def setup(
        self,
        *,
        hydra_context: HydraContext,
        task_function: TaskFunction,
        config: DictConfig,
    ) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self._task_function = task_function

    def sweep(self, arguments: list[str]) -> Any:
        if self.config is None or self.launcher is None or self.hydra_context is None:
            raise RuntimeError("RLSweepSweeper.sweep() called before setup()")
        params_conf = self._parse_config()
        params_conf.extend(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides(params_conf)
        refuse_launcher_sweep(overrides)
        self.overrides = self.split_arguments(overrides, self.max_batch_size)
        batches: list[list[list[str]]] = []
        while not self.is_done():
            batches.append([list(job) for job in self.get_job_batch()])

        # Compose and validate every job before writing anything.
        prepare = getattr(self.launcher, "prepare", None)
        start = 0
        for batch in batches:
            if prepare is not None:
                prepare(batch, start)
            else:
                self.validate_batch_is_legal(batch)
            start += len(batch)

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        returns: list[list[JobReturn]] = []
        start = 0
        for batch in batches:
            returns.append(list(self.launcher.launch(batch, initial_job_idx=start)))
            start += len(batch)

        flat = [r for batch_returns in returns for r in batch_returns]
        on_end = getattr(self._task_function, END_ATTR, None)
        if on_end is not None:
            on_end(sweep_dir, flat)
        failed = [r for r in flat if r.status != JobStatus.COMPLETED]
        if failed:
            raise SweepFailed(failure_message(failed, len(flat)))
        return returns


def failure_message(failed: list[JobReturn], total: int) -> str:
    lines = [f"{len(failed)} of {total} jobs failed:"]
    for r in failed[:20]:
        where = r.hydra_cfg.hydra.runtime.output_dir if r.hydra_cfg is not None else "?"
        exc = r._return_value
        first = str(exc).splitlines()[0] if exc is not None else "unknown error"
        lines.append(f"  {' '.join(r.overrides or [])}: {first}\n    traceback: {where}/error.txt")
    if len(failed) > 20:
        lines.append(f"  ... and {len(failed) - 20} more (see the summary).")
    return "\n".join(lines)
