"""The ``logger`` config group for any Hydra app: ``logger=tensorboard`` or
``logger=[tensorboard,wandb,mlflow]`` turns on rlsweep's trackers (:mod:`rlsweep.trackers`),
each option adding its settings under ``logger.<name>``."""

from hydra.core.config_store import ConfigStore

from rlsweep.trackers.base import TRACKER_NAMES
from rlsweep.trackers.settings import KEY, backend

for _name in TRACKER_NAMES:
    ConfigStore.instance().store(
        group=KEY,
        name=_name,
        node={_name: backend(_name).Settings},
        provider="rlsweep",
    )
