"""One job of a sweep run again, twice, each in a fresh process, with the command the sweep
was run with (``sweep.json``), optionally to a step or time budget; and the two runs'
folders matched (:func:`match_runs`).

Matching. Apps name their run folders and files by time, hash or process id
(``outputs/ppo_cartpole_3f2a1c_2026-12-02_10-11-12/``: BenchMARL, TorchRL's loggers;
``events.out.tfevents.<time>.<host>.<pid>.0``), so the same job's two runs write the same
tree under other names. The trees are matched from the job directories down, a folder's
entries paired with the other run's (files with files, folders with folders), each pass
taking what the earlier ones left:

1. the same name;
2. the same name once its volatile parts are masked (:func:`masked`: every run of letters
   and digits holding a digit, every run of 6 or more hex digits: dates, times, hashes,
   process ids, counters) and, for folders, the same content (the masked paths of the
   files below them);
3. the same masked name (the first of one run with the first of the other, by name: the
   earlier time first);
4. folders: the same content, whatever their names (a folder named by random words).

Paired folders are matched in turn; what no pass pairs is in one run only. Masking more
than needed costs nothing: a name both runs share is paired by the first pass.
Hydra's copy of the config, earlier attempts' logs and trackers' own stores
(:data:`rlsweep.series.SKIPPED_DIRS`) and links to folders are not walked.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from rlsweep.errors import ConfigError
from rlsweep.series import SKIPPED_DIRS, job_series
from rlsweep.store import HYDRA_DIR, SWEEP_FILE, iter_job_dirs

# Hydra's command-line flags that choose the config (kept when a job runs again), with
# whether each takes a value.
_CONFIG_FLAGS = {
    "--config-path": True,
    "-cp": True,
    "--config-name": True,
    "-cn": True,
    "--config-dir": True,
    "-cd": True,
}
# The hydra overrides a run of the check sets itself.
_OWN = ("hydra.sweep.dir", "hydra.sweep.subdir", "hydra.mode", "hydra.sweeper.report")
POLL_S = 0.5
GRACE_S = 10.0
# The parts of a name that change from run to run: a run of letters and digits holding a
# digit (a date, a time, a hash, a process id), a run of 6 or more hex digits (a hash).
_VOLATILE = re.compile(
    r"[0-9A-Za-z]*[0-9][0-9A-Za-z]*|(?<![0-9A-Za-z])[0-9a-fA-F]{6,}(?![0-9A-Za-z])"
)


@dataclass(frozen=True)
class Budget:
    """How far each run goes: to its end, to a logged step, or for some seconds."""

    steps: float | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class Rerun:
    """One run of the job: where it wrote, and how it ended."""

    job_dir: Path
    finished: bool
    returncode: int | None
    seconds: float
    stderr_tail: str


def _sweep_command(sweep_dir: Path) -> dict[str, Any]:
    try:
        record = json.loads((sweep_dir / SWEEP_FILE).read_text())
    except (OSError, ValueError):
        raise ConfigError(
            f"{sweep_dir} has no readable {SWEEP_FILE}: the determinism check runs a job with "
            "the command its sweep was run with, which rlsweep records there (sweeps run "
            "before this version of rlsweep did not). Run the sweep again to record it."
        ) from None
    app = record.get("app")
    if not isinstance(app, dict) or not app.get("command"):
        raise ConfigError(f"{sweep_dir / SWEEP_FILE} records no command to run a job with.")
    return app


def pick_job(sweep_dir: Path, name: str | None) -> Path:
    """The job directory to check: ``name``, else the first completed job."""
    jobs = list(iter_job_dirs(sweep_dir))
    if name is not None:
        chosen = sweep_dir / name
        if chosen not in jobs:
            listed = ", ".join(j.name for j in jobs[:8]) + (" ..." if len(jobs) > 8 else "")
            raise ConfigError(f"No job '{name}' in {sweep_dir}; its jobs: {listed or 'none'}.")
        return chosen
    done = [j for j in jobs if (j / "result.json").is_file()]
    if not (done or jobs):
        raise ConfigError(f"{sweep_dir} holds no job directory.")
    return (done or jobs)[0]


class Untrusted(ConfigError):
    """The sweep directory others may write to: its recorded command is not run."""


def untrusted(paths: Sequence[Path]) -> list[str]:
    """Why each of ``paths`` may hold what others wrote: not the user's own, or writable
    by its group or by others (as OpenSSH judges a key file); empty: all trusted."""
    found = []
    for path in paths:
        try:
            info = path.stat()
        except FileNotFoundError:
            continue
        mode = stat.S_IMODE(info.st_mode)
        if info.st_uid != os.getuid():
            found.append(f"{path} belongs to user id {info.st_uid}, not to you")
        elif mode & 0o022:
            who = " and ".join(
                w for w, bit in (("its group", 0o020), ("others", 0o002)) if mode & bit
            )
            found.append(f"{path} is writable by {who} (mode {mode:04o})")
    return found


def _refuse_untrusted(sweep_dir: Path, job_dir: Path, command: Sequence[str]) -> None:
    """Raise :class:`Untrusted` when what the command comes from (the sweep directory, its
    ``sweep.json``, the job's directory and Hydra's record of its overrides) is not only
    the user's to write."""
    hydra = job_dir / HYDRA_DIR
    paths = [sweep_dir, sweep_dir / SWEEP_FILE, job_dir, hydra, hydra / "hydra.yaml"]
    problems = untrusted(paths)
    if problems:
        raise Untrusted(
            f"not running the command {sweep_dir / SWEEP_FILE} records, as others may have "
            f"written it: {'; '.join(problems)}. The command:\n  {shlex.join(command)}\n"
            "Read it, and if it is yours, run the check again with --trust to run it "
            "(check_job(..., trust=True))."
        )


def job_command(
    sweep_dir: Path, job_dir: Path, out_dir: Path, *, trust: bool = False
) -> tuple[list[str], Path]:
    """The command that runs ``job_dir``'s job alone into ``out_dir``, and where from.
    Unless ``trust``, :class:`Untrusted` when others may have written what it comes from:
    the command runs as the user, whatever it is."""
    app = _sweep_command(sweep_dir)
    hydra_file = job_dir / HYDRA_DIR / "hydra.yaml"
    if not hydra_file.is_file():
        raise ConfigError(f"{job_dir} has no {HYDRA_DIR}/hydra.yaml: not a job Hydra started.")
    overrides = OmegaConf.load(hydra_file).hydra.overrides
    flags: list[str] = []
    arguments = list(app.get("arguments") or [])
    for i, arg in enumerate(arguments):
        name = arg.split("=", 1)[0]
        if name in _CONFIG_FLAGS:
            flags.append(arg)
            if "=" not in arg and _CONFIG_FLAGS[name] and i + 1 < len(arguments):
                flags.append(arguments[i + 1])
    own = [
        str(o) for o in overrides.hydra if not str(o).split("=", 1)[0].lstrip("+~").startswith(_OWN)
    ]
    command = [
        *app["command"],
        *flags,
        "-m",
        *own,
        *[str(o) for o in overrides.task],
        f"hydra.sweep.dir={out_dir}",
        "hydra.sweeper.report=false",
        "hydra.launcher.executor=serial",
        "hydra.launcher.progress=false",
    ]
    if not trust:
        _refuse_untrusted(sweep_dir, job_dir, command)
    return command, Path(app.get("cwd") or ".")


def _reached(out_dir: Path, steps: float) -> bool:
    """Whether the run's job logged a step at or beyond ``steps`` (any series)."""
    for job_dir in iter_job_dirs(out_dir):
        if any(s.steps[-1] >= steps for s in job_series(job_dir).values()):
            return True
    return False


def _stop(process: subprocess.Popen[str]) -> None:
    """Stop a run: SIGTERM (the sweep stops its job cleanly), then SIGKILL."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_twice(
    command: Sequence[str], cwd: Path, out_dirs: Sequence[Path], budget: Budget
) -> list[Rerun]:
    """Run ``command`` (each with its own ``hydra.sweep.dir``) at once, each in a fresh
    process; stop each at the budget."""
    start = time.monotonic()
    processes = []
    for out_dir in out_dirs:
        argv = [
            a if not a.startswith("hydra.sweep.dir=") else f"hydra.sweep.dir={out_dir}"
            for a in command
        ]
        processes.append(
            subprocess.Popen(
                argv,
                cwd=cwd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    stopped = [False] * len(processes)
    ended = [0.0] * len(processes)
    while any(p.poll() is None for p in processes):
        elapsed = time.monotonic() - start
        for i, (process, out_dir) in enumerate(zip(processes, out_dirs, strict=True)):
            if process.poll() is not None:
                ended[i] = ended[i] or elapsed
                continue
            over_time = budget.seconds is not None and elapsed >= budget.seconds
            if over_time or (budget.steps is not None and _reached(out_dir, budget.steps)):
                _stop(process)
                stopped[i], ended[i] = True, time.monotonic() - start
        time.sleep(POLL_S)
    runs = []
    for i, (process, out_dir) in enumerate(zip(processes, out_dirs, strict=True)):
        stderr = process.stderr.read() if process.stderr is not None else ""
        jobs = list(iter_job_dirs(out_dir))
        if not jobs:
            raise ConfigError(
                f"Run {i + 1} of the job wrote no job directory (exit {process.returncode}):\n"
                + "\n".join(stderr.strip().splitlines()[-15:])
            )
        finished = not stopped[i] and (jobs[0] / "result.json").is_file()
        seconds = ended[i] or time.monotonic() - start
        runs.append(Rerun(jobs[0], finished, process.returncode, seconds, stderr[-2000:]))
    return runs


def masked(name: str) -> str:
    """``name`` with its volatile parts (dates, times, hashes, ids) masked as ``#``."""
    return _VOLATILE.sub("#", name)


@dataclass
class Matching:
    """Two runs' trees matched: paths relative to each run's job directory."""

    # (run 1's path, run 2's path) of each file both runs wrote, in run 1's path order.
    files: list[tuple[str, str]] = field(default_factory=list)
    # Files of each run that nothing of the other run matched.
    only: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))
    # (run 1's path, run 2's path) of each folder, and each file, matched under another name.
    renamed: list[tuple[str, str]] = field(default_factory=list)
    renamed_files: list[tuple[str, str]] = field(default_factory=list)

    def run2_names(self) -> dict[str, str]:
        """Run 2's names of renamed folders and files -> run 1's (the last path parts)."""
        both = [*self.renamed, *self.renamed_files]
        return {b.rsplit("/", 1)[-1]: a.rsplit("/", 1)[-1] for a, b in both}


def _entries(directory: Path) -> tuple[list[str], list[str]]:
    """A folder's files and sub-folders (not links to folders, not skipped ones), by name."""
    files, dirs = [], []
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            if entry.name not in SKIPPED_DIRS:
                dirs.append(entry.name)
        elif entry.is_file():  # a link to a file counts, a link whose file is gone does not
            files.append(entry.name)
    return sorted(files), sorted(dirs)


def _below(directory: Path) -> list[str]:
    """Every file below ``directory``, relative to it (skipped folders not walked)."""
    out = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        rel = Path(root).relative_to(directory)
        out += [(rel / f).as_posix() for f in files]
    return sorted(out)


class _Keys:
    """What the entries of two matched folders (``dirs``: run 1's, run 2's) are paired by,
    each a ``key(run, name)`` (run 0 or 1)."""

    def __init__(self, dirs: tuple[Path, Path]) -> None:
        self.dirs = dirs
        self._contents: dict[tuple[int, str], frozenset[str]] = {}

    def same(self, run: int, name: str) -> str:
        return name

    def mask(self, run: int, name: str) -> str:
        return masked(name)

    def content(self, run: int, name: str) -> frozenset[str]:
        """What a folder holds: the masked paths of the files below it."""
        if (run, name) not in self._contents:
            below = _below(self.dirs[run] / name)
            self._contents[run, name] = frozenset(masked(f) for f in below)
        return self._contents[run, name]

    def both(self, run: int, name: str) -> tuple[str, frozenset[str]]:
        return masked(name), self.content(run, name)


Key = Callable[[int, str], Hashable]


def _pair(names: tuple[list[str], list[str]], keys: Sequence[Key]) -> list[tuple[str, str]]:
    """Pairs of names of the two runs (``names[0]``, ``names[1]``, each sorted), by each
    key in turn over what the earlier keys left (a key's names paired in order);
    ``names`` keeps the names left unpaired."""
    pairs: list[tuple[str, str]] = []
    for key in keys:
        groups: tuple[dict[Hashable, list[str]], dict[Hashable, list[str]]] = ({}, {})
        for run in (0, 1):
            for name in names[run]:
                groups[run].setdefault(key(run, name), []).append(name)
        found = [
            p for k, xs in groups[0].items() for p in zip(xs, groups[1].get(k, []), strict=False)
        ]
        pairs += found
        for run in (0, 1):
            taken = {p[run] for p in found}
            names[run][:] = [n for n in names[run] if n not in taken]
    return sorted(pairs)


def match_runs(a: Path, b: Path) -> Matching:
    """Two runs' job directories' trees matched (see the module docstring)."""
    out = Matching()
    stack = [("", "")]
    while stack:
        here = stack.pop()
        dirs = (a / here[0], b / here[1])
        keys = _Keys(dirs)
        found = (_entries(dirs[0]), _entries(dirs[1]))
        for is_dir in (False, True):
            names = (found[0][is_dir], found[1][is_dir])
            passes: list[Key] = (
                [keys.same, keys.both, keys.mask, keys.content]
                if is_dir
                else [keys.same, keys.mask]
            )
            for x, y in _pair(names, passes):
                pair = (_join(here[0], x), _join(here[1], y))
                if x != y:
                    (out.renamed if is_dir else out.renamed_files).append(pair)
                (stack if is_dir else out.files).append(pair)
            for run in (0, 1):
                for name in names[run]:
                    below = _below(dirs[run] / name) if is_dir else [""]
                    out.only[run].extend(_join(_join(here[run], name), f) for f in below)
    for found_pairs in (out.files, out.renamed, out.renamed_files):
        found_pairs.sort()
    for run in (0, 1):
        out.only[run].sort()
    return out


def _join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent and name else parent or name
