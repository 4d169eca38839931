"""Where the shipped YAML lives, in a wheel and in an editable checkout."""

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
