"""Check the project's Markdown: its links resolve and its commands still parse.

    python scripts/check_docs.py              # exit 0: nothing found; 1: each problem printed
    python scripts/check_docs.py --root DIR   # another tree (tests/test_docs.py)

Run by scripts/test.sh (the README's test command, so by `.ci/run`) before the tests, in
seconds. Links of README.md, CHANGELOG.md, docs/*.md and bench/README.md (Markdown and HTML,
images too) name files that exist, and a #fragment a heading there. Commands of the bash
blocks of README.md and docs/*.md are valid shell (no unquoted parenthesis) and run files
that exist; `python -m rlsweep ...` composes through Hydra on rlsweep's config once per value
of each choice sweep, with the launcher's and sweeper's settings checked as a sweep checks
them (SLURM's as submitit's local executor's: this machine's SLURM is not the command's
fault) and the job config validated; an app of the tree composes on its own config; a
user's app (`python train.py ...`): its overrides parse and rlsweep's keys among them compose
on an app that opted in. A `--config-dir` not in the tree (a user's) leaves syntax only.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import re
import shlex
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Markdown whose links are checked, and whose bash blocks are (globs under the root).
LINK_FILES = ("README.md", "CHANGELOG.md", "docs/*.md", "bench/README.md")
COMMAND_FILES = ("README.md", "docs/*.md")
SHELLS = ("bash", "sh", "shell")

_FENCE = re.compile(r"^ {0,3}(```|~~~)`*\s*([\w+-]*)")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HTML = re.compile(r"<(?:img|a)\b[^>]*?\b(?:src|href)\s*=\s*[\"']([^\"']+)[\"']", re.I)
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_CONFIG_PATH = re.compile(r"config_path\s*=\s*[\"']([^\"']+)[\"']")
_CONFIG_NAME = re.compile(r"config_name\s*=\s*[\"']([^\"']+)[\"']")
# shlex's punctuation (a token made of it alone was not quoted), and the separators.
_PUNCTUATION = set("();<>|&")
_SEPARATORS = {"&&", "||", ";", "|", "&", ";;"}
_WRAPPERS = {"sudo", "time", "nohup", "exec", "env"}
# Hydra's command-line flags that take a value, and those that take none.
_VALUE_FLAGS = {"--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd"}
_VALUE_FLAGS |= {"--cfg", "-c", "--package", "-p", "--experimental-rerun"}
_FLAGS = {"-m", "--multirun", "--help", "-h", "--hydra-help", "--version", "--resolve"}
_FLAGS |= {"--info", "-i", "--shell-completion", "-sc"}


@dataclass(frozen=True)
class Command:
    """One command of a bash block: where it starts, its text (continuations joined)."""

    file: Path
    line: int
    text: str


@dataclass
class HydraArgs:
    """A Hydra app's command line, split: its overrides, config dirs, and -m."""

    overrides: list[str] = field(default_factory=list)
    config_dirs: list[str] = field(default_factory=list)
    multirun: bool = False


# ---------------------------------------------------------------------------- Markdown


def files(root: Path, patterns: tuple[str, ...]) -> list[Path]:
    """The files under ``root`` matching ``patterns``, in order, each once."""
    return list(dict.fromkeys(p for pattern in patterns for p in sorted(root.glob(pattern))))


def lines_of(text: str) -> Iterator[tuple[int, str | None, str]]:
    """(line number, the language of its fenced block, or None for prose, line), fence lines
    left out."""
    fence: str | None = None
    language: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if match and fence is None:
            fence, language = match.group(1), match.group(2).lower()
        elif fence is not None and line.lstrip().startswith(fence):
            fence, language = None, None
        else:
            yield number, language, line


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """Every heading anchor of a Markdown file (a repeated heading: -1, -2, ...)."""
    seen: dict[str, int] = {}
    for _, language, line in lines_of(path.read_text()):
        match = _HEADING.match(line) if language is None else None
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            seen.setdefault(f"{base}-{count}" if count else base, 1)
    return frozenset(seen)


def check_links(path: Path, root: Path) -> list[str]:
    """Problems with the relative links of one Markdown file (prose only, not code)."""
    problems = []
    for number, language, line in lines_of(path.read_text()):
        prose = re.sub(r"(`+).*?\1", "", line) if language is None else ""
        for target in [*_LINK.findall(prose), *_HTML.findall(prose)]:
            if _SCHEME.match(target):
                continue  # https:, mailto:, ...
            name, _, fragment = target.partition("#")
            linked = (path.parent / name).resolve() if name else path
            where = f"{path.relative_to(root)}:{number}: link to {target!r}"
            if not linked.exists():
                problems.append(f"{where}: no such file")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                problems.append(f"{where}: no heading #{fragment} there")
    return problems


def bash_commands(path: Path) -> Iterator[Command]:
    """The commands of a Markdown file's bash blocks, continuation lines joined."""
    text, start, previous = "", 0, -1
    for number, language, line in lines_of(path.read_text()):
        if language not in SHELLS:
            continue
        if number != previous + 1:  # another block
            text = ""
        previous, start = number, start if text else number
        if line.rstrip().endswith("\\"):
            text += line.rstrip()[:-1] + " "
            continue
        text, command = "", (text + line).strip()
        if command and not command.startswith("#"):
            yield Command(path, start, command)


# ---------------------------------------------------------------------------- the shell


def simple_commands(text: str) -> list[list[str]]:
    """A shell line as its simple commands (argv lists); ValueError for bad syntax."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    commands: list[list[str]] = [[]]
    skip = False
    for i, token in enumerate(tokens):
        if skip or token == "...":  # a redirection's target; a placeholder
            skip = False
        elif token in _SEPARATORS:
            commands.append([])
        elif set(token) <= _PUNCTUATION and set(token) & {"(", ")"}:
            raise ValueError("an unquoted parenthesis (quote the argument: 'seed=range(8)')")
        elif set(token) <= set("<>&"):
            skip = True  # a redirection
        elif not (token.isdigit() and tokens[i + 1 : i + 2] and tokens[i + 1][0] in "<>"):
            commands[-1].append(token)  # (not the file descriptor of 2>&1)
    return [c for c in commands if c]


def unwrap(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the command without environment assignments and wrappers, PYTHONPATH entries)."""
    python_path: list[str] = []
    while argv and (_ENV.match(argv[0]) or argv[0] in _WRAPPERS or argv[0] == "nice"):
        name, _, value = argv[0].partition("=")
        python_path += value.split(":") if name == "PYTHONPATH" else []
        argv = argv[3:] if argv[0] == "nice" and argv[1:2] == ["-n"] else argv[1:]
    return argv, python_path


def hydra_args(args: list[str]) -> HydraArgs:
    """A Hydra app's arguments split into overrides, config dirs and -m."""
    split = HydraArgs()
    i = 0
    while i < len(args):
        flag, has_value, value = args[i].partition("=")
        if flag in _VALUE_FLAGS:
            value = value if has_value else "".join(args[i + 1 : i + 2])
            i += 1 if has_value else 2
            split.config_dirs += [value] if flag in ("--config-dir", "-cd") else []
            continue
        if args[i] in _FLAGS:
            split.multirun = split.multirun or args[i] in ("-m", "--multirun")
        else:
            split.overrides.append(args[i])
        i += 1
    return split


def script_config(path: Path) -> tuple[Path, str] | None:
    """(config dir, primary config name) of a Python file of the tree that is a Hydra app
    with its config in files; None for any other script."""
    text = path.read_text()
    where, name = _CONFIG_PATH.search(text), _CONFIG_NAME.search(text)
    if "hydra.main" not in text or where is None or name is None:
        return None
    directory = (path.parent / where.group(1)).resolve()
    return (directory, name.group(1)) if (directory / f"{name.group(1)}.yaml").is_file() else None


def check_command(command: Command, root: Path, composer: Composer) -> list[str]:
    """Problems with one command of a bash block."""
    where = f"{command.file.relative_to(root)}:{command.line}"
    try:
        argvs = [unwrap(argv) for argv in simple_commands(command.text)]
    except ValueError as exc:
        return [f"{where}: not valid shell: {exc}: {command.text}"]
    problems = []
    for argv, python_path in argvs:
        try:
            problem = check_argv(argv, python_path, root, composer)
        except ValueError as exc:  # overrides that do not parse, a config that does not compose
            problem = str(exc)
        problems += [f"{where}: {problem}: {command.text}"] if problem else []
    return problems


def check_argv(argv: list[str], python_path: list[str], root: Path, composer: Composer) -> str:
    """What is wrong with one simple command ('' if nothing found; ValueError for overrides
    that do not parse or compose)."""
    if argv[:1] in (["bash"], ["sh"]) and argv[1:2] and argv[1].endswith(".sh"):
        return "" if (root / argv[1]).is_file() else f"no such script {argv[1]}"
    if argv[:1] not in (["python"], ["python3"]) or len(argv) < 2:
        return ""
    if argv[1] == "-m" and len(argv) >= 3:
        module, rest = argv[2], hydra_args(argv[3:])
        if module == "rlsweep":
            composer.rlsweep(rest, [root / p for p in python_path], root)
        elif module.startswith("rlsweep.") and importlib.util.find_spec(module) is None:
            return f"no module {module}"
        return ""
    script, path = argv[1], root / argv[1]
    if not script.endswith(".py"):
        return ""
    if not path.is_file() and "/" in script:
        return f"no such file {script}"
    config = script_config(path) if path.is_file() else None
    if config is not None:  # an app of the tree: composed on its own config
        composer.script(config, hydra_args(argv[2:]))
    elif not path.is_file() or "hydra_main" in path.read_text():  # a user's app (train.py)
        composer.app(hydra_args(argv[2:]))
    return ""


# ---------------------------------------------------------------------------- Hydra


def values(override: Any) -> list[str]:
    """An override as single values: a choice sweep as each choice, a range at its first
    value, an interval at its start; anything else as written."""
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep

    if not override.is_sweep_override():
        return [str(override.input_line)]
    key, value = override.get_key_element(), override.value()
    if isinstance(value, IntervalSweep):
        start = float(value.start or 0.0)
        return [f"{key}={int(start) if 'int' in value.tags else start}"]
    texts = list(override.sweep_string_iterator())
    return [f"{key}={t}" for t in (texts if isinstance(value, ChoiceSweep) else texts[:1])]


def variants(overrides: list[Any]) -> list[list[str]]:
    """Single-valued override lists naming every value of a command once: each sweep at its
    first value, then each other choice of each sweep with the rest at their first."""
    options = [values(o) for o in overrides]
    first = [o[0] for o in options]
    out = [first]
    for i, choices in enumerate(options):
        out += [[*first[:i], choice, *first[i + 1 :]] for choice in choices[1:]]
    return out


class Composer:
    """Composes commands' configs through Hydra's compose API, in this process."""

    def __init__(self) -> None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self.parser = OverridesParser.create()
        self._app_dir = tempfile.TemporaryDirectory(prefix="check_docs_app_")
        # An app that opted in and has no key of its own: rlsweep's settings compose on it.
        (Path(self._app_dir.name) / "config.yaml").write_text("{}\n")

    def close(self) -> None:
        self._app_dir.cleanup()

    def parse(self, args: HydraArgs) -> tuple[list[Any], bool]:
        """The overrides parsed (ValueError if they do not), and whether the command sweeps
        without -m."""
        try:
            overrides = self.parser.parse_overrides(args.overrides)
        except Exception as exc:  # Hydra's grammar errors, said as the command's problem
            raise ValueError(f"overrides do not parse: {first_line(exc)}") from exc
        return overrides, any(o.is_sweep_override() for o in overrides) and not args.multirun

    def rlsweep(self, args: HydraArgs, python_path: list[Path], root: Path) -> None:
        """``python -m rlsweep ARGS``, composed on rlsweep's config (its PYTHONPATH first on
        this process's path)."""
        from rlsweep.paths import conf_dir

        dirs = [(root / d).resolve() for d in args.config_dirs]
        overrides, unswept = self.parse(args)
        if any(not d.is_dir() for d in dirs):
            return  # a user's own config directory: syntax only
        search = [f"hydra.searchpath=[{','.join(f'file://{d}' for d in dirs)}]"] if dirs else []
        sys.path[:0] = [str(p) for p in python_path if str(p) not in sys.path]
        todo = [v + search for v in variants(overrides)]
        self.compose(conf_dir(), "config", todo, unswept, validate=True)

    def script(self, config: tuple[Path, str], args: HydraArgs) -> None:
        """A command of a Hydra app of the tree, composed on its own config."""
        overrides, unswept = self.parse(args)
        self.compose(*config, variants(overrides), unswept)

    def app(self, args: HydraArgs) -> None:
        """A user's Hydra app's command: its syntax, and rlsweep's keys in it (``hydra.*``,
        ``rlsweep=...``, ``rlsweep/trackers=...``) composed on an app that opted in."""
        overrides, unswept = self.parse(args)
        ours = [o for o in overrides if o.key_or_group in ("rlsweep", "rlsweep/trackers")]
        ours += [o for o in overrides if o.key_or_group.startswith(("hydra.", "hydra/"))]
        todo = []
        for variant in variants(ours):
            variant = [f"+{o}" if o.startswith("rlsweep=") else o for o in variant]
            opted_in = any(o.startswith("+rlsweep=") for o in variant)
            todo.append(variant if opted_in else ["+rlsweep=joblib", *variant])
        self.compose(Path(self._app_dir.name), "config", todo, unswept)

    def compose(
        self, where: Path, name: str, todo: list[list[str]], unswept: bool, validate: bool = False
    ) -> None:
        """Compose each override list on the primary config ``where/name`` and check what a
        sweep checks before any job (``unswept``: the command sweeps without -m;
        ``validate``: the built-in app's own validation too); ValueError naming a problem."""
        import hydra
        from hydra.core.global_hydra import GlobalHydra

        for overrides in todo:
            GlobalHydra.instance().clear()
            try:
                with hydra.initialize_config_dir(str(where), version_base="1.3"):
                    cfg = hydra.compose(name, overrides, return_hydra_config=True)
                    check_config(cfg, unswept, validate)
            except Exception as exc:  # composition and the settings' own checks
                raise ValueError(
                    f"does not compose ({' '.join(overrides)}): {first_line(exc)}"
                ) from exc


def check_config(cfg: Any, unswept: bool, validate: bool) -> None:
    """The checks a sweep makes before any job, on a composed config (raises)."""
    from hydra.utils import instantiate
    from omegaconf import open_dict

    if unswept and str(cfg.hydra.mode) != "RunMode.MULTIRUN":
        raise ValueError("a sweep without -m (Hydra refuses it: add -m)")
    if "rlsweep" in str(cfg.hydra.launcher.get("_target_")):
        node = cfg.hydra.launcher
        if getattr(node.executor, "value", node.executor) == "slurm":
            with open_dict(node):
                node.executor = "submitit_local"
        instantiate(node)
    if "rlsweep" in str(cfg.hydra.sweeper.get("_target_")):
        instantiate(cfg.hydra.sweeper)
    if validate:
        from rlsweep.config import load_job_config

        load_job_config(cfg)


def first_line(exc: BaseException) -> str:
    """An exception's message, on one line (Hydra's carry their cause below)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 400 else text[:397] + "..."


# ---------------------------------------------------------------------------- main


def check(root: Path) -> list[str]:
    """Every problem found in the Markdown under ``root``."""
    problems = [p for path in files(root, LINK_FILES) for p in check_links(path, root)]
    composer = Composer()
    try:
        for path in files(root, COMMAND_FILES):
            for command in bash_commands(path):
                problems += check_command(command, root, composer)
    finally:
        composer.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check the Markdown's links and commands.")
    parser.add_argument("--root", type=Path, default=ROOT, help="the tree (default: this one)")
    root = parser.parse_args(argv).root.resolve()
    sys.path.insert(0, str(ROOT))  # this tree's rlsweep and Hydra plugins
    problems = check(root)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"check_docs: {len(problems)} problem(s) in {len(files(root, LINK_FILES))} files")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
