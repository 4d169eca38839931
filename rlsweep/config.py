"""Typed job configuration, validated up front with messages that name the key.

Hydra composes plain YAML; :func:`load_job_config` checks it against the dataclasses
below (and the agent's own ``Config``), so that a wrong type, an out-of-range value, a
misspelled key, an unknown gymnasium id (or ``module:id`` whose module does not import),
an env registered only in the launching script, or an agent that cannot act in an env is
reported before any job starts, as one paragraph naming the key and what is allowed.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from rlsweep.agents.base import AgentConfig
from rlsweep.errors import ConfigError

if TYPE_CHECKING:
    from gymnasium.envs.registration import EnvSpec

VECTORIZATION_MODES = ("sync", "async")


@dataclass
class EnvConfig:
    """The task: a gymnasium environment.

    An env registered only in the launching process (by a wrapper script, with its entry
    point in ``__main__``) is refused up front: the job processes start fresh and would
    not find it. Register it in an importable module and use ``env.id=<module>:<id>``.
    """

    # Gymnasium id: one registered when gymnasium or rlsweep is imported (e.g.
    # CartPole-v1), or gymnasium's "module:id" form for an env of your own package
    # (e.g. mypkg.envs:TinyChain-v0): every process that runs a job imports the module,
    # which registers the env, so it works under any launcher. The whole string is the
    # env's identity (seeds are derived from it).
    id: str = "CartPole-v1"
    # Keyword arguments passed to gymnasium.make.
    kwargs: dict[str, Any] = field(default_factory=dict)
    # Episode step limit; null keeps the env's registered limit.
    max_episode_steps: int | None = None
    # How training sub-envs run: sync (one process) or async (a process per sub-env,
    # shared memory). Results are identical; it is left out of the env's identity.
    vectorization: str = "sync"
    # Score of a random policy and a reference score, for normalised reports (optional).
    random_score: float | None = None
    reference_score: float | None = None

    def __post_init__(self) -> None:
        if self.vectorization not in VECTORIZATION_MODES:
            raise ValueError(
                f"vectorization must be one of {', '.join(VECTORIZATION_MODES)}, "
                f"got {self.vectorization!r}"
            )
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {self.max_episode_steps}")

    def identity(self) -> dict[str, Any]:
        """What defines the task for seeding (not how it is vectorised)."""
        return {"id": self.id, "kwargs": self.kwargs, "max_episode_steps": self.max_episode_steps}


@dataclass
class TrainConfig:
    """The training budget."""

    # Environment steps to train for, summed over sub-envs.
    total_steps: int = 100_000
    # Save a checkpoint at the first iteration boundary after this many seconds (0: after
    # every iteration; null: only when asked to stop, e.g. by SLURM before a time limit).
    # A killed or preempted job resumes from its last checkpoint, bit for bit.
    checkpoint_every_s: float | None = 300.0

    def __post_init__(self) -> None:
        if self.total_steps < 1:
            raise ValueError(f"total_steps must be >= 1, got {self.total_steps}")
        if self.checkpoint_every_s is not None and self.checkpoint_every_s < 0:
            raise ValueError(
                f"checkpoint_every_s must be >= 0 or null, got {self.checkpoint_every_s}"
            )


@dataclass
class EvalConfig:
    """Deterministic evaluation on a separate environment."""

    # Evaluate every this many training steps (and at step 0 and at the end).
    every_steps: int = 10_000
    # Episodes per evaluation, each with its own seed (the same seeds at every evaluation).
    episodes: int = 10

    def __post_init__(self) -> None:
        if self.every_steps < 1:
            raise ValueError(f"every_steps must be >= 1, got {self.every_steps}")
        if self.episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {self.episodes}")


@dataclass
class SeedingConfig:
    """How a job's seeds are derived (see rlsweep.seeding)."""

    # Root seed of the whole study: change it to draw a fresh set of replicates.
    root: int = 0
    # Share environment-side seeds across agents at the same replicate (paired runs).
    common_random_numbers: bool = True

    def __post_init__(self) -> None:
        if self.root < 0:
            raise ValueError(f"root must be >= 0, got {self.root}")


@dataclass
class JobConfig:
    """One job: an agent trained on an env at one replicate index."""

    agent: AgentConfig
    env: EnvConfig
    train: TrainConfig
    eval: EvalConfig
    seeding: SeedingConfig
    # Replicate index (not an RNG seed): the job's seeds are derived from it.
    seed: int = 0
    # Experiment name: multirun sweeps go to multirun/<name>.
    name: str = "default"
    # Worker processes for the joblib launcher (null = all cores); not part of a job.
    n_jobs: int | None = None
    # Which jobs a sweep runs again (missing, failed, all); not part of a job.
    rerun: str = "missing"
    # torch threads inside this job. Floating-point results depend on it (reductions
    # split differently), so it belongs to the job, not to the launcher: a job gives the
    # same numbers serial, under joblib or on SLURM. Small RL networks run fastest on 1.
    torch_threads: int = 1

    def __post_init__(self) -> None:
        if self.seed < 0:
            raise ValueError(f"seed must be a replicate index >= 0, got {self.seed}")
        if self.torch_threads < 1:
            raise ValueError(f"torch_threads must be >= 1, got {self.torch_threads}")
        if self.n_jobs is not None and self.n_jobs < 1:
            raise ValueError(f"n_jobs must be >= 1 (or null for all cores), got {self.n_jobs}")


_SECTIONS: dict[str, type[Any]] = {
    "env": EnvConfig,
    "train": TrainConfig,
    "eval": EvalConfig,
    "seeding": SeedingConfig,
}
_TOP_LEVEL = ("seed", "name", "n_jobs", "rerun", "torch_threads")


def _fields(cls: type[Any]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _unknown_key(path: str, key: str, allowed: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    where = f"{path}.{key}" if path else key
    return ConfigError(
        f"Unknown config key '{where}'.{hint} Allowed keys"
        f"{' in ' + path if path else ''}: {', '.join(allowed)}."
    )


# Validated sections by (path, schema, the section's plain data): a grid's jobs mostly
# share their sections (a seed sweep shares all of them), and merging a section into its
# schema costs milliseconds, so a sweep of many jobs validates each distinct one once.
_TYPED_CACHE: dict[tuple[str, type[Any], str], Any] = {}
_TYPED_CACHE_MAX = 4096


def _typed(path: str, cls: type[Any], node: Any) -> Any:
    """``node`` (plain data) checked against the schema ``cls``, as a fresh dataclass."""
    if not isinstance(node, dict):
        raise ConfigError(f"'{path}' must be a mapping of settings, got {node!r}.")
    key = (path, cls, json.dumps(node, sort_keys=True, default=repr))
    typed = _TYPED_CACHE.get(key)
    if typed is None:
        typed = _build_typed(path, cls, node)
        if len(_TYPED_CACHE) >= _TYPED_CACHE_MAX:
            _TYPED_CACHE.clear()
        _TYPED_CACHE[key] = typed
    return copy.deepcopy(typed)


def _build_typed(path: str, cls: type[Any], node: dict[str, Any]) -> Any:
    """Merge ``node`` into the schema ``cls`` and build the dataclass, explaining failures."""
    allowed = _fields(cls)
    for key in node:
        if key not in allowed:
            raise _unknown_key(path, str(key), allowed)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(cls), node)
        return OmegaConf.to_object(merged)
    except ValidationError as exc:
        key = f"{path}.{exc.key}" if exc.key is not None else path
        ftype = next((f.type for f in dataclasses.fields(cls) if f.name == exc.key), "?")
        raise ConfigError(
            f"Invalid value for '{key}': {str(exc.msg).splitlines()[0]}. Expected type: {ftype}."
        ) from None
    except ConfigKeyError as exc:
        raise _unknown_key(path, str(exc.key), allowed) from None
    except ValueError as exc:
        raise ConfigError(f"Invalid value in '{path}': {path}.{exc}") from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"Invalid '{path}' settings: {exc}") from None


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
def _env_action_kind(env_id: str) -> str:
    from rlsweep.agents.base import action_space_kind

    env = env_spec(env_id).make()
    try:
        return action_space_kind(env.action_space)
    finally:
        env.close()


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

    import rlsweep.envs  # noqa: F401  (registers rlsweep's own test envs)

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


def _resolved_task_config(cfg: DictConfig) -> dict[str, Any]:
    """The job's own keys (not ``hydra``) as plain data, every interpolation resolved."""
    out: dict[str, Any] = {}
    for key in cfg:
        if key == "hydra":
            continue
        node = cfg._get_node(key)
        out[str(key)] = (
            OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else cfg[key]
        )
    return out


def load_job_config(cfg: DictConfig) -> JobConfig:
    """Validate a composed job config and return it typed; raise ConfigError otherwise."""
    from rlsweep.agents import agent_settings

    try:
        plain = _resolved_task_config(cfg)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"Could not resolve the config: {exc}") from None
    for key in plain:
        if key not in (*_SECTIONS, "agent", *_TOP_LEVEL):
            raise _unknown_key("", str(key), sorted((*_SECTIONS, "agent", *_TOP_LEVEL)))
    agent_node = plain.get("agent")
    if not isinstance(agent_node, dict) or "name" not in agent_node:
        raise ConfigError(
            f"'agent' must be an agent config with a 'name'; choose agent=<one of "
            f"{', '.join(available_groups('agent'))}>."
        )
    try:
        agent_config, action_spaces = agent_settings(str(agent_node["name"]))
    except ValueError as exc:
        raise ConfigError(f"Invalid agent.name: {exc}") from None
    agent = _typed("agent", agent_config, agent_node)
    sections = {name: _typed(name, cls, plain.get(name, {})) for name, cls in _SECTIONS.items()}
    top = {k: plain[k] for k in _TOP_LEVEL if k in plain}
    try:
        job = JobConfig(agent=agent, **sections, **top)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"Invalid top-level setting: {exc}") from None
    check_env_id(job.env.id)
    kind = _env_action_kind(job.env.id)
    if kind not in action_spaces:
        raise ConfigError(
            f"agent '{agent.name}' supports {' and '.join(sorted(action_spaces))} "
            f"action spaces, but env.id={job.env.id!r} has a {kind} action space. "
            "Pick another agent or env."
        )
    return job


def to_plain(obj: Any) -> Any:
    """A dataclass config as plain JSON-able data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    return obj
