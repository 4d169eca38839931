"""Checks of ``env.id`` made before any job starts: the job processes must be able to make
the env (an id gymnasium knows, or ``module:id`` whose module imports and registers it),
and the agent must be able to act in it."""

from __future__ import annotations

import difflib
from functools import cache
from typing import TYPE_CHECKING, Any

from rlsweep.errors import ConfigError

if TYPE_CHECKING:
    from gymnasium import Space
    from gymnasium.envs.registration import EnvSpec


def split_env_id(env_id: str) -> tuple[str | None, str]:
    """Gymnasium's ``"module:id"`` form as ``(module, id)``; a plain id as ``(None, id)``."""
    module, sep, name = env_id.partition(":")
    return (module, name) if sep else (None, env_id)


def env_spec(env_id: str) -> EnvSpec:
    """The registered ``gymnasium.envs.registration.EnvSpec`` of ``env_id`` (a plain id or
    ``"module:id"``, whose module is imported first so that it registers its envs)."""
    import importlib

    import gymnasium as gym

    module, name = split_env_id(env_id)
    if module is not None:
        importlib.import_module(module)
    return gym.spec(name)


@cache
def env_spaces(env_id: str) -> tuple[Space[Any], Space[Any]]:
    """``(observation space, action space)`` of ``env_id``, from an env made for the
    purpose and closed again."""
    env = env_spec(env_id).make()
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


@cache
def env_action_kind(env_id: str) -> str:
    """The kind of ``env_id``'s action space (see ``action_space_kind``)."""
    from rlsweep.agents.base import action_space_kind

    return action_space_kind(env_spaces(env_id)[1])


_FIX_HINT = (
    "Register the env in an importable module (a file on PYTHONPATH or in an installed "
    "package whose import calls gymnasium.register) and select it as "
    "env.id=<module>:<id>: every job process then imports that module itself."
)


def _import_env_module(env_id: str, module: str) -> None:
    """Import the module part of ``env.id=<module>:<id>``, explaining a failure."""
    import importlib

    if not module or module in ("__main__", "__mp_main__"):
        what = "is empty" if not module else f"is {module!r}, the launching script"
        raise ConfigError(
            f"Invalid env.id={env_id!r}: the module part of env.id=<module>:<id> {what}, "
            f"which the processes that run the jobs cannot import. {_FIX_HINT}"
        )
    try:
        importlib.import_module(module)
    except Exception as exc:
        raise ConfigError(
            f"Invalid env.id={env_id!r}: could not import the module {module!r} "
            f"({type(exc).__name__}: {exc}). With env.id=<module>:<id>, the module must be "
            "importable (on PYTHONPATH or installed) and register <id> with "
            "gymnasium.register when imported; or use a plain id registered with gymnasium "
            f"or an env group: {', '.join(available_groups('env'))}."
        ) from None


def _entry_point_location(spec: EnvSpec) -> tuple[str, str]:
    """``(module, qualified name)`` of ``spec``'s entry point (a "module:attr" string or a
    callable); empty strings for what is unknown."""
    entry_point = spec.entry_point
    if entry_point is None:
        return "", ""
    if isinstance(entry_point, str):
        module, _, qualname = entry_point.partition(":")
        return module, qualname
    module = getattr(entry_point, "__module__", None) or ""
    return str(module), str(getattr(entry_point, "__qualname__", None) or repr(entry_point))


def _entry_point_outside_workers(spec: EnvSpec, *, strict: bool) -> str | None:
    """Where ``spec``'s entry point lives if it is in ``__main__`` (the launching script,
    which the job processes do not run), else None. ``strict`` also returns it if it is
    local to a function or its top-level package cannot be found on the path."""
    import importlib.util

    if spec.entry_point is None:
        return None
    module, qualname = _entry_point_location(spec)
    where = f"{module}:{qualname}"
    if module in ("__main__", "__mp_main__"):
        return where
    if not strict:
        return None
    if not module or "<locals>" in qualname:
        return where
    # Only the top-level package is looked up: finding a submodule would import its
    # parents, and an env whose dependencies are missing should fail as such, later.
    try:
        found = importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else where


def check_env_id(env_id: str) -> None:
    """Refuse an env the job processes could not make: an id gymnasium does not know
    (suggesting close matches), a ``module:id`` whose module does not import, or a plain id
    registered in this process only, with its entry point in ``__main__``."""
    import gymnasium as gym

    import rlsweep.faults  # noqa: F401  (registers rlsweep's own test env)

    module, name = split_env_id(env_id)
    if module is not None:
        _import_env_module(env_id, module)
    if name in gym.registry:
        # A plain id must be registered by the imports every job process makes; one
        # registered with an entry point in the launching script (or not importable) was
        # registered by that script, in this process only. A module:id's module registers
        # it in every job process, so only an entry point in __main__ is refused.
        where = _entry_point_outside_workers(gym.registry[name], strict=module is None)
        if where is not None:
            raise ConfigError(
                f"Invalid env.id={env_id!r}: {name!r} is registered in this process only, "
                f"with its entry point {where} in the launching script (or not importable), "
                "so the processes that run the jobs, which start fresh, would not find it. "
                f"{_FIX_HINT}"
            )
        return
    # Suggest first among the ids whose entry point is in the module's own package.
    candidates = list(gym.registry)
    if module is not None:
        package = module.split(".")[0]
        own = [
            i
            for i, spec in gym.registry.items()
            if _entry_point_location(spec)[0].split(".")[0] == package
        ]
        candidates = own or candidates
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    prefix = f"{module}:" if module is not None else ""
    hint = f" Did you mean {', '.join(prefix + c for c in close)}?" if close else ""
    imported = f" (importing {module!r} did not register {name!r})" if module is not None else ""
    raise ConfigError(
        f"Unknown gymnasium id env.id={env_id!r}{imported}.{hint} Use any id registered with "
        "gymnasium (gymnasium.pprint_registry() lists them), env.id=<module>:<id> for an env "
        "that your own importable module registers, or an env group: "
        f"{', '.join(available_groups('env'))}."
    )


def available_groups(group: str) -> list[str]:
    """Options of a config group in the shipped conf/ directory."""
    from rlsweep.paths import conf_dir

    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))
