"""Paths: where the shipped YAML lives (in a wheel and in an editable checkout) and the
config directories a command line adds, how a path is printed to the user, and the
program's name in usage lines. Light to import: ``python -m rlsweep --help`` reads it
before anything else of rlsweep."""

from __future__ import annotations

import sys
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def conf_dir() -> Path:
    """``rlsweep/conf`` inside an installed wheel, or ``conf/`` beside the package in a checkout."""
    for candidate in (_PACKAGE / "conf", _PACKAGE.parent / "conf"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise FileNotFoundError(
        f"rlsweep's conf/ directory was not found next to {_PACKAGE}; reinstall rlsweep."
    )


def shown(path: Path) -> Path:
    """``path`` as printed to the user: relative to the working directory when under it
    (as a user types it), else absolute; one way for every command that prints paths."""
    full, cwd = path.absolute(), Path.cwd()
    return full.relative_to(cwd) if full.is_relative_to(cwd) else full


def config_dirs(argv: list[str]) -> list[Path]:
    """The shipped conf/ and any ``--config-dir``/``-cd`` given on the command line."""
    dirs = [conf_dir()]
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            dirs.append(Path(argv[i + 1]))
        elif arg.startswith("--config-dir="):
            dirs.append(Path(arg.split("=", 1)[1]))
    return dirs


def prog() -> str:
    """The program's name as the user typed it: ``python -m rlsweep`` (or the script)."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "python -m rlsweep" if name in ("", "__main__.py", "-c", "-m") else name
