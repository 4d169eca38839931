"""Paths: where the shipped YAML lives (in a wheel and in an editable checkout), and how a
path is printed to the user."""

from __future__ import annotations

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
