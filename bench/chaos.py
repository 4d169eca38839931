"""Chaos soak: a small sweep run again and again while faults strike at random.

    python bench/chaos.py --rounds 80 --min-kills 150 --seed 2027   # ~30 min on 2 cores, as root
    python bench/chaos.py --replay 385154867                        # one round again, by its seed
    python bench/chaos.py --rounds 5 --seed 2 --kinds disk-full,parent-sigint

The sweep: ``bench/chaos_app/app.py`` (rlsweep's public API: ``@rlsweep.task``,
``job.log``, ``job.checkpoint(state, every_s=0)`` / ``job.restore()``), 8 jobs of 0.4 to
1 s of deterministic numpy work each, under joblib on 2 workers:

    python bench/chaos_app/app.py -m lr=0.02,0.05 'seed=range(4)' +rlsweep=joblib \\
        hydra.launcher.n_jobs=2 hydra.sweep.dir=<tmpfs>/sweep

First, once: the same grid uninterrupted and serially (``+rlsweep=serial``, the
reference), then once uninterrupted under joblib (its wall time scales the random delays;
its numbers must already equal the reference's). Then each round starts from an empty sweep
directory, runs the command 1 to 3 times, each time inflicting one random fault, then runs
the same command once more, untouched, to the end. The faults:

- ``worker-sigkill``: SIGKILL a worker that is running a job;
- ``parent-sigkill``: SIGKILL the sweep's own process (its workers are orphaned);
- ``parent-sigint``: SIGINT the sweep's process alone, or its whole process group as a
  terminal's Ctrl-C does;
- ``group-sigkill``: SIGKILL the whole process group at a random moment (a machine lost);
- ``midwrite-sigkill``: SIGKILL the whole process group from inside an atomic write of a
  job's ``result.json``, ``checkpoint.pt`` or ``metrics.csv``, or of the sweep's
  ``summary.*`` / ``report.md``: with the temporary file cut short and not yet renamed,
  or just after the rename (``chaos_app/inject/sitecustomize.py``);
- ``disk-full``: fill the results' file system (a tmpfs of its own) to a few KB of
  free space, until the sweep exits or for a moment, then free it.

After each round's finishing run, every property below is checked; a violation names the
round's seed (``--replay SEED`` runs that round again: the same faults, drawn from the
seed, though the moments a timed fault lands vary with the machine's load):

- the finishing run exits 0, within its time limit (no hang), and its lock is released;
- no job is lost: every job of the grid has its ``result.json``, and ``summary.json``
  lists no failed or incomplete job;
- every job's ``result.json`` and ``metrics.csv`` equal the reference's (no wall-clock
  fields are compared: the app returns none);
- no job ran again after it had finished: the app appends every start (and iteration) of
  a job to an execution log outside the sweep directory, and the injection every rename
  of a ``result.json`` into place; no job starts after its first record, none is recorded
  twice, no two processes run one job at once, and a ``result.json`` once seen never
  changes;
- nothing half-written is left: no ``*.tmp`` anywhere in the sweep directory, every
  ``.json``, ``.jsonl``, ``.csv``, ``.yaml``, ``.parquet``, ``.png`` and checkpoint reads
  whole (``.json`` files are checked after every faulted run too: rlsweep writes them all
  atomically);
- no process of any of the round's sweeps outlives it.

The results' file system is a tmpfs mounted under ``--out`` (needs root; without it the
``disk-full`` fault is left out and the sweep runs on the disk). Exit code 1 on any
violation.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import errno
import fcntl
import io
import itertools
import json
import os
import pickle
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
APP = HERE / "chaos_app" / "app.py"
INJECT = HERE / "chaos_app" / "inject"
GRID = ("lr=0.02,0.05", "seed=range(4)")
JOBLIB = ("+rlsweep=joblib", "hydra.launcher.n_jobs=2")
SERIAL = ("+rlsweep=serial",)
KINDS = (
    "worker-sigkill",
    "parent-sigkill",
    "parent-sigint",
    "group-sigkill",
    "midwrite-sigkill",
    "disk-full",
)
# Fields of a result.json that depend on the clock or on the run having been interrupted
# (the chaos app returns none of them; listed for apps that would).
NOT_NUMBERS = ("wall_time_s", "phase_seconds", "resumed_at_steps", "versions")
# Files of the sweep directory written with rlsweep's atomic writes, the targets of
# midwrite-sigkill in the sweep's own process.
SWEEP_FILES = ("summary.json", "summary.md", "summary.csv", "report.md")
RUN_TIMEOUT_S = 180.0
ORPHAN_GRACE_S = 5.0
PNG_START, PNG_END = b"\x89PNG\r\n\x1a\n", b"IEND\xaeB`\x82"


@dataclass(frozen=True)
class Outcome:
    """What a finished job leaves: its result.json values and its metrics.csv text."""

    values: dict[str, Any]
    metrics: str


@dataclass
class Fault:
    kind: str
    detail: str = ""
    landed: bool = False  # the process was alive when the fault struck
    exit_code: int | None = None  # None: it did not exit in time (killed by the soak)
    seconds: float = 0.0
    left: list[str] = field(default_factory=list)  # temporary files it left behind


@dataclass
class RoundReport:
    index: int
    seed: int
    faults: list[Fault] = field(default_factory=list)
    finish_code: int | None = None
    violations: list[tuple[str, str]] = field(default_factory=list)  # (category, what)
    notes: list[str] = field(default_factory=list)
    resumed: int = 0  # job starts from a checkpoint
    recomputed: int = 0  # iterations computed beyond the reference's
    seconds: float = 0.0

    def violate(self, category: str, what: str) -> None:
        if (category, what) not in self.violations:
            self.violations.append((category, what))


# ------------------------------------------------------------------ processes


def proc_stat(pid: int) -> tuple[str, int] | None:
    """``(state, process group)`` of a live process, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rindex(")") + 2 :].split()
    return rest[0], int(rest[2])


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    members = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = proc_stat(int(entry.name))
            if stat is not None and stat[1] == pgid and stat[0] != "Z":
                members.append(int(entry.name))
    return members


def kill_group(pgid: int, signum: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The exit code, or None if it ran past ``timeout`` (its group is then SIGKILLed)."""
    try:
        return proc.wait(timeout=max(timeout, 0.0))
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        proc.wait()
        return None


def sleep_while_running(proc: subprocess.Popen[bytes], seconds: float) -> bool:
    """Sleep ``seconds`` unless the process exits first; whether it still runs."""
    try:
        proc.wait(timeout=max(seconds, 0.0))
    except subprocess.TimeoutExpired:
        return True
    return False


# ------------------------------------------------------------------ files


def read_outcome(job_dir: Path) -> Outcome:
    values = json.loads((job_dir / "result.json").read_text())
    metrics = job_dir / "metrics.csv"
    return Outcome(
        {k: v for k, v in values.items() if k not in NOT_NUMBERS},
        metrics.read_text() if metrics.is_file() else "",
    )


def damage(path: Path) -> str | None:
    """Why a file of the sweep directory is not whole, or None."""
    if path.name.endswith(".tmp"):
        return f"a temporary file left behind ({path.stat().st_size} bytes)"
    suffix = path.suffix
    try:
        if suffix == ".json":
            json.loads(path.read_text())
        elif suffix == ".jsonl":
            text = path.read_text()
            if text and not text.endswith("\n"):
                return "its last line is cut short"
            for line in text.splitlines():
                json.loads(line)
        elif suffix == ".csv":
            text = path.read_text()
            if text and not text.endswith("\n"):
                return "its last row is cut short"
            rows = list(csv.reader(io.StringIO(text)))
            if rows and any(len(r) != len(rows[0]) for r in rows):
                return "rows of different lengths"
        elif suffix == ".yaml":
            import yaml

            yaml.safe_load(path.read_text())
        elif suffix == ".parquet":
            import pyarrow.parquet as pq

            pq.read_table(path)
        elif suffix == ".png":
            data = path.read_bytes()
            if not (data.startswith(PNG_START) and data.endswith(PNG_END)):
                return "not a whole PNG"
        elif path.name == "checkpoint.pt":
            pickle.loads(path.read_bytes())
    except Exception as exc:
        return f"unreadable: {type(exc).__name__}: {str(exc)[:120]}"
    return None


def sweep_files(sweep: Path) -> Iterator[Path]:
    for root, _, names in os.walk(sweep):
        for name in names:
            yield Path(root) / name


def lock_is_free(sweep: Path) -> bool:
    path = sweep / ".rlsweep.lock"
    if not path.exists():
        return True
    with path.open("a") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    return True


def read_events(path: Path) -> list[dict[str, Any]]:
    events = []
    if path.is_file():
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
    return events


# ------------------------------------------------------------------ the soak


class Soak:
    def __init__(self, out: Path, tmpfs_mb: int, kinds: tuple[str, ...]) -> None:
        self.out = out
        self.fs = out / "fs"  # the results' file system
        self.sweep = self.fs / "sweep"
        self.logs = out / "logs"
        self.exec_dir = out / "exec"
        self.tmpfs_mb = tmpfs_mb
        self.kinds = kinds
        self.mounted = False
        self.reference: dict[str, Outcome] = {}
        self.reference_iterations = 0
        self.full_run_s = 0.0
        self.groups: list[int] = []  # process groups of the current round's runs

    # -------------------------------------------------------------- set-up

    def setup(self) -> None:
        for d in (self.fs, self.logs, self.exec_dir):
            d.mkdir(parents=True, exist_ok=True)
        mount = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.tmpfs_mb}m", "tmpfs", str(self.fs)],
            capture_output=True,
            text=True,
            check=False,
        )
        self.mounted = mount.returncode == 0
        if not self.mounted:
            print(
                f"[chaos] no tmpfs ({mount.stderr.strip() or 'mount failed'}): the sweep runs "
                "on the disk and the disk-full fault is left out",
                flush=True,
            )
            self.kinds = tuple(k for k in self.kinds if k != "disk-full")
        if not self.kinds:
            raise SystemExit("no fault kind left to run")
        print(f"[chaos] the command: {shlex.join(self.command(self.sweep, JOBLIB))}", flush=True)
        started = time.monotonic()
        ref_dir = self.out / "reference"
        ref_log = self.exec_dir / "reference.jsonl"
        code = self.run_to_end(self.command(ref_dir, SERIAL), "reference", ref_log, inject=False)
        if code != 0:
            raise SystemExit(f"the serial reference run failed: see {self.logs / 'reference.log'}")
        self.reference = {d.name: read_outcome(d) for d in sorted(ref_dir.glob("*/"))}
        self.reference_iterations = sum(e["event"] == "step" for e in read_events(ref_log))
        print(
            f"[chaos] reference (serial, uninterrupted): {len(self.reference)} jobs, "
            f"{self.reference_iterations} iterations, {time.monotonic() - started:.1f} s",
            flush=True,
        )
        self.clear_sweep()
        started = time.monotonic()
        code = self.run_to_end(
            self.command(self.sweep, JOBLIB), "calibration", self.exec_dir / "calibration.jsonl"
        )
        self.full_run_s = time.monotonic() - started
        check = RoundReport(0, 0, finish_code=code)
        self.check_final(check, self.exec_dir / "calibration.jsonl")
        if check.violations:
            raise SystemExit(
                "the uninterrupted joblib run does not pass the checks (not a chaos finding): "
                + "; ".join(f"{c}: {w}" for c, w in check.violations)
            )
        print(
            f"[chaos] uninterrupted joblib run: {self.full_run_s:.1f} s, equal to the reference",
            flush=True,
        )

    def close(self) -> None:
        for pgid in self.groups:
            kill_group(pgid)
        if self.mounted:
            time.sleep(0.2)
            subprocess.run(["umount", "-l", str(self.fs)], check=False)
            self.mounted = False

    def command(self, sweep_dir: Path, launcher: tuple[str, ...]) -> list[str]:
        return [
            sys.executable,
            str(APP),
            "-m",
            *GRID,
            *launcher,
            f"hydra.sweep.dir={sweep_dir}",
        ]

    def start(
        self,
        cmd: list[str],
        tag: str,
        exec_log: Path,
        *,
        inject: bool = True,
        extra: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env.pop("HYDRA_FULL_ERROR", None)
        env.pop("CHAOS_MIDWRITE", None)
        env.update({"CHAOS_EXEC_LOG": str(exec_log), "CHAOS_RUN": tag})
        if inject:
            path = env.get("PYTHONPATH")
            env["PYTHONPATH"] = str(INJECT) + (os.pathsep + path if path else "")
            env["CHAOS_SWEEP_DIR"] = str(self.sweep)
        env.update(extra or {})
        with (self.logs / f"{tag}.log").open("wb") as log:
            proc = subprocess.Popen(
                cmd,
                cwd=self.out,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.groups.append(proc.pid)
        return proc

    def run_to_end(self, cmd: list[str], tag: str, exec_log: Path, *, inject: bool = True) -> int:
        proc = self.start(cmd, tag, exec_log, inject=inject)
        code = wait_exit(proc, RUN_TIMEOUT_S)
        return -1000 if code is None else code

    def clear_sweep(self) -> None:
        import shutil

        shutil.rmtree(self.sweep, ignore_errors=True)
        (self.fs / "filler").unlink(missing_ok=True)

    def temp_files(self) -> list[str]:
        return [str(p.relative_to(self.sweep)) for p in self.sweep.rglob("*.tmp")]

    def completed(self) -> set[str]:
        return {d.name for d in self.sweep.glob("*/") if (d / "result.json").is_file()}

    # -------------------------------------------------------------- a round

    def round(self, index: int, seed: int, max_faults: int) -> RoundReport:
        rng = random.Random(seed)
        report = RoundReport(index, seed)
        started = time.monotonic()
        self.groups = []
        self.clear_sweep()
        exec_log = self.exec_dir / f"round-{index:04d}.jsonl"
        exec_log.unlink(missing_ok=True)
        seen: dict[str, tuple[int, int]] = {}  # job: (inode, mtime) of its result.json
        for n in range(rng.randint(1, max_faults)):
            kind = rng.choice(self.kinds)
            before = set(self.temp_files())
            fault = self.faulted_run(kind, rng, f"round-{index:04d}-run-{n + 1}", exec_log)
            fault.left = sorted(set(self.temp_files()) - before)
            report.faults.append(fault)
            if fault.exit_code is None:
                report.violate("hang", f"run {n + 1} ({kind}) ran past its time limit")
            self.check_visible(report, seen)
        tag = f"round-{index:04d}-finish"
        report.finish_code = self.run_to_end(self.command(self.sweep, JOBLIB), tag, exec_log)
        self.check_visible(report, seen)
        self.check_final(report, exec_log)
        for fault in report.faults:  # not those an orphaned worker was still writing
            fault.left = [t for t in fault.left if (self.sweep / t).exists()]
        report.seconds = time.monotonic() - started
        return report

    def faulted_run(self, kind: str, rng: random.Random, tag: str, exec_log: Path) -> Fault:
        """Run the command once with one fault; every random choice is drawn up front."""
        fault = Fault(kind)
        delay = rng.uniform(0.5, max(1.0, 0.8 * self.full_run_s))
        pick = rng.random()
        extra: dict[str, str] = {}
        if kind == "midwrite-sigkill":
            target, nth, where, fraction = self.midwrite_target(rng)
            extra["CHAOS_MIDWRITE"] = f"{target}|{nth}|{where}|{fraction:.3f}"
            fault.detail = f"{where} write #{nth} of {target}" + (
                f", temp file cut to {fraction:.0%}" if where == "tmp" else ""
            )
        sigint_group = rng.random() < 0.5
        slack = rng.choice((0, 4096, 16384, 65536))
        hold = rng.uniform(0.3, 2.0) if rng.random() < 0.5 else None
        started = time.monotonic()
        proc = self.start(self.command(self.sweep, JOBLIB), tag, exec_log, extra=extra)
        deadline = started + RUN_TIMEOUT_S
        try:
            if kind == "midwrite-sigkill":
                fault.exit_code = wait_exit(proc, RUN_TIMEOUT_S)
                fault.landed = any(
                    e["event"] == "chaos-kill" and e["run"] == tag for e in read_events(exec_log)
                )
            elif sleep_while_running(proc, delay):
                at = f"at {time.monotonic() - started:.1f} s"
                if kind == "worker-sigkill":
                    fault.landed, fault.detail = self.kill_worker(proc, pick, at)
                elif kind == "parent-sigkill":
                    os.kill(proc.pid, signal.SIGKILL)
                    fault.landed, fault.detail = True, at
                elif kind == "parent-sigint":
                    if sigint_group:
                        kill_group(proc.pid, signal.SIGINT)
                    else:
                        os.kill(proc.pid, signal.SIGINT)
                    fault.landed = True
                    fault.detail = f"{at} to the {'process group' if sigint_group else 'parent'}"
                elif kind == "group-sigkill":
                    kill_group(proc.pid)
                    fault.landed, fault.detail = True, at
                elif kind == "disk-full":
                    fault.landed, fault.detail = self.fill_disk(proc, slack, hold, at, deadline)
            if fault.exit_code is None:
                fault.exit_code = wait_exit(proc, deadline - time.monotonic())
        finally:
            (self.fs / "filler").unlink(missing_ok=True)
        if not fault.landed and not fault.detail:
            fault.detail = "the run ended first"
        fault.seconds = time.monotonic() - started
        return fault

    def midwrite_target(self, rng: random.Random) -> tuple[str, int, str, float]:
        """(file in the sweep dir, which write of it, tmp | renamed, fraction kept)."""
        what = rng.choices(("result.json", "checkpoint.pt", "metrics.csv", "sweep"), (4, 4, 1, 2))
        job = rng.choice(sorted(self.reference))
        nth = rng.randint(1, 6) if what[0] == "checkpoint.pt" else 1
        where = "renamed" if rng.random() < 0.25 else "tmp"
        fraction = rng.random()
        sweep_file = rng.choice(SWEEP_FILES)
        pending = sorted(set(self.reference) - self.completed())
        if what[0] == "sweep" or not pending:
            return sweep_file, 1, where, fraction
        if job not in pending:
            job = pending[int(fraction * len(pending))]
        return f"{job}/{what[0]}", nth, where, fraction

    def kill_worker(self, proc: subprocess.Popen[bytes], pick: float, at: str) -> tuple[bool, str]:
        """SIGKILL a worker of ``proc`` that runs a job (waiting for one while it runs)."""
        while proc.poll() is None:
            running = []
            for pid_file in sorted(self.sweep.glob("*/.worker.pid")):
                with contextlib.suppress(OSError, ValueError):
                    pid = int(pid_file.read_text())
                    stat = proc_stat(pid)
                    if stat is not None and stat[1] == proc.pid and stat[0] != "Z":
                        running.append((pid, pid_file.parent.name))
            if running:
                pid, job = running[int(pick * len(running))]
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    return True, f"{at}: worker {pid} running {job}"
            time.sleep(0.02)
        return False, "no job was running any more"

    def fill_disk(
        self,
        proc: subprocess.Popen[bytes],
        slack: int,
        hold: float | None,
        at: str,
        deadline: float,
    ) -> tuple[bool, str]:
        """Fill the results' file system to ``slack`` bytes free, for ``hold`` seconds or
        (None) until the sweep exits; then free it."""
        stat = os.statvfs(self.fs)
        size = max(0, stat.f_bavail * stat.f_frsize - slack)
        fd = os.open(self.fs / "filler", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        chunk, written = b"\0" * (1 << 20), 0
        try:
            while written < size:
                written += os.write(fd, chunk[: min(len(chunk), size - written)])
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        finally:
            os.close(fd)
        detail = f"{at}: {slack // 1024} KiB left free, " + (
            f"for {hold:.1f} s" if hold is not None else "until the sweep exits"
        )
        sleep_while_running(proc, hold if hold is not None else deadline - time.monotonic())
        (self.fs / "filler").unlink(missing_ok=True)
        return True, detail

    # -------------------------------------------------------------- checks

    def check_visible(self, report: RoundReport, seen: dict[str, tuple[int, int]]) -> None:
        """After any run: what rlsweep writes atomically (every .json) reads whole, each
        result equals the reference's and, once seen, never changes."""
        for path in sweep_files(self.sweep):
            if path.suffix == ".json" and (why := damage(path)) is not None:
                report.violate("half-written", f"{path.relative_to(self.sweep)}: {why}")
        for job in sorted(self.completed()):
            result = self.sweep / job / "result.json"
            st = result.stat()
            key = (st.st_ino, st.st_mtime_ns)
            if seen.setdefault(job, key) != key:
                report.violate("duplicated", f"{job}: result.json was written again")
            if job not in self.reference:
                report.violate("unexpected", f"{job}: a job that is not in the grid")
                continue
            with contextlib.suppress(ValueError, OSError):
                values = read_outcome(self.sweep / job).values
                if values != self.reference[job].values:
                    report.violate("wrong result", f"{job}: result.json differs: {values}")

    def check_final(self, report: RoundReport, exec_log: Path) -> None:
        code = report.finish_code
        if code != 0:
            what = "ran past its time limit" if code == -1000 else f"exited {code}"
            report.violate("finish failed", f"the finishing run {what}")
        if not lock_is_free(self.sweep):
            report.violate("lock", "the sweep lock is still held after the finishing run")
        completed = self.completed()
        for job, ref in self.reference.items():
            if job not in completed:
                report.violate("lost", f"{job}: no result.json")
                continue
            try:
                mine = read_outcome(self.sweep / job)
            except (OSError, ValueError) as exc:
                report.violate("half-written", f"{job}/result.json: {exc!r}")
                continue
            if mine.values != ref.values:
                report.violate("wrong result", f"{job}: result.json differs from the reference")
            if mine.metrics != ref.metrics:
                report.violate("wrong result", f"{job}: metrics.csv differs from the reference")
        summary = self.sweep / "summary.json"
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(summary.read_text())
            if data.get("failed") or data.get("incomplete"):
                report.violate(
                    "lost",
                    f"summary.json lists failed {data.get('failed')}, "
                    f"incomplete {data.get('incomplete')}",
                )
        for path in sweep_files(self.sweep):
            rel = path.relative_to(self.sweep)
            if (why := damage(path)) is not None:
                temp = path.name.endswith(".tmp")
                report.violate("temp file left" if temp else "half-written", f"{rel}: {why}")
            elif path.name == "checkpoint.pt" and path.parent.name in completed:
                report.notes.append(f"{rel}: a finished job's checkpoint was left behind")
            elif path.name == ".worker.pid":
                report.notes.append(f"{rel}: a dead worker's pid file was left behind")
        self.check_executions(report, exec_log, completed)
        self.check_orphans(report)

    def check_executions(self, report: RoundReport, exec_log: Path, completed: set[str]) -> None:
        """From the execution log: no job started after it was recorded, none was recorded
        twice, no two processes ran one job at once."""
        events = read_events(exec_log)
        by_job: dict[str, list[dict[str, Any]]] = {}
        for e in events:
            if "job" in e:
                by_job.setdefault(e["job"], []).append(e)
        report.recomputed = sum(e["event"] == "step" for e in events) - self.reference_iterations
        for job, evs in sorted(by_job.items()):
            starts = [e for e in evs if e["event"] == "start"]
            report.resumed += sum(e.get("step", 0) > 0 for e in starts)
            records = [e for e in evs if e["event"] == "recorded"]
            if len(records) > 1:
                runs = ", ".join(f"{e['run']} (pid {e['pid']})" for e in records)
                report.violate("duplicated", f"{job}: result recorded {len(records)} times: {runs}")
            finished = min((e["t"] for e in records), default=None)
            if finished is None and job in completed:
                finished = (self.sweep / job / "result.json").stat().st_mtime_ns
            for e in starts:
                if finished is not None and e["t"] > finished:
                    report.violate(
                        "duplicated",
                        f"{job}: ran again after it finished ({e['run']}, pid {e['pid']}, "
                        f"from step {e.get('step')}, {(e['t'] - finished) / 1e9:.2f} s later)",
                    )
            spans: dict[tuple[int, int], list[int]] = {}  # (pid, start t): event times
            current: dict[int, int] = {}
            for e in sorted(evs, key=lambda e: e["t"]):
                if e["event"] == "start":
                    current[e["pid"]] = e["t"]
                if e["pid"] in current:
                    spans.setdefault((e["pid"], current[e["pid"]]), []).append(e["t"])
            intervals = sorted((min(ts), max(ts), pid) for (pid, _), ts in spans.items())
            for (_, a1, pa), (b0, _, pb) in itertools.combinations(intervals, 2):
                if pa != pb and b0 < a1:
                    report.violate(
                        "duplicated", f"{job}: pids {pa} and {pb} ran it at the same time"
                    )

    def check_orphans(self, report: RoundReport) -> None:
        deadline = time.monotonic() + ORPHAN_GRACE_S
        for pgid in self.groups:
            while (members := group_members(pgid)) and time.monotonic() < deadline:
                time.sleep(0.1)
            if members:
                report.violate(
                    "orphans", f"processes {members} of sweep {pgid} outlived it (killed)"
                )
                kill_group(pgid)


# ------------------------------------------------------------------ reporting


def describe(report: RoundReport) -> str:
    faults = " + ".join(
        f"{f.kind}({f.detail}; exit {f.exit_code}"
        + (f"; left {', '.join(f.left)}" if f.left else "")
        + ")"
        if f.landed
        else f"{f.kind}(missed: {f.detail})"
        for f in report.faults
    )
    verdict = (
        "ok"
        if not report.violations
        else "VIOLATIONS: " + "; ".join(f"[{c}] {w}" for c, w in report.violations)
    )
    return (
        f"{faults} | finish exit {report.finish_code} | {report.resumed} resumed, "
        f"{report.recomputed} iterations recomputed | {report.seconds:.1f} s | {verdict}"
    )


CATEGORIES = (
    "lost",
    "wrong result",
    "duplicated",
    "half-written",
    "temp file left",
    "lock",
    "finish failed",
    "hang",
    "orphans",
    "unexpected",
)


def summary_tables(reports: list[RoundReport], kinds: tuple[str, ...]) -> str:
    """Faults by kind, then rounds per violated check (markdown)."""
    runs: Counter[str] = Counter()
    landed: Counter[str] = Counter()
    left: Counter[str] = Counter()
    for r in reports:
        for f in r.faults:
            runs[f.kind] += 1
            landed[f.kind] += f.landed
            left[f.kind] += bool(f.left)
    lines = [
        "| fault | faulted runs | landed | left a temp file behind |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {k} | {runs[k]} | {landed[k]} | {left[k]} |" for k in kinds),
        f"| **all** | {sum(runs.values())} | {sum(landed.values())} | {sum(left.values())} |",
        "",
        f"| check ({len(reports)} rounds) | rounds violating it |",
        "| --- | ---: |",
    ]
    for category in CATEGORIES:
        n = sum(any(c == category for c, _ in r.violations) for r in reports)
        lines.append(f"| {category} | {n} |")
    return "\n".join(lines)


def round_seeds(seed: int) -> Iterator[int]:
    rng = random.Random(seed)
    while True:
        yield rng.getrandbits(32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds to run (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the rounds' seeds")
    parser.add_argument("--replay", type=int, default=None, help="run one round of this seed")
    parser.add_argument("--min-kills", type=int, default=0, help="more rounds until N landed")
    parser.add_argument("--max-faults", type=int, default=3, help="faulted runs per round (1-N)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="faults to draw from")
    parser.add_argument("--tmpfs-mb", type=int, default=64, help="size of the results' tmpfs")
    parser.add_argument("--out", type=Path, default=None, help="work directory (default: new)")
    args = parser.parse_args(argv)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown fault kinds {sorted(unknown)}; choose from {', '.join(KINDS)}")
    out = args.out or Path(tempfile.mkdtemp(prefix="rlsweep-chaos-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"[chaos] work directory: {out}", flush=True)
    soak = Soak(out.resolve(), args.tmpfs_mb, kinds)
    reports: list[RoundReport] = []
    started = time.monotonic()
    interrupted = False
    try:
        soak.setup()
        seeds = iter([args.replay]) if args.replay is not None else round_seeds(args.seed)
        rounds = 1 if args.replay is not None else args.rounds
        landed = 0
        for index, seed in enumerate(seeds, 1):
            if index > rounds and landed >= args.min_kills:
                break
            report = soak.round(index, seed, args.max_faults)
            reports.append(report)
            landed += sum(f.landed for f in report.faults)
            print(f"[chaos] round {index} seed {seed}: {describe(report)}", flush=True)
    except KeyboardInterrupt:
        interrupted = True
        print("[chaos] interrupted: the rounds so far follow", flush=True)
    finally:
        soak.close()
    failed = [r for r in reports if r.violations]
    categories: Counter[str] = Counter(c for r in failed for c in {c for c, _ in r.violations})
    notes: Counter[str] = Counter(n.split(": ", 1)[1] for r in reports for n in r.notes)
    total = time.monotonic() - started
    what = f"replay of round seed {args.replay}" if args.replay is not None else f"seed {args.seed}"
    print(f"\n[chaos] {len(reports)} rounds in {total / 60:.1f} min ({what})\n")
    print(summary_tables(reports, soak.kinds))
    if notes:
        print("\nLeft behind (not counted as violations):")
        for what, n in notes.most_common():
            print(f"  {n} x {what}")
    if failed:
        print(f"\nViolations ({', '.join(f'{c}: {n} rounds' for c, n in categories.items())}):")
        for r in failed:
            print(f"  round {r.index}, replay with: python bench/chaos.py --replay {r.seed}")
            for c, w in r.violations:
                print(f"    [{c}] {w}")
    (out / "summary.json").write_text(
        json.dumps(
            {
                "seed": args.seed,
                "minutes": round(total / 60, 1),
                "full_run_s": round(soak.full_run_s, 2),
                "rounds": [asdict(r) for r in reports],
            },
            indent=1,
        )
    )
    print(f"\n[chaos] details: {out / 'summary.json'}; logs: {out / 'logs'}")
    return 1 if failed or interrupted or not reports else 0


if __name__ == "__main__":
    sys.exit(main())
