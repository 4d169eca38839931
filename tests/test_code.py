"""The code a job ran is recorded with its result: a group that mixes two versions of an
app's code is flagged, a resume says the code changed, and with the code part of a job's
identity (``hydra.launcher.identity.code=true``) the edited app's jobs run again."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import NO_REPORT, run_python

from rlsweep.code import code_fingerprint, code_text

APP_DIR = Path(__file__).parent / "apps" / "choices"


def app_copy(tmp_path: Path) -> Path:
    """The choices app copied where the test may edit it (no git repository around)."""
    target = tmp_path / "app"
    shutil.copytree(APP_DIR, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target / "app.py"


def edit(app: Path) -> None:
    """A change of the app's code that changes none of its numbers."""
    app.write_text(app.read_text() + "\n# edited between two runs of the sweep\n")


def sweep(app: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return run_python([str(app), "-m", "+rlsweep=serial", "hydra.sweep.dir=sweep", *args], cwd)


def codes(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    return {
        p.parent.name: json.loads(p.read_text())["rlsweep"]["code"]
        for p in sweep_dir.glob("*/result.json")
    }


def test_an_edited_app_is_said_on_resume_and_flagged_in_a_mixed_group(tmp_path: Path) -> None:
    app = app_copy(tmp_path)
    first = sweep(app, tmp_path, "seed=range(2)", NO_REPORT)
    assert first.returncode == 0, first.stderr
    before = codes(tmp_path / "sweep")
    assert {c["source"] for c in before.values()} == {"files"}
    versions = json.loads((tmp_path / "sweep" / "seed=0" / "packages.json").read_text())
    assert versions["packages"]["hydra"] == __import__("hydra").__version__
    assert len({c["digest"] for c in before.values()}) == 1

    edit(app)
    grown = sweep(app, tmp_path, "seed=range(4)")
    assert grown.returncode == 0, grown.stderr
    assert "2 of the 2 completed jobs kept ran other code than the app's now" in grown.stderr
    after = codes(tmp_path / "sweep")
    assert after["seed=0"] == before["seed=0"] and after["seed=2"] != before["seed=0"]
    summary = (tmp_path / "sweep" / "summary.md").read_text()
    assert "ran different versions of the app code (all: 2)" in summary
    assert "different versions of the app code" in (tmp_path / "sweep" / "report.md").read_text()
    assert "different versions of the app code" in grown.stdout  # the table printed


def test_with_the_code_in_the_identity_an_edited_apps_jobs_run_again(tmp_path: Path) -> None:
    app = app_copy(tmp_path)
    args = ("seed=range(2)", "hydra.launcher.identity.code=true", NO_REPORT)
    first = sweep(app, tmp_path, *args)
    assert first.returncode == 0, first.stderr
    same = sweep(app, tmp_path, *args)
    assert "2 of 2 jobs already complete (skipped), 0 to run" in same.stderr

    edit(app)
    again = sweep(app, tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert "2 completed job(s) ran other code than the app's now and run again" in again.stderr
    digests = {c["digest"] for c in codes(tmp_path / "sweep").values()}
    assert digests == {code_fingerprint_of(app)}
    for job_dir in (tmp_path / "sweep").glob("seed=*"):
        job = json.loads((job_dir / "result.json").read_text())["rlsweep"]["job"]
        assert job["code"] == code_fingerprint_of(app)


def code_fingerprint_of(app: Path) -> str:
    """The digest the app's code has now, computed as a fresh process would."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, runpy; sys.argv = [sys.argv[1]];"
            "from rlsweep.code import code_fingerprint; import importlib.util as u;"
            "s = u.spec_from_file_location('app', sys.argv[0]); m = u.module_from_spec(s);"
            "s.loader.exec_module(m); print(code_fingerprint(m.main)['digest'])",
            str(app),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
    )


def test_a_repositorys_commit_and_changes_are_the_code_outputs_are_not(tmp_path: Path) -> None:
    """In a git repository: the commit, and a digest of the tracked changes and untracked
    ``*.py`` files; what the sweep writes (multirun/, other files) is not code."""
    import importlib.util

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text("def main(cfg):\n    return 1.0\n")
    git(repo, "init", "-q")
    git(repo, "add", "train.py")
    git(repo, "commit", "-qm", "first")

    def fingerprint() -> dict[str, Any]:
        from rlsweep import code

        code._cache.clear()  # (a new process computes it afresh)
        spec = importlib.util.spec_from_file_location("train", repo / "train.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return code_fingerprint(module.main)

    clean = fingerprint()
    assert clean["source"] == "git" and clean["changes"] is None and len(clean["commit"]) == 40
    assert code_text(clean) == f"git {clean['commit'][:12]}"
    (repo / "multirun" / "a").mkdir(parents=True)
    (repo / "multirun" / "a" / "result.json").write_text("{}")
    (repo / "notes.txt").write_text("not code")
    assert fingerprint()["digest"] == clean["digest"]

    (repo / "helper.py").write_text("X = 1\n")  # untracked code
    untracked = fingerprint()
    assert untracked["changes"] is not None and untracked["digest"] != clean["digest"]
    (repo / "helper.py").unlink()
    (repo / "train.py").write_text("def main(cfg):\n    return 2.0\n")
    edited = fingerprint()
    assert edited["digest"] not in (clean["digest"], untracked["digest"])
    assert code_text(edited).endswith("+ uncommitted changes")
    git(repo, "commit", "-qam", "second")
    committed = fingerprint()
    assert committed["changes"] is None and committed["commit"] != clean["commit"]
    assert committed["digest"] not in (clean["digest"], edited["digest"])
    (repo / "README.md").write_text("docs only\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-qm", "docs")
    docs = fingerprint()  # a commit of docs changes no job's code
    assert docs["commit"] != committed["commit"] and docs["digest"] == committed["digest"]
    from rlsweep.code import packages

    assert packages()["numpy"] == __import__("numpy").__version__  # what the process imported


def test_code_in_site_packages_is_its_distributions_version() -> None:
    import hydra.main

    found = code_fingerprint(hydra.main)
    assert found["source"] == "package" and found["package"] == f"hydra {hydra.__version__}"
