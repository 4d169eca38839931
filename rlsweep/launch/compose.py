"""Compose a sweep's job configs without recomposing what they share, and only where needed.

Hydra composes every job from scratch (``load_sweep_config``: in a large grid, most of the
time before the last job can start; bench/launcher.py measures it). Jobs of a grid mostly
differ in *values* (``seed=3``), which Hydra applies after composition. So the composer
builds the config once per distinct set of config-group choices (``agent=ppo``, the
*base*), and a job is its :class:`Recipe`: the pickled base, the job's value overrides, and
the fields that depend on the overrides (``hydra.overrides.task``,
``hydra.job.override_dirname``, its directory's name). ``Recipe.compose`` rebuilds the full
config in the worker that runs the job.

Before anything starts, the parent checks every job (:meth:`FastComposer.plan`): it applies
the job's value overrides with Hydra's own ``_apply_overrides_to_config`` to a copy of the
base's own keys, which raises Hydra's errors for a bad key or value and gives the task's
validator the job's values. A job's directory is resolved when needed (``Recipe.directory``)
from a *view* of the base with a light ``hydra`` node. Tests check that ``Recipe.compose``
equals ``load_sweep_config`` on every kind of override, and the directories.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import math
import pickle
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, ValueType
from hydra.errors import ConfigCompositionException
from hydra.types import HydraContext
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from rlsweep.choices import is_job_group
from rlsweep.errors import ConfigError
from rlsweep.store import job_dir_name, job_name

_T = TypeVar("_T")

# The parts of the ``hydra`` node a job's view keeps: what a job directory or a
# ``${hydra:...}`` interpolation in the job's own keys usually refers to.
VIEW_HYDRA_KEYS = ("job", "sweep", "run", "runtime", "mode", "overrides")


@dataclass(frozen=True)
class Recipe:
    """How to compose one job's config in any process; small and picklable."""

    # The pickled config composed for the job's config-group choices (shared by jobs).
    base: bytes
    # The same with only VIEW_HYDRA_KEYS under ``hydra``: enough to resolve a job's
    # directory, and a third of the cost of a full copy.
    view: bytes
    # The job's value overrides (e.g. "seed=3"), parsed, applied to a copy of the base.
    values: tuple[Override, ...]
    # The job's overrides without Hydra's own: hydra.overrides.task.
    task: tuple[str, ...]
    # hydra.job.override_dirname, computed from ``task``.
    override_dirname: str
    # The sweep config's resolver cache (e.g. ${now:...}), shared by all jobs.
    cache: dict[str, Any]
    # The base's directory rule, when its jobs' directories need no config of their own.
    directories: Directories | None = field(default=None, compare=False)
    # The job's directory name under rlsweep's naming rule (the values of the keys the
    # sweep varies: store.job_name), put in hydra.sweep.subdir; None: the config's rule.
    name: str | None = None
    # The base's config-group choices (hydra.runtime.choices): part of what the job is.
    choices: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def compose(self, idx: int | None = None) -> DictConfig:
        """The job's config: Hydra's ``load_sweep_config``, and the job's number if given."""
        return self._build(self.base, idx)

    def directory(self, idx: int) -> Path:
        """Where the job writes (hydra.sweep.dir / hydra.sweep.subdir), resolved as
        ``run_job`` resolves it: ``${hydra:...}`` reads the job's own config."""
        if self.directories is not None:
            return self.directories.directory(self, idx)
        return self._resolve(idx, resolve_dir)

    def _resolve(self, idx: int, resolve: Callable[[DictConfig], _T]) -> _T:
        try:
            return resolve(self._build(self.view, idx))
        except OmegaConfBaseException:  # refers to a part of hydra the view leaves out
            return resolve(self.compose(idx))

    def _build(self, pickled: bytes, idx: int | None) -> DictConfig:
        cfg: DictConfig = pickle.loads(pickled)
        # Checked in the parent by FastComposer.plan, so these apply cleanly.
        ConfigLoaderImpl._apply_overrides_to_config(list(self.values), cfg)
        with read_write(cfg.hydra), open_dict(cfg.hydra):
            cfg.hydra.overrides.task = list(self.task)
            cfg.hydra.job.override_dirname = self.override_dirname
            if self.name is not None:
                cfg.hydra.sweep.subdir = self.name
        if idx is not None:
            with open_dict(cfg):
                cfg.hydra.job.id = f"{cfg.hydra.job.name}_{idx}"
                cfg.hydra.job.num = idx
        OmegaConf.set_cache(cfg, self.cache)
        return cfg


@contextlib.contextmanager
def _installed(config: DictConfig) -> Iterator[None]:
    """The job's own config installed as Hydra's, as ``run_job`` has it when it resolves
    the job's directory (what set_config installs, without its copy: ``${hydra:...}``
    reads this config's hydra)."""
    hydra_config = HydraConfig.instance()
    saved = hydra_config.cfg
    hydra_config.cfg = config  # type: ignore[assignment]
    try:
        yield
    finally:
        hydra_config.cfg = saved


def resolve_dir(config: DictConfig) -> Path:
    """A composed job's directory, as ``run_job`` resolves it."""
    with _installed(config):
        return job_dir_of(config)


def resolve_sweep_dir(config: DictConfig) -> str:
    """A composed job's hydra.sweep.dir, as ``run_job`` resolves it."""
    with _installed(config):
        return _sweep_dir(config)


def _sweep_dir(config: DictConfig) -> str:
    return str(OmegaConf.select(config, "hydra.sweep.dir", throw_on_missing=True))


def job_dir_of(config: DictConfig) -> Path:
    """Where a composed multirun job writes (hydra.sweep.dir / hydra.sweep.subdir)."""
    subdir = OmegaConf.select(config, "hydra.sweep.subdir", throw_on_missing=True)
    return Path(_sweep_dir(config)) / str(subdir)


# rlsweep's hydra.sweep.subdir (the opt-in's and the built-in app's): a job named by its
# overrides; under rlsweep's sweeper, by the values of the keys the sweep varies.
RLSWEEP_SUBDIR = "${rlsweep.job_dir:${hydra.job.override_dirname}}"
# hydra.sweep.subdir values that are a function of hydra.job.override_dirname alone
# (rlsweep's, and the plain one), and that function.
_SUBDIRS: dict[str, Callable[[str], str]] = {
    RLSWEEP_SUBDIR: job_dir_name,
    "${hydra.job.override_dirname}": str,
}
# Resolvers with one value for every job of a sweep (${now:...} reads the shared cache).
_SWEEP_WIDE_RESOLVERS = frozenset({"rlsweep.job_dir", "now"})
_KEY_REF = re.compile(r"\$\{([A-Za-z_][\w.]*)\}")
_RESOLVER_REF = re.compile(r"\$\{([A-Za-z_][\w.]*):")


@dataclass
class Directories:
    """The directories of one base's jobs without a config of each job's own (resolving
    each job's config for its directory would be most of a large resume's time:
    bench/scale.py measures a 10,000-job resume). When hydra.sweep.subdir is a function of
    hydra.job.override_dirname (or the recipe's name) and hydra.sweep.dir reads no key a job
    may set but the plain app keys ``reads``, a job's directory is the sweep directory,
    resolved once per distinct override of those keys, joined with its name. :meth:`of` says
    whether a base qualifies; tests/test_compose.py checks it against Hydra."""

    subdir: Callable[[str], str]
    reads: frozenset[str]
    resolved: dict[tuple[str, ...], str] = field(default_factory=dict)

    @staticmethod
    def of(composed: DictConfig) -> Directories | None:
        """The rule for a composed config's jobs, or None when it does not apply."""
        sweep = OmegaConf.to_container(composed.hydra.sweep, resolve=False)
        assert isinstance(sweep, dict)
        raw_dir, subdir = sweep.get("dir"), _SUBDIRS.get(str(sweep.get("subdir")))
        if not isinstance(raw_dir, str) or subdir is None:
            return None
        keys, resolvers = _KEY_REF.findall(raw_dir), _RESOLVER_REF.findall(raw_dir)
        if raw_dir.count("${") != len(keys) + len(resolvers):  # relative, escaped, nested
            return None
        if not set(resolvers) <= _SWEEP_WIDE_RESOLVERS:
            return None
        reads = set()
        for key in keys:
            if key == "hydra.job.name":
                continue
            parent, _, leaf = key.rpartition(".")
            node = OmegaConf.select(composed, parent) if parent else composed
            if (
                key.startswith("hydra.")
                or not isinstance(node, DictConfig)
                or leaf not in node
                or OmegaConf.is_interpolation(node, leaf)
                or OmegaConf.is_missing(node, leaf)
                or isinstance(node[leaf], DictConfig | ListConfig)
            ):
                return None
            reads.add(key)
        return Directories(subdir, frozenset(reads))

    def directory(self, recipe: Recipe, idx: int) -> Path:
        touching = tuple(str(o.input_line) for o in recipe.values if self._reads(o))
        sweep_dir = self.resolved.get(touching)
        if sweep_dir is None:
            sweep_dir = self.resolved[touching] = recipe._resolve(idx, resolve_sweep_dir)
        name = recipe.name if recipe.name is not None else self.subdir(recipe.override_dirname)
        return Path(sweep_dir) / name

    def _reads(self, override: Override) -> bool:
        key = override.key_or_group
        return any(
            key == r or key.startswith(f"{r}.") or r.startswith(f"{key}.") for r in self.reads
        )


@dataclass(frozen=True)
class Naming:
    """How rlsweep's sweeper names a job's directory besides the keys the sweep varies."""

    # The replicate key, named last (``optim.lr=0.001,seed=3``): ``ls`` keeps groups together.
    replicate: str | None = None
    # Whether the config groups the command line chooses name the job (``algo=b,seed=0``):
    # a group choice is part of a job (rlsweep.choices), so two sweeps into one directory
    # that choose another option never share a job's directory. Off for a task whose own
    # identity rule decides what a job is (the built-in app's).
    choices: bool = False
    # Groups that are not part of a job (hydra.launcher.identity.ignore).
    ignored: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Base:
    full: bytes  # the composed config, pickled
    view: bytes  # the same with only VIEW_HYDRA_KEYS under hydra, pickled
    task: bytes  # the job's own keys only (no hydra), pickled
    dirname: dict[str, Any]  # hydra.job.config.override_dirname: kv_sep, item_sep, exclude_keys
    directories: Directories | None  # how its jobs' directories are found, if no config
    rlsweep_names: bool  # whether hydra.sweep.subdir is rlsweep's rule (RLSWEEP_SUBDIR)
    choices: dict[str, Any]  # hydra.runtime.choices: which option of each config group


class FastComposer:
    """``load_sweep_config`` for many jobs of one sweep, sharing the expensive part."""

    def __init__(self, hydra_context: HydraContext, master: DictConfig) -> None:
        self.loader = hydra_context.config_loader
        self.master = master
        self.parser = OverridesParser.create(config_loader=self.loader)
        repo = getattr(self.loader, "repository", None)
        self.group_exists = repo.group_exists if repo is not None else None
        # The composed config of each distinct set of structural overrides.
        self.bases: dict[tuple[str, ...], _Base] = {}
        # The keys the sweep varies, which name its jobs' directories (store.job_name);
        # None: a sweeper that does not say (jobs named by all their overrides).
        self.name_keys: frozenset[str] | None = None
        # How else a job's name is made: its replicate key last, and the config groups the
        # command line chooses (``algo=b``, part of the job) in it, but those ignored.
        self.naming = Naming()
        # Each distinct override string parsed and classified once (a grid repeats them).
        self._parsed: dict[str, tuple[Override, bool]] = {}
        self.cache = OmegaConf.get_cache(master)

    def _structural(self, override: Override) -> bool:
        """Whether an override changes composition (a group choice, a package, hydra's own)."""
        if (
            self.group_exists is None
            or override.is_hydra_override()
            or override.package is not None
        ):
            return True
        if override.is_sweep_override():
            return True
        value = override.value()
        return bool(self.group_exists(override.key_or_group)) and not isinstance(value, dict)

    def parse(self, overrides: Sequence[str]) -> list[tuple[Override, bool]]:
        """Each override parsed, with whether it is structural (cached per string)."""
        out = []
        for line in overrides:
            parsed = self._parsed.get(line)
            if parsed is None:
                override = self.parser.parse_overrides([line])[0]
                structural = self._structural(override)
                # Sent to workers in recipes: without the config loader (and its repository).
                override.config_loader = None
                parsed = self._parsed[line] = (override, structural)
            out.append(parsed)
        return out

    def prime(self, sweeps: Sequence[Override]) -> None:
        """Record the elements of numeric sweeps (``seed=range(1024)``) as parsed.

        The sweeper has already parsed them: each element's line, ``key=value`` as Hydra's
        basic sweeper writes it, stands for the override it would parse to. Parsing such
        lines again would delay a large sweep's first job by a parse per element.
        Only ints, floats and bools, whose text round-trips exactly, are recorded.
        """
        for sweep in sweeps:
            if not sweep.is_discrete_sweep() or sweep.package is not None:
                continue
            key = sweep.get_key_element()
            for text, value in zip(
                sweep.sweep_string_iterator(), sweep.sweep_iterator(), strict=True
            ):
                if type(value) not in (int, float, bool) or (
                    isinstance(value, float) and not math.isfinite(value)
                ):
                    continue
                line = f"{key}={text}"
                element = dataclasses.replace(
                    sweep,
                    value_type=ValueType.ELEMENT,
                    _value=value,
                    input_line=line,
                    config_loader=None,
                )
                self._parsed.setdefault(line, (element, self._structural(element)))

    def _base(self, key: tuple[str, ...]) -> _Base:
        base = self.bases.get(key)
        if base is None:
            composed = self.loader.load_sweep_config(self.master, list(key))
            full = _dumps(composed)
            directories = Directories.of(composed)
            names = composed.hydra.sweep._get_node("subdir")._value() == RLSWEEP_SUBDIR
            choices = OmegaConf.to_container(composed.hydra.runtime.choices)
            with read_write(composed.hydra), open_dict(composed.hydra):
                for name in [k for k in composed.hydra if k not in VIEW_HYDRA_KEYS]:
                    del composed.hydra[name]
            view = _dumps(composed)
            dirname = OmegaConf.to_container(
                composed.hydra.job.config.override_dirname, resolve=True
            )
            with read_write(composed), open_dict(composed):
                del composed["hydra"]
            task = _dumps(composed)
            base = _Base(full, view, task, dirname, directories, names, choices)  # type: ignore[arg-type]
            self.bases[key] = base
        return base

    def plan(self, overrides: Sequence[str]) -> tuple[Recipe, DictConfig]:
        """The job's recipe, and its own keys (no ``hydra``) with its overrides applied.

        Applying the overrides here raises Hydra's composition errors (a ConfigError
        naming the allowed keys for an unknown one) before any job starts.
        """
        parsed = self.parse(overrides)
        values = [o for o, structural in parsed if not structural]
        base = self._base(tuple(str(o.input_line) for o, structural in parsed if structural))
        keys: DictConfig = pickle.loads(base.task)
        try:
            ConfigLoaderImpl._apply_overrides_to_config(values, keys)
        except ConfigCompositionException as exc:
            raise _explain(exc, values, keys) from None
        task = [o for o, _ in parsed if not o.is_hydra_override()]
        name = None
        if base.rlsweep_names and self.name_keys is not None:
            excluded = tuple(base.dirname.get("exclude_keys") or ())
            shown = self.name_keys - set(excluded)
            pairs = [
                (o.key_or_group, o.get_value_element_as_str())
                for o, structural in parsed
                if not o.is_hydra_override()
                and (o.key_or_group in shown or (structural and self._chosen(o, excluded)))
            ]
            name = job_name(pairs, last=self.naming.replicate)
        recipe = Recipe(
            base=base.full,
            view=base.view,
            values=tuple(values),
            task=tuple(str(o.input_line) for o in task),
            override_dirname=get_overrides_dirname(overrides=task, **base.dirname),
            cache=self.cache,
            directories=base.directories,
            name=name,
            choices=base.choices,
        )
        return recipe, keys

    def _chosen(self, override: Override, excluded: Sequence[str]) -> bool:
        """Whether an override is a config-group choice that names the job (see Naming)."""
        return (
            self.naming.choices
            and override.package is None
            and not override.is_delete()
            and self.group_exists is not None
            and bool(self.group_exists(override.key_or_group))
            and is_job_group(override.key_or_group, [*self.naming.ignored, *excluded])
        )

    def launcher_settings(self) -> dict[tuple[str, ...], str]:
        """The launcher's and sweeper's settings (unresolved, as JSON) of each set of
        config-group choices composed so far."""
        out = {}
        for key, base in self.bases.items():
            hydra = pickle.loads(base.full).hydra
            settings = {
                name: OmegaConf.to_container(hydra[name], resolve=False)
                for name in ("launcher", "sweeper", "sweep")
            }
            out[key] = json.dumps(settings, sort_keys=True, default=str)
        return out


def _dumps(config: DictConfig) -> bytes:
    """A composed config pickled: by pickle (fast), or by cloudpickle when its structured
    configs are classes made at run time (hydra-zen's ``builds``), which pickle cannot find by
    name. Both are read back with ``pickle.loads``."""
    try:
        return pickle.dumps(config, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError):
        import cloudpickle

        return cloudpickle.dumps(config, protocol=pickle.HIGHEST_PROTOCOL)


def _explain(exc: ConfigCompositionException, values: list[Override], cfg: DictConfig) -> Exception:
    """Hydra says a key is "not in struct"; say which keys are allowed there, and the closest."""
    if not isinstance(exc.__cause__, ConfigAttributeError | ConfigKeyError):
        return exc
    for override in values:
        key = override.key_or_group
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent) if parent else cfg
        if not isinstance(node, DictConfig) or leaf in node:
            continue
        allowed = sorted(str(k) for k in node if k != "hydra")
        close = difflib.get_close_matches(leaf, allowed, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return ConfigError(
            f"Unknown config key '{key}' ({override.input_line}).{hint} Allowed keys"
            f"{' in ' + parent if parent else ''}: {', '.join(allowed)}. To add a new key on "
            f"purpose, write +{override.input_line}."
        )
    return exc
