"""The house rules, checked on the tree: the data path runs one way (no import cycle, lazy
and TYPE_CHECKING imports included), small modules and functions, a thin plugin, no swallowed errors, and
docs/architecture.md in step with the modules that exist."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rlsweep", "hydra_plugins/rlsweep_launcher")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_PLUGIN_LINES = 500


def modules() -> dict[str, Path]:
    """Every project module by dotted name."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth: lazy ones and those under TYPE_CHECKING too (a
    type a module names is a dependency on the module that defines it)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (lazily or not, under TYPE_CHECKING too)."""
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _imports(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        for target in targets:
            # The module named, or the nearest package of it that is the project's. (The
            # packages Python runs on the way are not counted: a package's __init__ that
            # re-exports its modules is not a cycle with them.)
            parts = target.split(".")
            while parts and ".".join(parts) not in known:
                parts.pop()
            if parts and ".".join(parts) != name:
                out.add(".".join(parts))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    known = modules()
    # The root package's lazy API (importlib by name, on attribute access) is not counted.
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert cycles(graph) == []


@pytest.mark.parametrize(
    "import_b",
    [
        "def f():\n    from pkg.b import g\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import g\n",
    ],
    ids=["lazy", "type-checking"],
)
def test_cycle_detection_sees_lazy_and_type_checking_imports(tmp_path: Path, import_b: str) -> None:
    known = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    known["pkg.a"].write_text(import_b)
    known["pkg.b"].write_text("from pkg import a\n")
    graph = {
        name: imported(name, path, {**known, "pkg": tmp_path}) - {"pkg"}
        for name, path in known.items()
    }
    assert cycles(graph) == [["pkg.a", "pkg.b"]]


def test_modules_and_functions_are_small() -> None:
    too_long = []
    for name, path in modules().items():
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}.{node.name}: {length} lines")
    assert too_long == []


def _without_docstrings(tree: ast.Module) -> ast.Module:
    """The module's code alone: no docstrings (and, once unparsed, no comments)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body[0] = ast.Pass()
    return tree


def test_the_plugin_is_thin_and_knows_no_app() -> None:
    plugin = [p for n, p in modules().items() if n.startswith("hydra_plugins.")]
    assert sum(len(p.read_text().splitlines()) for p in plugin) < MAX_PLUGIN_LINES
    text = "\n".join(ast.unparse(_without_docstrings(ast.parse(p.read_text()))) for p in plugin)
    # The built-in app's keys, as the strings a rule about them would hold.
    for app_rule in ("'agent", "'name'", "'n_jobs'", "'rerun'", "torch_threads", "result.json"):
        assert app_rule not in text, app_rule


SWALLOW = re.compile(
    r"suppress\((?:[\w.]*Exception|BaseException)\)|except(?: (?:Base)?Exception(?: as \w+)?)?:\s*\n\s*pass\b"
)


def test_no_error_is_swallowed() -> None:
    found = [
        f"{name}: {m.group(0).splitlines()[0]}"
        for name, path in modules().items()
        for m in SWALLOW.finditer(path.read_text())
    ]
    assert found == []


def test_architecture_page_names_every_module_and_no_other() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`((?:rlsweep|hydra_plugins)/[\w/]+\.py)`", page))
    existing = {str(p.relative_to(ROOT)) for p in modules().values()}
    assert sorted(existing - named) == [], "modules missing from docs/architecture.md"
    assert sorted(named - existing) == [], "docs/architecture.md names modules that do not exist"


@pytest.mark.parametrize(
    "swallowed", ["with contextlib.suppress(Exception):", "except Exception:\n    pass"]
)
def test_the_swallow_pattern_matches(swallowed: str) -> None:
    assert SWALLOW.search(swallowed)


def test_every_exception_rlsweep_defines_is_an_rlsweep_error() -> None:
    """One hierarchy, recognised by type (Terminated is SIGTERM raised as an interrupt)."""
    import importlib
    import inspect

    from rlsweep.errors import RLSweepError

    outside = []
    for name in modules():
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != name or not issubclass(cls, BaseException):
                continue
            if not issubclass(cls, RLSweepError) and cls_name != "Terminated":
                outside.append(f"{name}.{cls_name}")
    assert outside == []
