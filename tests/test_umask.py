"""Files a team can read: every file and directory a sweep writes (results, seeds, the
summary and report, the sweep's records, attempts, metrics, the lock) has the mode the
umask gives any program's, as on a shared, group-writable file system teammates and a web
server read them."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

APPS = Path(__file__).parent / "apps"


def sweep_under_umask(umask: int, app: str, args: list[str], cwd: Path) -> None:
    """``python tests/apps/<app>/app.py -m ARGS`` in the sweep's own process, started by a
    shell that set ``umask`` first (the report on)."""
    command = f'umask {umask:03o} && exec "$0" "$@"'
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    proc = subprocess.run(
        ["bash", "-c", command, sys.executable, str(APPS / app / "app.py"), "-m", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def modes(sweep: Path) -> dict[str, tuple[str, int]]:
    """Every regular file's and directory's mode under ``sweep`` (links left out: they are
    the app's, see rlsweep.outside_logs)."""
    found = {}
    for path in [sweep, *sweep.rglob("*")]:
        info = path.lstat()
        if stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode):
            kind = "dir" if stat.S_ISDIR(info.st_mode) else "file"
            found[str(path.relative_to(sweep))] = (kind, stat.S_IMODE(info.st_mode))
    return found


@pytest.mark.parametrize("umask", [0o022, 0o002], ids=["umask022", "umask002"])
def test_every_file_of_a_sweep_follows_the_umask(tmp_path: Path, umask: int) -> None:
    """The plain app twice (the second run with rerun=all, so that its earlier files move
    into .previous/1/) and the API app (metrics.csv), each with its summary and report."""
    plain, api = tmp_path / "plain", tmp_path / "api"
    plain.mkdir()
    api.mkdir()
    sweep_under_umask(umask, "plain", ["x=1,2", "rlsweep=serial"], plain)
    sweep_under_umask(umask, "plain", ["x=1,2", "rlsweep=serial", "hydra.sweeper.rerun=all"], plain)
    sweep_under_umask(umask, "api", ["lr=0.1,0.2", "rlsweep=serial"], api)
    found = {
        **{f"plain/{k}": v for k, v in modes(plain / "multirun" / "app").items()},
        **{f"api/{k}": v for k, v in modes(api / "multirun" / "app").items()},
    }
    want = {"file": 0o666 & ~umask, "dir": 0o777 & ~umask}
    wrong = {name: oct(mode) for name, (kind, mode) in found.items() if mode != want[kind]}
    assert wrong == {}
    # What the check covers: rlsweep's own records, the report, the moved-aside files.
    for name in (
        "plain/.",
        "plain/sweep.json",
        "plain/.rlsweep.lock",
        "plain/summary.md",
        "plain/report.html",
        "plain/x=1/result.json",
        "plain/x=1/seeds.json",
        "plain/x=1/attempts.jsonl",
        "plain/x=1/.previous/1/draws.json",
        "api/lr=0.1/metrics.csv",
    ):
        assert name in found, sorted(found)
