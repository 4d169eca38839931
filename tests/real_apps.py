"""What every published-style app goes through, opted in from the command line only: a 2 x 4
grid with one job failing on purpose, the same command again (only the failed job runs), and
again (nothing runs, and the summary and report are kept), a changed config value refused
with a hint that works when pasted, and the report on the app's own logs. Used by
test_torchrl_seeded.py, test_torchrl_unseeded.py and test_zen_app.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from conftest import run_python

from rlsweep.check.diff import TIMING
from rlsweep.series import job_series


@dataclass
class App:
    """A test app and how a grid of it is asked for."""

    source: Path  # its directory under tests/apps
    grid: list[str]  # the command line's overrides: the opt-in, 2 values x 4 replicates
    failing: str  # TEST_APP_FAIL: the overrides of the one job made to fail
    # A change of a config value in its files (old text, new text), for the refusal.
    change: tuple[str, str]
    replicate_key: str  # the key the grid's replicates are at, as the start line names it
    config_file: str = "config.yaml"


@dataclass
class Flow:
    """Each step's process, and where the app and its sweep are."""

    app: Path
    sweep: Path
    runs: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    # The error.txt of each job that failed in the first step, by job directory.
    errors: dict[str, str] = field(default_factory=dict)


def run(
    app: Path, args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return run_python([str(app / "app.py"), "-m", *args], cwd, env=env, timeout=600)


def run_flow(spec: App, tmp: Path) -> Flow:
    """The steps, in order (each kept for the tests to read)."""
    app = tmp / "app"
    shutil.copytree(spec.source, app)
    flow = Flow(app, tmp / "work" / "multirun" / "app")
    work = tmp / "work"
    flow.runs["failing"] = run(app, spec.grid, work, env={"TEST_APP_FAIL": spec.failing})
    flow.errors = {p.parent.name: p.read_text() for p in flow.sweep.glob("*/error.txt")}
    flow.runs["again"] = run(app, spec.grid, work)
    flow.runs["nothing"] = run(app, spec.grid, work)
    config = app / spec.config_file
    old, new = spec.change
    assert old in config.read_text(), f"{old!r} not in {config}"
    config.write_text(config.read_text().replace(old, new))
    flow.runs["refused"] = refused = run(app, spec.grid, work)
    hint = re.search(r"add (\S+) to the command", refused.stderr)
    flow.runs["pasted"] = run(app, [*spec.grid, hint.group(1) if hint else "no-hint"], work)
    return flow


def statuses(sweep: Path) -> dict[str, str]:
    """Each job directory's status: completed (result.json), failed (error.txt)."""
    out = {}
    for job in sorted(p for p in sweep.iterdir() if (p / ".hydra").is_dir()):
        out[job.name] = (
            "completed"
            if (job / "result.json").is_file()
            else "failed"
            if (job / "error.txt").is_file()
            else "incomplete"
        )
    return out


def check_flow(flow: Flow, spec: App, names: list[str]) -> None:
    """Every step did what the issue asks (``names``: the 8 job directories expected)."""
    failing = flow.runs["failing"]
    assert failing.returncode == 1, failing.stderr[-3000:]
    # Its directory's name: the swept keys, the replicate key last.
    items = [item.lstrip("+") for item in spec.failing.split(",")]
    rep = [i for i in items if i.split("=")[0] == spec.replicate_key]
    failed = ",".join([*sorted(i for i in items if i not in rep), *rep])
    assert "1 of 8 jobs failed" in failing.stderr, failing.stderr[-3000:]
    start = f"8 jobs: 2 groups x 4 replicates (replicate key '{spec.replicate_key}'"
    assert start in failing.stderr, failing.stderr[-3000:]
    again = flow.runs["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    assert "7 of 8 jobs already complete (skipped), 1 to run" in again.stderr
    nothing = flow.runs["nothing"]
    assert (
        nothing.returncode == 0
        and "8 of 8 jobs already complete (skipped), 0 to run" in nothing.stderr
    )
    # Nothing the report reads changed (the app's own logs included): kept, not redrawn.
    assert "kept as they are" in nothing.stdout, nothing.stdout[-2000:]
    refused = flow.runs["refused"]
    assert refused.returncode != 0 and "then," in refused.stderr and "now" in refused.stderr
    pasted = flow.runs["pasted"]
    assert pasted.returncode == 0, refused.stderr[-2000:] + pasted.stderr[-2000:]
    assert sorted(statuses(flow.sweep)) == sorted(names)
    assert set(statuses(flow.sweep).values()) == {"completed"}
    assert list(flow.errors) == [failed]  # one job failed, and only it
    assert f'File "{flow.app / "app.py"}"' in flow.errors[failed]  # the app's own file
    assert "TEST_APP_FAIL: planned failure" in flow.errors[failed]
    assert (flow.sweep / "report.md").is_file()
    assert (flow.sweep / "report_learning_curves.png").is_file()


def comparable_series(job_dir: Path) -> dict[str, tuple[list[float], list[float]]]:
    """A job's logged series but timings, as plain lists (steps, values)."""
    return {
        name: (s.steps.tolist(), s.values.tolist())
        for name, s in job_series(job_dir).items()
        if not TIMING.search(name)
    }


def grid_names(key: str) -> list[str]:
    """The 8 job directories, named by the swept keys, the replicate key ``key`` last."""
    return [f"optim.lr={lr},{key}={s}" for lr in ("0.0003", "0.001") for s in range(4)]
