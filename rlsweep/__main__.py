"""``python -m rlsweep``: see rlsweep.app. ``--help`` and ``--version`` are answered here,
before the app's imports: Hydra's ``--help`` composes the config and deep-copies every
group to list them (seconds), and its ``--version`` is Hydra's."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

# Options of the shipped groups that are not for users (conf/env/fault.yaml: the tests').
_HIDDEN: dict[str, set[str]] = {"env": {"fault"}}

_USAGE = """\
usage: {prog} [-m] [GROUP=OPTION ...] [KEY=VALUE ...]
       {prog} --cfg job [GROUP=OPTION ...] [KEY=VALUE ...]
       {prog} --help | --version | --hydra-help

One reinforcement-learning job (an agent trained on an env at one replicate index), or with
-m a sweep of them: a grid, a search (search.trials=N) or a comparison (compare.rounds=N).

Examples:
  one job (ppo on cartpole), in runs/default/:
    {prog}
  a grid of 16 jobs, in multirun/default/ (its summary and report at the end):
    {prog} -m agent=a2c,ppo 'seed=range(8)'
  an experiment file (a shipped one, or your own through --config-dir):
    {prog} -m +experiment=main_grid
  the same grid as SLURM job arrays:
    {prog} -m agent=a2c,ppo 'seed=range(8)' launcher=slurm hydra.launcher.slurm.partition=gpu
  a hyperparameter search, 16 trials of 3 replicates:
    {prog} -m +preset=ppo_cartpole 'agent.learning_rate=interval(1e-4,1e-2)' search.trials=16
  an adaptive comparison (AdaStop: replicates in rounds until every pair is decided):
    {prog} -m agent=ppo,a2c env=acrobot compare.rounds=4
  the config a job gets, nothing run:
    {prog} --cfg job agent=a2c
  a sweep's report, written again:
    python -m rlsweep.report multirun/default

Config groups (GROUP=OPTION; +GROUP=OPTION for a group without a default):
{groups}
Flags:
  -m, --multirun          run a sweep: every combination of the values swept (a=1,2 'b=range(3)')
  --cfg job               print the config and exit (nothing runs; --cfg hydra: Hydra's)
  -cd, --config-dir DIR   also read config groups from DIR (your own DIR/experiment/*.yaml)
  --info                  Hydra's view of the config's sources
  --hydra-help            Hydra's own help (its flags and hydra/* groups)
  --version               rlsweep's version

Every key and what it does: docs/configuration.md (the config itself: {prog} --cfg job).
Run one job before a sweep: a mistyped key or value stops it before anything is written.
"""


def _defaults(conf: Path) -> dict[str, str]:
    """The groups conf/config.yaml's defaults list chooses, and their options."""
    import yaml

    chosen: dict[str, str] = {}
    for entry in yaml.safe_load((conf / "config.yaml").read_text()).get("defaults", []):
        for key, value in entry.items() if isinstance(entry, dict) else ():
            if not str(key).startswith("override "):  # (null: the group, with no default)
                chosen[str(key)] = value if isinstance(value, str) else ""
    return chosen


def _groups(dirs: list[Path]) -> str:
    """One line per group of ``dirs`` (the shipped conf/ first): its options, the default."""
    defaults = _defaults(dirs[0])
    options: dict[str, set[str]] = {}
    for directory in dirs:
        for folder in sorted(p for p in directory.iterdir() if p.is_dir()):
            found = {f.stem for f in folder.glob("*.yaml")} - _HIDDEN.get(folder.name, set())
            if found:
                options.setdefault(folder.name, set()).update(found)
    lines = []
    for group, names in sorted(options.items(), key=lambda g: (g[0] not in defaults, g[0])):
        shown = [f"{n} (default)" if defaults.get(group) == n else n for n in sorted(names)]
        plus = "" if group in defaults else "+"
        lines += textwrap.wrap(
            ", ".join(shown), 90, initial_indent=f"  {plus}{group}: ", subsequent_indent="    "
        )
    return "\n".join(lines) + "\n"


def _help(argv: list[str]) -> str:
    from rlsweep.paths import config_dirs, prog

    dirs = config_dirs(argv)
    return _USAGE.format(prog=prog(), groups=_groups([d for d in dirs if d.is_dir()]))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    import rlsweep

    try:
        hydra = f" (Hydra {version('hydra-core')})"
    except PackageNotFoundError:
        hydra = ""
    return f"rlsweep {rlsweep.__version__}{hydra}"


def _start() -> None:
    """``python -m rlsweep ARGS``: the help or the version, else rlsweep.app.main."""
    argv = sys.argv[1:]
    words = argv[: argv.index("--")] if "--" in argv else argv
    if "--help" in words or "-h" in words:
        print(_help(argv), end="")
        return
    if "--version" in words:
        print(_version())
        return
    from rlsweep.app import main as app_main

    app_main()


# The console script's entry point (pyproject.toml: rlsweep = "rlsweep.__main__:main").
main = _start

if __name__ == "__main__":
    main()
