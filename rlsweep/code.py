"""The code a job ran: a fingerprint of the app's own source, and the versions of the
packages its process imported.

A job's numbers depend on its code as much as on its config. Each ``result.json`` records
(under ``rlsweep.code``), from the file that holds the task function:

- in a git repository: the commit (``HEAD``), a digest of its source files (:data:`SOURCES`:
  Python, Cython, C, C++, CUDA; a commit that changes only docs or data changes no job's
  code) and, when the work tree's differ from it, a digest of the difference (``git diff
  HEAD`` of those files, and the contents of untracked ones that git does not ignore;
  outputs such as ``multirun/`` are not code);
- outside one, in site-packages: the installed distribution and its version;
- else: a digest of the ``*.py`` files under the task file's directory (hidden, cache,
  environment and output directories left out);

``digest`` hashes what identifies the code. The version of each top-level package the job's
process imported that declares one goes to the job's ``packages.json`` (:func:`packages`:
informative, and apart from ``result.json``, which is the same under every executor while
the packages a process imports are not: Ray's, loky's).
The report flags a group whose jobs ran different code, a resume says how many completed
jobs ran other code than the command's now, and ``hydra.launcher.identity.code=true`` makes
the digest part of each job's identity (a code change then runs the jobs again).

Computed once per process and task file (a job runs the code its process imported).
"""

from __future__ import annotations

import hashlib
import inspect
import os
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["code_fingerprint", "code_text", "packages", "task_file"]

GIT_TIMEOUT_S = 20.0
# Directories under an app's own directory that hold no code of it.
_NOT_CODE = frozenset({"__pycache__", "multirun", "outputs", "site-packages", "node_modules"})
_MAX_FILES = 5000  # of a directory digested without git (more: the first ones, said)
_IDENTIFYING = ("source", "tree", "changes", "package", "sources")
# The files that are code, as git pathspecs (any directory).
SOURCES = (
    "*.py",
    "*.pyx",
    "*.pxd",
    "*.c",
    "*.cc",
    "*.cpp",
    "*.cxx",
    "*.h",
    "*.hpp",
    "*.cu",
    "*.cuh",
)
_cache: dict[str, dict[str, Any]] = {}


def task_file(function: Callable[..., Any] | None) -> Path | None:
    """The source file of a task function (through its wrappers), else the main script's."""
    if function is not None:
        try:
            source = inspect.getsourcefile(inspect.unwrap(function))
        except (TypeError, ValueError):
            source = None
        if source is not None and not source.startswith("<"):
            return Path(source).resolve()
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return Path(main).resolve() if main else None


def code_fingerprint(function: Callable[..., Any] | None) -> dict[str, Any]:
    """The fingerprint of the code of ``function``'s app (see the module docstring)."""
    path = task_file(function)
    key = str(path)
    if key not in _cache:
        found = _of_file(path) if path is not None else {"source": "unknown"}
        # What the code is, not where it lies (another clone, another node's mount).
        identifying = {k: v for k, v in found.items() if k in _IDENTIFYING}
        text = repr(sorted(identifying.items())).encode("utf-8")
        found["digest"] = hashlib.sha256(text).hexdigest()[:16]
        _cache[key] = found
    return dict(_cache[key])


def code_text(fingerprint: dict[str, Any] | None) -> str:
    """A fingerprint as a person reads it: ``git 1a2b3c4d5e6f + changes``, ``rlsweep 0.1.0``."""
    if not fingerprint:
        return "not recorded"
    source = fingerprint.get("source")
    if source == "git":
        dirty = " + uncommitted changes" if fingerprint.get("changes") else ""
        return f"git {str(fingerprint.get('commit'))[:12]}{dirty}"
    if source == "package":
        return str(fingerprint.get("package"))
    if source == "files":
        return f"{fingerprint.get('files')} source file(s), digest {fingerprint.get('digest')}"
    return "unknown"


def _of_file(path: Path) -> dict[str, Any]:
    if _in_site_packages(path):
        return {"source": "package", "package": _distribution(path)}
    git = _git(path.parent)
    if git is not None:
        return git
    files = sorted(_sources(path.parent))
    digest = hashlib.sha256()
    for file in files[:_MAX_FILES]:
        digest.update(file.relative_to(path.parent).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    found = {"source": "files", "directory": str(path.parent), "files": len(files)}
    return {**found, "sources": digest.hexdigest()}


def _run_git(directory: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(directory), *args],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):  # no git, or a repository too slow to read
        return None
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None


def _git(directory: Path) -> dict[str, Any] | None:
    """The repository holding ``directory``: its commit and a digest of what differs."""
    head = _run_git(directory, "rev-parse", "--show-toplevel", "HEAD")
    if head is None or len(head.split()) != 2:
        return None
    top, commit = head.split()
    tree = _run_git(directory, "ls-tree", "-r", "HEAD")  # (it takes no glob pathspecs)
    diff = _run_git(directory, "diff", "HEAD", "--binary", "--", *SOURCES)
    untracked = _run_git(
        directory, "ls-files", "--others", "--exclude-standard", "-z", "--", *SOURCES
    )
    if tree is None or diff is None or untracked is None:
        return None
    digest = hashlib.sha256(diff.encode("utf-8"))
    names = sorted(n for n in untracked.split("\0") if n)
    for name in names:
        digest.update(name.encode("utf-8") + b"\0")
        try:
            digest.update(hashlib.sha256((Path(top) / name).read_bytes()).digest())
        except OSError:  # removed since git listed it
            continue
    changed = bool(diff) or bool(names)
    changes = digest.hexdigest()[:16] if changed else None
    suffixes = tuple(pattern[1:] for pattern in SOURCES)
    blobs = [line for line in tree.splitlines() if line.endswith(suffixes)]
    sources = hashlib.sha256("\n".join(blobs).encode("utf-8")).hexdigest()[:16]
    return {
        "source": "git",
        "repository": top,
        "commit": commit,
        "tree": sources,
        "changes": changes,
    }


def _sources(directory: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and d not in _NOT_CODE and not _is_env(Path(root) / d)
        )
        yield from (Path(root) / f for f in files if f.endswith(".py"))


def _is_env(path: Path) -> bool:
    """Whether a directory is a Python environment (a venv's pyvenv.cfg)."""
    return (path / "pyvenv.cfg").is_file()


def _in_site_packages(path: Path) -> bool:
    roots = {sysconfig.get_paths().get(k) for k in ("purelib", "platlib")}
    text = str(path)
    return any(r and text.startswith(r.rstrip("/") + "/") for r in roots) or any(
        part in ("site-packages", "dist-packages") for part in path.parts
    )


def _distribution(path: Path) -> str:
    """``name version`` of the installed package a file belongs to (its top-level module)."""
    parts = path.parts
    where = max(i for i, p in enumerate(parts) if p in ("site-packages", "dist-packages"))
    top = parts[where + 1].removesuffix(".py") if len(parts) > where + 1 else "?"
    version = getattr(sys.modules.get(top), "__version__", None)
    if version is None:
        from importlib import metadata

        try:
            version = metadata.version(top)
        except metadata.PackageNotFoundError:
            version = "?"
    return f"{top} {version}"


def packages() -> dict[str, str]:
    """The version of each top-level non-standard package imported that declares one."""
    stdlib = sys.stdlib_module_names
    out = {}
    for name, module in list(sys.modules.items()):
        if "." in name or name.startswith("_") or name in stdlib:
            continue
        version = getattr(module, "__version__", None)
        if isinstance(version, str):
            out[name] = version
    return dict(sorted(out.items()))
