"""The house rules, checked on the tree: the layers (each module imports only its own or lower
layers) and no import cycle, lazy and TYPE_CHECKING imports included; no two public classes
or functions of the same name; small modules and functions; a thin plugin; no swallowed
errors; docs/architecture.md in step with the modules that exist and the layers checked."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rlsweep", "hydra_plugins/rlsweep_launcher")
MAX_FUNCTION_LINES = 60
MAX_PLUGIN_LINES = 500

# The layers, top to bottom: a module imports only modules of its own layer or of a lower
# one (lazy and TYPE_CHECKING imports included). A module is in the layer of the most
# specific entry that names it or a package above it; a top package (``rlsweep``) names its
# ``__init__`` alone. docs/architecture.md ("The layers") shows this list.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "app",
        (
            "hydra_plugins.rlsweep_launcher",
            "rlsweep",
            "rlsweep.__main__",
            "rlsweep.app",
            "rlsweep.report.__main__",
            "rlsweep.report.cli",
            "rlsweep.check",
        ),
    ),
    (
        "sweeper",
        ("rlsweep.sweep", "rlsweep.search", "rlsweep.compare", "rlsweep.launch.replicates"),
    ),
    ("launcher", ("rlsweep.launch",)),
    ("executor", ("rlsweep.executors", "rlsweep.launch.options")),
    (
        "job",
        (
            "rlsweep.launch.jobs",
            "rlsweep.launch.worker",
            "rlsweep.launch.compose",
            "rlsweep.launch.children",
            "rlsweep.launch.exits",
            "rlsweep.slurm_options",
            "rlsweep.resolvers",
            "rlsweep.task_api",
            "rlsweep.app_seeds",
            "rlsweep.app_logs",
            "rlsweep.outside_logs",
            "rlsweep.unseeded",
            "rlsweep.trackers",
            "rlsweep.checkpoint",
            "rlsweep.job",
            "rlsweep.config",
            "rlsweep.envs",
            "rlsweep.faults",
            "rlsweep.agents",
            "rlsweep.gpus",
        ),
    ),
    ("report", ("rlsweep.summary", "rlsweep.report")),
    (
        "store",
        (
            "rlsweep.store",
            "rlsweep.results",
            "rlsweep.series",
            "rlsweep.seeding",
            "rlsweep.identity",
            "rlsweep.choices",
        ),
    ),
    (
        "base",
        (
            "rlsweep.stats",
            "rlsweep.errors",
            "rlsweep.settings",
            "rlsweep.paths",
            "rlsweep.threads",
            "rlsweep.numerics",
            "rlsweep.code",
            "rlsweep.trace",
            "rlsweep.progress",
            "rlsweep.trackers.base",
            "rlsweep.trust",
        ),
    ),
)


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


Layers = tuple[tuple[str, tuple[str, ...]], ...]


def layer_of(module: str, layers: Layers = LAYERS) -> tuple[int, str] | None:
    """The rank (0: the top) and name of ``module``'s layer, or None if no entry names it."""
    best: tuple[int, int, str] | None = None  # (length of the entry, rank, layer)
    for rank, (layer, entries) in enumerate(layers):
        for entry in entries:
            inside = module.startswith(entry + ".") and "." in entry
            if (module == entry or inside) and (best is None or len(entry) > best[0]):
                best = (len(entry), rank, layer)
    return None if best is None else (best[1], best[2])


def upward_imports(graph: dict[str, set[str]], layers: Layers = LAYERS) -> list[str]:
    """Every import of a module of a higher layer (or of a module in no layer)."""
    found = []
    for name in sorted(graph):
        mine = layer_of(name, layers)
        for target in sorted(graph[name]):
            theirs = layer_of(target, layers)
            if mine is None or theirs is None or theirs[0] < mine[0]:
                found.append(
                    f"{name} ({mine and mine[1]}) imports {target} ({theirs and theirs[1]})"
                )
    return found


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def test_no_import_cycle() -> None:
    # The root package's lazy API (importlib by name, on attribute access) is not counted.
    assert cycles(import_graph()) == []


def test_every_module_has_a_layer() -> None:
    assert [name for name in modules() if layer_of(name) is None] == []


def test_each_module_imports_only_its_own_or_lower_layers() -> None:
    assert upward_imports(import_graph()) == []


def test_an_import_of_a_higher_layer_is_found_on_the_real_layers() -> None:
    """The statistics importing the report, the store the launcher, the job an executor."""
    graph = import_graph()
    graph["rlsweep.stats.estimates"] |= {"rlsweep.report.build"}
    graph["rlsweep.store"] |= {"rlsweep.launch.core"}
    graph["rlsweep.task_api"] |= {"rlsweep.executors.pool"}
    assert upward_imports(graph) == [
        "rlsweep.stats.estimates (base) imports rlsweep.report.build (report)",
        "rlsweep.store (store) imports rlsweep.launch.core (launcher)",
        "rlsweep.task_api (job) imports rlsweep.executors.pool (executor)",
    ]


@pytest.mark.parametrize(
    "import_high",
    [
        "def f():\n    from pkg.high import g\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import high\n",
        "import pkg.high.deep\n",
    ],
    ids=["lazy", "type-checking", "submodule"],
)
def test_an_import_of_a_higher_layer_is_found_in_a_tree(tmp_path: Path, import_high: str) -> None:
    (tmp_path / "high").mkdir()
    known = {
        "pkg": tmp_path / "__init__.py",
        "pkg.high": tmp_path / "high" / "__init__.py",
        "pkg.high.deep": tmp_path / "high" / "deep.py",
        "pkg.low": tmp_path / "low.py",
    }
    for path in known.values():
        path.write_text("")
    known["pkg.low"].write_text(import_high)
    known["pkg.high.deep"].write_text("from pkg import low\n")  # downward: allowed
    layers = (("top", ("pkg.high",)), ("bottom", ("pkg", "pkg.low")))
    graph = {name: imported(name, path, known) for name, path in known.items()}
    target = "pkg.high.deep" if "deep" in import_high else "pkg.high"
    assert upward_imports(graph, layers) == [f"pkg.low (bottom) imports {target} (top)"]
    assert layer_of("pkg.other", layers) is None  # a top package names its __init__ alone


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


def test_functions_are_small() -> None:
    """A module is judged by what it does and by its functions' complexity (ruff's C901,
    pyproject.toml), not by a count of its lines; a function stays readable in one screen."""
    too_long = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}.{node.name}: {length} lines")
    assert too_long == []


# Names several modules define by contract, each module its own namespace, and where:
# every agent module's ``build(config, context)``, every tracker backend's ``Settings`` and
# ``start(settings, info, resume)``, every command's ``main``.
CONTRACT_NAMES = {
    "build": ("rlsweep.agents",),
    "Settings": ("rlsweep.trackers",),
    "start": ("rlsweep.trackers",),
    "main": ("rlsweep.app", "rlsweep.report.cli", "rlsweep.check.__main__"),
}


def public_definitions(known: dict[str, Path]) -> dict[str, list[str]]:
    """Each public class or function a module defines at its top level (not starting with
    ``_``) -> the modules defining one by that name. An import is not a definition: a
    package re-exporting its module's class defines nothing."""
    out: dict[str, list[str]] = {}
    for name, path in known.items():
        body = ast.parse(path.read_text()).body
        kinds = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        for node in [n for n in body if isinstance(n, kinds)]:
            if not node.name.startswith("_") and not _is_overload(node):
                out.setdefault(node.name, []).append(name)
    return out


def _is_overload(node: ast.stmt) -> bool:
    """A ``typing.overload`` signature: the function's type, not a definition of its own."""
    decorators = getattr(node, "decorator_list", [])
    return any(ast.unparse(d) in ("overload", "typing.overload") for d in decorators)


def clashing_names(known: dict[str, Path]) -> list[str]:
    """Public names defined by two modules or more, but for the contracts' (in their place)."""
    found = []
    for name, where in sorted(public_definitions(known).items()):
        places = CONTRACT_NAMES.get(name, ())
        if len(where) > 1 and not (places and all(_inside(m, places) for m in where)):
            found.append(f"{name}: {', '.join(sorted(where))}")
    return found


def _inside(module: str, places: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in places)


def test_no_two_public_classes_or_functions_share_a_name() -> None:
    """A newcomer reading ``from rlsweep.x import Name`` knows which ``Name`` it is."""
    assert clashing_names(modules()) == []


def test_a_name_defined_twice_is_found(tmp_path: Path) -> None:
    known = {n: tmp_path / f"{n}.py" for n in ("pkg.a", "pkg.b", "pkg.c", "pkg")}
    known["pkg.a"].write_text("class Job:\n    pass\n\n\ndef _private():\n    pass\n")
    known["pkg.b"].write_text("def Job():\n    pass\n\n\ndef _private():\n    pass\n")
    # An agent's contract, elsewhere; its overloads are its type, not more definitions.
    known["pkg.c"].write_text(
        "from typing import overload\n\n\n@overload\ndef build(x: int) -> int: ...\n\n\n"
        "@overload\ndef build(x: str) -> str: ...\n\n\ndef build(x):\n    return x\n"
    )
    known["pkg"].write_text("from pkg.a import Job\n\n\ndef build():\n    pass\n")
    assert clashing_names(known) == ["Job: pkg.a, pkg.b", "build: pkg, pkg.c"]


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


def page_layers(page: str) -> Layers:
    """The layers block of docs/architecture.md: a line per layer (its name, then entries
    separated by commas), indented lines continuing the one above."""
    block = page.split("## The layers\n", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    out: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        words = line.split()
        if words and not line[0].isspace():
            out.append((words[0], []))
            words = words[1:]
        out[-1][1].extend(w.strip(",") for w in words)
    return tuple((name, tuple(entries)) for name, entries in out)


def test_architecture_page_shows_the_layers_the_test_checks() -> None:
    assert page_layers((ROOT / "docs" / "architecture.md").read_text()) == LAYERS


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
