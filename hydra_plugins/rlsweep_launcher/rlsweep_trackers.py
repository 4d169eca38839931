"""The ``rlsweep/trackers`` config group for any Hydra app: ``rlsweep/trackers=tensorboard``
or ``rlsweep/trackers=[tensorboard,wandb,mlflow]`` turns on rlsweep's trackers
(:mod:`rlsweep.trackers`), each option adding its settings under Hydra's launcher node,
``hydra.launcher.trackers.<name>``: never under a key of the app's own config (an app's
``logger:`` section stays the app's). The built-in app's ``logger=...`` is an alias of its
own YAML (conf/logger/)."""

from hydra.core.config_store import ConfigStore

from rlsweep.trackers.base import TRACKER_NAMES
from rlsweep.trackers.settings import GROUP, LAUNCHER_KEY, SETTINGS_GROUP, backend

for _name in TRACKER_NAMES:
    ConfigStore.instance().store(
        group=GROUP,
        name=_name,
        node={_name: backend(_name).Settings},
        package=LAUNCHER_KEY,
        provider="rlsweep",
    )
    # One tracker's settings alone, for an app's own alias (the built-in app's logger=...).
    ConfigStore.instance().store(
        group=SETTINGS_GROUP, name=_name, node=backend(_name).Settings, provider="rlsweep"
    )
