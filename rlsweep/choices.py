"""A job's config-group choices: the option of each config group its config was composed
from (``algo=b``, ``task=nav/small``), as Hydra records them (``hydra.runtime.choices``).

Apps choose behaviour by the *name* of a group option as well as by its values: they read
``HydraConfig.get().runtime.choices`` (which algorithm, which task), and two options of a
group may hold identical values (two algorithms that differ only in code, configured
alike). So the choices are part of what a job is, like its values: its identity
(:func:`rlsweep.identity.identity_of` keeps them in its config under
``hydra.choices``, a key no job's own config can hold: Hydra reserves ``hydra``), its
seeds, its directory's name and its group's label in the report.

Left out, as they say how a job runs and not what it is: Hydra's own groups
(``hydra/launcher``, ``hydra/job_logging``, ...), rlsweep's opt-in (``rlsweep``,
``rlsweep/trackers``), a group left unchosen (null), and the groups the identity ignores
(``hydra.launcher.identity.ignore``, Hydra's ``exclude_keys``: by group name, a group
nested under an ignored one included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CHOICES_PATH",
    "choices_in",
    "installed_choices",
    "is_job_group",
    "job_choices",
    "package_of",
    "under",
]

# Where an identity's config keeps the job's choices (``{"hydra": {"choices": {...}}}``).
CHOICES_PATH = ("hydra", "choices")
# Groups that configure how a job runs: Hydra's own, and rlsweep's opt-in.
_RUN_GROUPS = ("hydra", "rlsweep")


def under(group: str, paths: Sequence[str]) -> bool:
    """Whether ``group`` (``algo/optim``) is one of ``paths`` or nested under one, each
    path a group name or its package's dotted key (``algo``, ``algo.optim``)."""
    name = group.replace(".", "/")
    for path in paths:
        prefix = str(path).lstrip("+~").replace(".", "/")
        if prefix and (name == prefix or name.startswith(prefix + "/")):
            return True
    return False


def is_job_group(group: str, ignored: Sequence[str] = ()) -> bool:
    """Whether the choice of ``group`` is part of a job (see the module docstring)."""
    return bool(group) and not under(group, _RUN_GROUPS) and not under(group, ignored)


def job_choices(choices: Mapping[str, Any] | None, ignored: Sequence[str] = ()) -> dict[str, str]:
    """The choices that are part of a job, from Hydra's ``runtime.choices``, sorted."""
    out = {
        str(group): str(option)
        for group, option in (choices or {}).items()
        if option is not None and is_job_group(str(group), ignored)
    }
    return dict(sorted(out.items()))


def choices_in(config: Mapping[str, Any]) -> dict[str, str]:
    """The choices an identity's config holds (``{}``: none, or an older record without any)."""
    node: Any = config
    for part in CHOICES_PATH:
        node = node.get(part) if isinstance(node, Mapping) else None
    return {str(k): str(v) for k, v in node.items()} if isinstance(node, Mapping) else {}


def package_of(group: str) -> str:
    """The dotted key a group's options are placed at by default (``algo/optim``:
    ``algo.optim``), where their expanded values sit in the config."""
    return group.replace("/", ".")


def installed_choices() -> dict[str, Any] | None:
    """The choices of the config Hydra has installed in this process (None: none)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    choices = HydraConfig.get().runtime.choices
    return {str(k): v for k, v in choices.items()} if choices is not None else None
