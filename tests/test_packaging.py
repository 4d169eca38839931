"""The plugin and conf/ are found in a regular (wheel) install, not only in this checkout; the
wheel and the sdist are a complete package (py.typed, the license, one version, the tests'
files); the base install declares what rlsweep imports and nothing it does not; and no page
says that a pinned torch avoids CUDA's packages (what pip installs depends on the index)."""

from __future__ import annotations

import ast
import email
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import TINY

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (whl,) = out.glob("rlsweep-*.whl")
    return whl


def test_wheel_ships_plugin_and_conf_but_no_namespace_init(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "hydra_plugins/rlsweep_launcher/rlsweep_launcher.py" in names
    assert "rlsweep/launch/core.py" in names
    # An __init__.py here would hide every other Hydra plugin.
    assert "hydra_plugins/__init__.py" not in names
    for conf in (
        "config.yaml",
        "agent/ppo.yaml",
        "env/cartpole.yaml",
        "launcher/joblib.yaml",
        "experiment/main_grid.yaml",
        "preset/ppo_cartpole.yaml",
        "launcher/slurm.yaml",
    ):
        assert f"rlsweep/conf/{conf}" in names


def test_multirun_from_a_regular_install_in_another_directory(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    code = (
        "import rlsweep, rlsweep.paths, hydra_plugins.rlsweep_launcher.rlsweep_launcher as c;"
        "print(rlsweep.__file__); print(rlsweep.paths.conf_dir()); print(c.__file__)"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run(
        [sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert all(p.startswith(str(site)) for p in where), where
    proc = subprocess.run(
        [sys.executable, "-m", "rlsweep", "-m", "seed=0,1", *TINY],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[rlsweep] 2/2 done" in proc.stderr  # our launcher, not Hydra's basic one
    res = [json.loads(p.read_text()) for p in (work / "multirun" / "default").glob("*/result.json")]
    assert sorted(r["replicate"] for r in res) == [0, 1]


# --- The package's metadata and files ------------------------------------------------------


def metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as whl:
        (name,) = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(whl.read(name))


def requirements(wheel: Path) -> dict[str | None, set[str]]:
    """The wheel's Requires-Dist names (normalised) by extra; None: the base install."""
    out: dict[str | None, set[str]] = {}
    for line in metadata(wheel).get_all("Requires-Dist") or []:
        match = re.match(r"[A-Za-z0-9_.-]+", line)
        assert match is not None, line
        extra = re.search(r"extra == ['\"]([^'\"]+)['\"]", line)
        out.setdefault(extra.group(1) if extra else None, set()).add(normalised(match.group()))
    return out


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def source_version() -> str:
    match = re.search(
        r'^__version__ = "([^"]+)"$', (ROOT / "rlsweep" / "__init__.py").read_text(), re.M
    )
    assert match is not None
    return match.group(1)


def test_wheel_is_typed_licensed_and_has_one_version(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "rlsweep/py.typed" in names
    meta = metadata(wheel)
    assert meta["Version"] == source_version()  # rlsweep.__version__ is the only one
    assert not re.search(r"^version\s*=", (ROOT / "pyproject.toml").read_text(), re.M)
    assert meta["License-Expression"] == "MIT"
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert zipfile.ZipFile(wheel).read(license_file) == (ROOT / "LICENSE").read_bytes()
    classifiers = set(meta.get_all("Classifier") or [])
    for minor in (10, 11, 12, 13):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert "Typing :: Typed" in classifiers


TYPE_CHECKING = ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def imported_distributions() -> set[str]:
    """The distributions whose modules rlsweep/ and hydra_plugins/ import (at any depth, but
    not under ``if TYPE_CHECKING:``), stdlib and rlsweep's own left out."""
    found: set[str] = set()
    by_module = importlib.metadata.packages_distributions()
    for path in [*(ROOT / "rlsweep").rglob("*.py"), *(ROOT / "hydra_plugins").rglob("*.py")]:
        tree = ast.parse(path.read_text(), str(path))
        hidden = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and ast.unparse(node.test) in TYPE_CHECKING
            for child in node.body
            for n in ast.walk(child)
        }
        for node in ast.walk(tree):
            if id(node) in hidden:
                continue
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                if top in sys.stdlib_module_names or top in ("rlsweep", "hydra_plugins"):
                    continue
                assert top in by_module, f"{path.relative_to(ROOT)} imports {top}: not installed"
                found.add(normalised(by_module[top][0]))
    return found


def test_base_install_is_what_rlsweep_imports_and_no_more(wheel: Path) -> None:
    declared = requirements(wheel)
    base = declared[None]
    # What only some users need is an extra: the code that imports it runs only for them.
    optional = {"parquet", "sb3", "ray", "optuna", "trackers", "tensorboard", "wandb", "mlflow"}
    extras = set().union(*(declared[name] for name in optional))
    imported = imported_distributions()
    assert imported - base - extras == set(), "imported but not declared"
    assert base - imported == set(), "declared in the base install but never imported"
    assert {"pyyaml", "torch"} <= base
    assert not {"pandas", "pyarrow"} & base
    assert declared["parquet"] == {"pyarrow"}
    # The tests read the report's tables with pandas and pyarrow: the test extra has both.
    assert {"pandas", "pyarrow"} <= declared["test"]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, built by the build backend's own hook, unpacked: its root directory."""
    out = tmp_path_factory.mktemp("sdist")
    code = f"import hatchling.build as b; print(b.build_sdist({str(out)!r}))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    archive = out / done.stdout.split()[-1]
    with tarfile.open(archive) as tar:
        tar.extractall(out / "unpacked", filter="data")
    (root,) = (out / "unpacked").iterdir()
    return root


# What .gitignore keeps out at any depth, so out of the sdist too.
IGNORED = re.compile(r"__pycache__|\.(pytest|mypy|ruff)_cache|\.egg-info$|\.pyc$")


def tree(root: Path, folder: str) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in (root / folder).rglob("*")
        if p.is_file() and not any(IGNORED.search(part) for part in p.relative_to(root).parts)
    }


def test_sdist_holds_what_the_tests_run(sdist: Path) -> None:
    for folder in ("examples", "scripts", "tests", "conf", "rlsweep", "hydra_plugins"):
        missing = tree(ROOT, folder) - tree(sdist, folder)
        assert not missing, f"not in the sdist: {sorted(missing)[:5]}"
    for name in ("pyproject.toml", "README.md", "LICENSE", "rlsweep/py.typed"):
        assert (sdist / name).is_file(), name
    # conf/ once, at the root: no copy under rlsweep/ (the wheel's force-include makes that).
    assert not (sdist / "rlsweep" / "conf").exists()
    # Its examples tests are collected from it, on its own files (the run itself:
    # bench/README.md, "The package").
    env = {**os.environ, "PYTHONPATH": str(sdist), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_examples.py"],
        cwd=sdist,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"^\d+ tests? collected", done.stdout, re.M), done.stdout[-2000:]


# --- What the pages say about installing torch ---------------------------------------------

# A claim that installing one torch release keeps pip from CUDA's packages: with PyPI's index
# any torch requirement resolves to the CUDA build on Linux; only PyTorch's CPU index (or a
# CPU wheel already on the machine) gives the CPU build.
PINNED_TORCH = re.compile(r"torch\s*==\s*\d|torch \d+\.\d+(\.\d+)? first")
AVOIDS_CUDA = re.compile(
    r"keeps? pip from|avoids?|prevents?|without (the )?CUDA|no CUDA|instead of (the )?CUDA"
    r"|first on CPU|newer release pulls|only [^.]*pulls? [^.]*CUDA",
    re.I,
)


def pinned_torch_claims(text: str) -> list[str]:
    """The paragraphs (comment blocks too) that name a pinned torch and say it avoids CUDA."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return [
        p for p in paragraphs if PINNED_TORCH.search(p) and "CUDA" in p and AVOIDS_CUDA.search(p)
    ]


def test_the_claim_check_catches_the_old_wording() -> None:
    old_readme = (
        "On a fresh machine with Python 3.11 (CPU only; installing `torch==2.13.0` first keeps pip\n"
        "from pulling several GB of CUDA packages):"
    )
    old_pyproject = (
        "    # Install torch==2.13.0 first on CPU-only machines (see README): any spec\n"
        "    # that admits a newer release pulls the CUDA build.\n"
        '    "torch>=2.1",'
    )
    assert pinned_torch_claims(old_readme) and pinned_torch_claims(old_pyproject)
    fine = "pip install torch==2.13.0 installs that release: from PyPI, with CUDA's packages."
    assert not pinned_torch_claims(fine)


def test_no_page_says_a_pinned_torch_avoids_cuda() -> None:
    pages = [ROOT / "README.md", ROOT / "pyproject.toml", *sorted((ROOT / "docs").glob("*.md"))]
    claims = {str(p.relative_to(ROOT)): pinned_torch_claims(p.read_text()) for p in pages}
    assert {k: v for k, v in claims.items() if v} == {}


def test_readme_gives_the_cpu_and_gpu_installs_and_ci_line_needs_no_other_index() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in readme
    # .ci/run runs the first line naming the test extra, on a machine that reaches PyPI only.
    ci_line = next(line for line in readme.splitlines() if "pip install -e '.[test]'" in line)
    assert "download.pytorch.org" not in ci_line and "--index-url" not in ci_line
    assert ci_line.endswith("&& bash scripts/test.sh")
