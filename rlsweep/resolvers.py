"""rlsweep's OmegaConf resolvers, for any app's YAML:

- ``${rlsweep.seed:purpose}`` / ``${rlsweep.seed:purpose,index}``: the job's seed for a
  purpose (:meth:`rlsweep.Seeds.seed`); ``${rlsweep.shared_seed:...}``: a stream shared
  across agents at the same replicate (common random numbers).
- ``${rlsweep.job_dir:${hydra.job.override_dirname}}``: a job's directory named by its
  overrides (its stable identity), made filesystem-safe.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from rlsweep.store import job_dir_name


def _seed(purpose: str, index: int = 0, *, _root_: DictConfig) -> int:
    from rlsweep.task_api import resolve_seed

    return resolve_seed(purpose, index, shared=False, root=_root_)


def _shared_seed(purpose: str, index: int = 0, *, _root_: DictConfig) -> int:
    from rlsweep.task_api import resolve_seed

    return resolve_seed(purpose, index, shared=True, root=_root_)


def register() -> None:
    """Register the resolvers (once per process; Hydra's plugin scan calls this)."""
    for name, fn in (
        ("rlsweep.job_dir", job_dir_name),
        ("rlsweep.seed", _seed),
        ("rlsweep.shared_seed", _shared_seed),
    ):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)
