"""What a job *is*: the values its numbers depend on, and how its seeds are keyed.

A job's identity comes from its config values, never from how its overrides were written,
from Hydra's own ``hydra`` node or launcher settings, from the worker count, the order of
jobs or ``PYTHONHASHSEED``: ``lr=0.1`` on the command line and ``lr: 0.1`` left in YAML are
the same job. The rule, for any app:

- the job's *config* is its resolved config without ``hydra``, without the keys that cannot
  change its numbers (:attr:`Keys.ignore`, plus Hydra's own
  ``hydra.job.config.override_dirname.exclude_keys``) and without values computed from
  its seeds (``${rlsweep.seed:...}``);
- its config-group choices (``algo=b``: :mod:`rlsweep.choices`) are part of it, under
  ``hydra.choices`` in that config (a group listed agent-side is agent-side);
- the *replicate* is the value at :attr:`Keys.replicate` (``seed`` by default; 0 if absent)
  and the *root* the value at :attr:`Keys.root` (0 if none);
- the values at :attr:`Keys.agent` are agent-side: streams marked shared leave them out,
  so two agents at the same replicate see the same environments (common random numbers);
- every other value makes streams differ.

A seed then depends on the root, the replicate, the purpose, its index and those values
(:mod:`rlsweep.seeding`), so adding a value to a swept key never changes the seeds of the
jobs that existed before. The :attr:`Identity.digest` is what resume compares: a result
counts for a job only if it was computed for the same identity.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from rlsweep.choices import CHOICES_PATH, job_choices, under
from rlsweep.errors import ConfigError


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the same text in every process."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


# Resolvers whose values are not part of what a job is: computed from its identity (its
# seeds), from Hydra's runtime (its output directory, job number) or from the clock.
NOT_IDENTITY_RESOLVERS = ("rlsweep.seed", "rlsweep.shared_seed", "hydra", "now")
FORMAT = 1


# What an app reads at its replicate key (Keys.replicate_value).
REPLICATE_VALUES = ("derived", "index")


@dataclass(frozen=True)
class Keys:
    """Which config keys play which part in a job's identity (dotted paths)."""

    # The replicate index: swept as ``seed=range(8)``; not an RNG seed. None: the app has
    # no replicate key (every job is its own group).
    replicate: str | None = "seed"
    # The root seed of the study (entropy of every stream); None: always 0.
    root: str | None = None
    # Keys that cannot change the numbers (a tag, a log interval, an output path).
    ignore: tuple[str, ...] = ()
    # Agent-side keys (the algorithm, its hyperparameters): left out of shared streams.
    agent: tuple[str, ...] = ()
    # The job's torch/BLAS thread count (1 if the key is absent): results depend on it.
    threads: str = "torch_threads"
    # Whether the digest of the app's code (rlsweep.code) is part of each job's identity: a
    # completed job whose code changed since then runs again. Off: a change is only said.
    code: bool = False
    # What the task reads at the replicate key while it runs: ``derived``, the job's own
    # 31-bit seed (from its identity: never 0, 1, 2... shared with another run, and room for
    # an app's ``seed + i``), or ``index``, the replicate index as swept. The job is named
    # and grouped by the index either way.
    replicate_value: str = "derived"

    def __post_init__(self) -> None:
        if self.replicate_value not in REPLICATE_VALUES:
            raise ConfigError(
                f"hydra.launcher.identity.replicate_value={self.replicate_value!r} is not "
                f"allowed; choose derived (the task reads the job's own seed at the replicate "
                "key) or index (it reads the replicate index as swept)."
            )


@dataclass
class KeySettings:
    """``hydra.launcher.identity``: the :class:`Keys` of an app named in YAML or on the
    command line, no code edit (``hydra.launcher.identity.replicate=env.seed``). Each null
    keeps the task's declaration (``@rlsweep.task(keys=...)``), else the default."""

    # The replicate index's key, a dotted path (seed, env.seed); "" or "none": no key.
    replicate: str | None = None
    # What the task reads there while it runs: derived (the job's own 31-bit seed) or index.
    replicate_value: str | None = None
    # The key of the study's root seed (the entropy of every stream).
    root: str | None = None
    # Keys that cannot change the numbers (a tag, a log interval), left out of the identity.
    ignore: list[str] | None = None
    # Agent-side keys (algorithm, hyperparameters): left out of shared streams (CRN).
    agent: list[str] | None = None
    # The key of the job's torch/BLAS thread count.
    threads: str | None = None
    # Whether a change of the app's code (git commit and changes) makes every job run again.
    code: bool | None = None

    def apply(self, keys: Keys) -> Keys:
        """``keys`` with every setting given here in its place."""
        changes: dict[str, Any] = {}
        if self.replicate is not None:
            none = str(self.replicate).strip().lower() in ("", "none", "null")
            changes["replicate"] = None if none else str(self.replicate)
        for name in ("replicate_value", "root", "threads"):
            value = getattr(self, name)
            if value is not None:
                changes[name] = str(value)
        for name in ("ignore", "agent"):
            value = getattr(self, name)
            if value is not None:
                changes[name] = tuple(str(v) for v in value)
        if self.code is not None:
            if not isinstance(self.code, bool):
                raise ConfigError(
                    f"hydra.launcher.identity.code={self.code!r} is not allowed; choose true "
                    "(a change of the app's code runs its jobs again) or false."
                )
            changes["code"] = self.code
        return dataclasses.replace(keys, **changes) if changes else keys


def key_settings(node: Any) -> KeySettings:
    """``hydra.launcher.identity`` (a DictConfig, a mapping or None) as KeySettings; a
    ConfigError naming an unknown key."""
    if node is None:
        return KeySettings()
    if isinstance(node, KeySettings):
        return node
    plain = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if not isinstance(plain, Mapping):
        raise ConfigError(f"hydra.launcher.identity must be a mapping of keys, got {plain!r}.")
    allowed = [f.name for f in dataclasses.fields(KeySettings)]
    given = {str(k): v for k, v in plain.items()}
    unknown = [k for k in given if k not in allowed]
    if unknown:
        raise ConfigError(
            f"Unknown key 'hydra.launcher.identity.{unknown[0]}'. Allowed: {', '.join(allowed)}."
        )
    return KeySettings(**given)


@dataclass(frozen=True)
class Identity:
    """One job's identity: what resume compares and what its seeds are keyed by."""

    # Every value the job's numbers depend on (compared on resume, stored in result.json).
    config: Mapping[str, Any]
    # The replicate index (>= 0).
    replicate: int
    # Values that make streams differ, the agent's left out (e.g. the environment).
    shared: Mapping[str, Any]
    # Agent-side values: in every stream's key except shared ones under ``crn``.
    agent: Mapping[str, Any] = field(default_factory=dict)
    # The root seed (the entropy of every stream).
    root: int = 0
    # Common random numbers: shared streams leave the agent-side values out.
    crn: bool = True
    # torch/BLAS threads the job runs with.
    threads: int = 1
    # Whether the task reads the job's own seed at its replicate key (replicate_value=derived)
    # rather than the index: its numbers are not those of a run that read the index, so a
    # result of one is never taken for the other (in the digest only when true).
    derived_seed: bool = False
    # Which kernels the job runs (rlsweep.numerics): native or portable. Its numbers depend
    # on it as on the threads; its seeds do not.
    numerics: str = "native"
    # The digest of the app's code (rlsweep.code), under hydra.launcher.identity.code=true;
    # None: the code is recorded beside the identity, not in it. Its seeds do not depend on it.
    code: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {
            "format": FORMAT,
            "config": dict(self.config),
            "replicate": self.replicate,
            "root": self.root,
            "shared": dict(self.shared),
            "agent": dict(self.agent),
            "crn": self.crn,
            "threads": self.threads,
        }
        if self.derived_seed:
            out["derived_seed"] = True
        if self.numerics != "native":  # native: none, as in results without numerics
            out["numerics"] = self.numerics
        if self.code is not None:
            out["code"] = self.code
        return out

    @property
    def digest(self) -> str:
        """SHA-256 of the identity: equal iff the job is the same job."""
        return hashlib.sha256(canonical_json(self.to_json()).encode("ascii")).hexdigest()

    @property
    def lookup_digest(self) -> str:
        """The digest a job is looked up by under another directory name: its identity but
        what the app reads at its replicate key, its numerics and its code (a job run when the
        app read the index, with other kernels or other code, is found too, and then refused
        as changed, or run again in its directory, rather than run again beside it)."""
        return lookup_digest(self.to_json())


def lookup_digest(identity_json: Mapping[str, Any]) -> str:
    """:attr:`Identity.lookup_digest` of an identity as result.json records it."""
    plain = {
        k: v for k, v in identity_json.items() if k not in ("derived_seed", "numerics", "code")
    }
    return hashlib.sha256(canonical_json(plain).encode("ascii")).hexdigest()


def task_config(cfg: DictConfig) -> dict[str, Any]:
    """The job's own keys (not ``hydra``) as plain data, every interpolation resolved,
    leaving out values computed from the job's seeds, Hydra's runtime or the clock (so
    that a job's identity is the same in the sweep's process and where it runs)."""
    raw = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(raw, dict)
    if not _interpolates(raw):  # resolved already (a grid of plain values): no copy to resolve
        raw.pop("hydra", None)
        return {str(k): v for k, v in raw.items()}
    copy = OmegaConf.create(raw)
    assert isinstance(copy, DictConfig)
    # A value left out is replaced by a marker, not deleted: a value that interpolates it
    # (``name: ${run_name}`` beside ``run_name: ${now:...}_${seed}``, or
    # ``ckpt: ${paths.output_dir}/ckpt`` beside ``output_dir: ${hydra:runtime.output_dir}``)
    # is computed from it, so it is left out too, where deleting would fail to resolve it.
    with open_dict(copy):
        copy.pop("hydra", None)
        for path in _not_identity(copy):
            parent, _, leaf = path.rpartition(".")
            node = OmegaConf.select(copy, parent) if parent else copy
            if isinstance(node, DictConfig):
                node[leaf] = _LEFT_OUT  # (pop would resolve it)
    try:
        plain = OmegaConf.to_container(copy, resolve=True)
    except OmegaConfBaseException as exc:
        raise ConfigError(
            f"Could not resolve the job's config to know what the job is: {exc}"
        ) from None
    assert isinstance(plain, dict)
    kept = _without_left_out(plain)
    assert isinstance(kept, dict)
    return {str(k): v for k, v in kept.items()}


# What a left-out value resolves to while the identity is computed (no ``${``, never a
# real value), and a test of whether a resolved value was computed from one.
_LEFT_OUT = "<rlsweep: left out of the job's identity>"


def _without_left_out(data: Any) -> Any:
    """Plain data without the values computed from a left-out one (a dict's key, a list's
    element); a container left empty by that is kept, as deleting those values leaves it."""
    if isinstance(data, dict):
        return {k: _without_left_out(v) for k, v in data.items() if not _is_left_out(v)}
    if isinstance(data, list):
        return [_without_left_out(v) for v in data if not _is_left_out(v)]
    return data


def _is_left_out(value: Any) -> bool:
    return isinstance(value, str) and _LEFT_OUT in value


def _interpolates(data: Any) -> bool:
    """Whether plain data holds a string that OmegaConf would resolve (or unescape)."""
    if isinstance(data, dict):
        return any(_interpolates(v) for v in data.values())
    if isinstance(data, list):
        return any(_interpolates(v) for v in data)
    return isinstance(data, str) and "${" in data


def _not_identity(node: Any, prefix: str = "") -> list[str]:
    """Paths of string leaves that call one of NOT_IDENTITY_RESOLVERS."""
    out: list[str] = []
    if isinstance(node, DictConfig):
        for key in node:
            child = node._get_node(key)
            path = f"{prefix}{key!s}"
            if isinstance(child, DictConfig):
                out += _not_identity(child, path + ".")
            else:
                value = getattr(child, "_value", lambda: None)()
                if isinstance(value, str) and any(
                    f"${{{r}:" in value for r in NOT_IDENTITY_RESOLVERS
                ):
                    out.append(path)
    return out


def _split(path: str) -> list[str]:
    return [p for p in path.split(".") if p]


def lookup(data: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    """``(True, value)`` at a dotted path of plain data, else ``(False, None)``."""
    node: Any = data
    for part in _split(path):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def without(data: Mapping[str, Any], paths: Sequence[str]) -> dict[str, Any]:
    """A deep copy of plain data with the values at ``paths`` removed."""
    import copy

    out = copy.deepcopy(dict(data))
    for path in paths:
        parts = _split(path)
        node: Any = out
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and parts:
            node.pop(parts[-1], None)
    return out


def _index(value: Any) -> int | None:
    """An index (replicate, root) if ``value`` is one: an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def hydra_ignored_keys(cfg: DictConfig) -> tuple[str, ...]:
    """Hydra's own declaration of keys that do not identify a job (its directory name)."""
    keys = OmegaConf.select(cfg, "hydra.job.config.override_dirname.exclude_keys", default=None)
    if keys is None:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            keys = HydraConfig.get().job.config.override_dirname.exclude_keys
    return tuple(str(k) for k in keys or ())


def identity_of(
    plain: Mapping[str, Any],
    keys: Keys,
    extra_ignored: Sequence[str] = (),
    choices: Mapping[str, Any] | None = None,
) -> Identity:
    """The identity of a job whose own keys are ``plain`` and whose config-group choices
    are ``choices`` (Hydra's ``runtime.choices``; see the module docstring)."""
    ignored = [*keys.ignore, *extra_ignored]
    config = without(plain, ignored)
    _refuse_non_finite(config)
    chosen = job_choices(choices, ignored)
    if chosen:  # (none: the identity of a job of an app without groups, as it always was)
        config[CHOICES_PATH[0]] = {CHOICES_PATH[1]: chosen}
    agent_side = [*keys.agent, *(_choice_path(g) for g in chosen if under(g, keys.agent))]
    # A value that is no index (an app's ``seed: -1``) stays an ordinary value.
    replicate = _index(lookup(config, keys.replicate)[1]) if keys.replicate else None
    root = _index(lookup(config, keys.root)[1]) if keys.root else None
    threads = lookup(config, keys.threads)[1]
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise ConfigError(
            f"'{keys.threads}' is the job's torch/BLAS thread count: an integer >= 1, "
            f"got {threads!r}."
        )
    agent = {path: value for path in agent_side for found, value in [lookup(config, path)] if found}
    as_index = [keys.replicate] if keys.replicate and replicate is not None else []
    if keys.root and root is not None:
        as_index.append(keys.root)
    return Identity(
        config=config,
        replicate=replicate or 0,
        shared=without(config, [*as_index, *agent_side]),
        agent=agent,
        root=root or 0,
        crn=True,
        threads=threads or 1,
        derived_seed=bool(keys.replicate)
        and replicate is not None
        and keys.replicate_value == "derived",
    )


def _refuse_non_finite(node: Any, path: str = "") -> None:
    """A ConfigError naming the first value that is NaN or infinite: no identity (no JSON
    number, and NaN is not equal to itself) can say what such a job is."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            _refuse_non_finite(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            _refuse_non_finite(value, f"{path}[{i}]")
    elif isinstance(node, float) and not math.isfinite(node):
        raise ConfigError(
            f"Config key '{path}' is {node!r}: a job's values must be finite numbers (its "
            "identity, which resume and its seeds read, cannot hold NaN or infinity). Give a "
            "finite value, or a string the app converts itself (e.g. 'inf')."
        )


def _choice_path(group: str) -> str:
    """The dotted path of a group's choice in an identity's config."""
    return ".".join((*CHOICES_PATH, group))


def without_choices(identity: Identity) -> Identity:
    """``identity`` without its config-group choices, as an older rlsweep computed it (for
    a result it recorded: the same job iff this equals its recorded identity)."""
    top = CHOICES_PATH[0]
    return dataclasses.replace(
        identity,
        config={k: v for k, v in identity.config.items() if k != top},
        shared={k: v for k, v in identity.shared.items() if k != top},
        agent={k: v for k, v in identity.agent.items() if not k.startswith(f"{top}.")},
    )


def setting_changes(then: dict[str, Any], now: dict[str, Any], limit: int = 3) -> str | None:
    """The settings that differ between two computation configs (a result's and the job's
    current one): ``agent.learning_rate: 0.001 then, 0.0005 now``, or None."""

    def flat(node: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(node, dict):
            out: dict[str, Any] = {}
            for key, value in node.items():
                out.update(flat(value, f"{prefix}{key}."))
            return out
        return {prefix[:-1]: node}

    # Both as JSON gives them (tuples as lists, ints and floats as written).
    old = flat(json.loads(json.dumps(then, default=str)))
    new = flat(json.loads(json.dumps(now, default=str)))
    missing = object()
    diffs = [
        f"{key}: {old.get(key, 'unset')!r} then, {new.get(key, 'unset')!r} now"
        for key in sorted(old.keys() | new.keys())
        if old.get(key, missing) != new.get(key, missing)
    ]
    if not diffs:
        return None
    more = f" (and {len(diffs) - limit} more)" if len(diffs) > limit else ""
    return "; ".join(diffs[:limit]) + more
