"""A user's type checker sees rlsweep's API typed: the wheel ships ``py.typed``, and a function
decorated with ``@rlsweep.task``, bare or with declarations, keeps its parameters and return
type, so ``mypy --strict`` on the user's code catches a wrong call through the decorator.

The check runs on the wheel as a user installs it, never on this checkout: the wheel is
unpacked into a venv without the system's site-packages (so without the editable install),
beside links to the two typed packages the user's code imports (hydra, omegaconf), and mypy
reads that venv's site-packages (``--python-executable``) with a config file of its own.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# What a user writes, typed, and mypy --strict must accept as it is.
GOOD = """\
from dataclasses import dataclass

import hydra
from omegaconf import DictConfig

import rlsweep


@dataclass
class Config:
    lr: float
    seed: int


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
@rlsweep.task(keys=rlsweep.Keys(agent=("algo", "lr"), ignore=("tag",)))
def main(cfg: DictConfig) -> dict[str, float]:
    job = rlsweep.current()
    job.log(0, episode_return=1.0)
    seed: int = job.seeds.seed("init", bits=32)
    return {"return": float(cfg.lr) + seed}


@rlsweep.task
def bare(cfg: Config) -> float:
    return cfg.lr


@rlsweep.task(keys=rlsweep.Keys(agent=("lr",)))
def declared(cfg: DictConfig) -> dict[str, float]:
    return {"return": float(cfg.lr)}


def calls() -> None:
    value: float = bare(Config(lr=1e-3, seed=0))
    values: dict[str, float] = declared(DictConfig({"lr": 1e-3}))
    print(value, values)
"""

# Wrong calls of those functions: each marked line must be a mypy error naming the function.
BAD = """\
from omegaconf import DictConfig

from good import Config, bare, declared


def calls() -> None:
    bare("lr=0.1")  # error: bare
    declared(3)  # error: declared
    text: str = bare(Config(lr=1e-3, seed=0))  # error: assignment
    number: float = declared(DictConfig({"lr": 1e-3}))  # error: assignment
    print(text, number)
"""

_ERROR = re.compile(r"^(?P<file>[\w.]+):(?P<line>\d+): error: (?P<message>.*)$")


def _site_packages(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_path('purelib'))"
    done = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True)
    return Path(done.stdout.strip())


@pytest.fixture(scope="module")
def user_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a venv holding the wheel built from this tree, and hydra and omegaconf."""
    out = tmp_path_factory.mktemp("typed")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run([*command, "-w", str(out / "wheel"), str(ROOT)], check=True, capture_output=True)
    (wheel,) = (out / "wheel").glob("rlsweep-*.whl")
    assert "rlsweep/py.typed" in zipfile.ZipFile(wheel).namelist()
    venv = out / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = _site_packages(python)
    zipfile.ZipFile(wheel).extractall(site)  # what installing the wheel puts there
    for name in ("hydra", "omegaconf"):  # typed (py.typed) dependencies of the user's code
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.submodule_search_locations
        (site / name).symlink_to(next(iter(spec.submodule_search_locations)))
    where = subprocess.run(
        [python, "-c", "import rlsweep; print(rlsweep.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=out,  # not this checkout ("" is first on sys.path)
    )
    assert Path(where.stdout.strip()) == site / "rlsweep" / "__init__.py"
    return python


def _clean_env() -> dict[str, str]:
    """The environment without paths that could put this checkout in mypy's or python's way."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}


def mypy_strict(python: Path, folder: Path, files: dict[str, str]) -> tuple[int, str]:
    """``mypy --strict`` on ``files`` (name: text), written in ``folder``, against the
    packages of ``python``: its exit status and output."""
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    (folder / "mypy.ini").write_text("[mypy]\n")  # no project config, no user config
    command = [sys.executable, "-m", "mypy", "--strict", "--config-file", "mypy.ini"]
    cache = python.parents[2] / "mypy_cache"  # one per venv: the second run reuses the first's
    command += ["--cache-dir", str(cache), "--python-executable", str(python)]
    command += ["--no-color-output", "--no-error-summary", "--show-error-codes", *files]
    done = subprocess.run(
        command, cwd=folder, capture_output=True, text=True, env=_clean_env(), timeout=120
    )
    return done.returncode, done.stdout + done.stderr


def test_the_wheel_is_typed_and_a_decorated_task_keeps_its_signature(
    user_python: Path, tmp_path: Path
) -> None:
    status, output = mypy_strict(user_python, tmp_path / "user", {"good.py": GOOD})
    # rlsweep is found, installed and typed (no "missing library stubs or py.typed marker",
    # and no "Untyped decorator makes function ... untyped" under --strict).
    assert "py.typed" not in output and "import-untyped" not in output, output
    assert (status, output.strip()) == (0, ""), output


def test_a_wrong_call_through_the_decorator_is_a_type_error(
    user_python: Path, tmp_path: Path
) -> None:
    status, output = mypy_strict(user_python, tmp_path / "user", {"good.py": GOOD, "bad.py": BAD})
    errors = [m.groupdict() for m in map(_ERROR.match, output.splitlines()) if m]
    found = {int(e["line"]): e["message"] for e in errors if e["file"] == "bad.py"}

    def message(marked: str) -> str:
        (number,) = (n for n, line in enumerate(BAD.splitlines(), 1) if line.endswith(marked))
        return found.pop(number, "no error")

    # The wrong argument is named with the function and the type it expects...
    wrong = 'Argument 1 to "{}" has incompatible type "{}"; expected "{}"'
    bare = message('bare("lr=0.1")  # error: bare')
    assert wrong.format("bare", "str", "Config") in bare, output
    declared = message("(3)  # error: declared")
    assert wrong.format("declared", "int", "DictConfig") in declared, output
    # ...and the return type is the function's own, not Any.
    assigned = 'expression has type "{}", variable has type "{}"'
    assert assigned.format("float", "str") in message("seed=0))  # error: assignment"), output
    text = message("1e-3}))  # error: assignment")
    assert assigned.format("dict[str, float]", "float") in text, output
    # No other error, here or in good.py.
    assert (status, found, len(errors)) == (1, {}, 4), output
