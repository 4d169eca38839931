"""No code from the sweep directory runs (issue 57): a sweep directory on a shared,
group-writable file system may hold files others planted.

- A ``checkpoint.pt`` planted in an unfinished job's directory (its unpickling would touch
  a marker file) is never unpickled, for the built-in app and for an app's
  ``job.checkpoint`` / ``job.restore``: the job starts from scratch (the same numbers as a
  fresh run) and its log says why. Only a checkpoint signed with the user's key
  (rlsweep.trust), for this job, is resumed.
- ``python -m rlsweep.check`` runs the command ``sweep.json`` records only in a sweep
  directory that is the user's alone to write, or with ``--trust``; else it exits 2
  showing the command.

Every sweep here signs with a key of the test's own (``RLSWEEP_KEY_FILE``).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import NO_REPORT, TINY, run_python
from test_checkpoint import job_config

from rlsweep import checkpoint
from rlsweep.identity import Keys, identity_of
from rlsweep.job import computation_config, train_and_evaluate
from rlsweep.store import CHECKPOINT_FILE, RESULT_FILE, SWEEP_FILE
from rlsweep.task_api import Job

LOOP_APP = Path(__file__).parent / "apps" / "loop" / "app.py"
TIMED_APP = Path(__file__).parent / "apps" / "check_apps" / "timed" / "app.py"
BUDGET = ("train.total_steps=1024", "eval.every_steps=512", "eval.episodes=2")


class Planted:
    """What a planted checkpoint holds: unpickling it touches ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def planted(marker: Path) -> bytes:
    return pickle.dumps(Planted(marker), protocol=pickle.HIGHEST_PROTOCOL)


@pytest.fixture(autouse=True)
def user_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's key for this test (its sweeps inherit the variable)."""
    path = tmp_path / "keys" / "user"
    monkeypatch.setenv("RLSWEEP_KEY_FILE", str(path))
    return path


def sign_as(
    key_file: Path, payload: bytes, identity: str, monkeypatch: pytest.MonkeyPatch
) -> bytes:
    """``payload`` signed for ``identity`` with another key (someone else's)."""
    from rlsweep import trust

    mine = os.environ["RLSWEEP_KEY_FILE"]
    monkeypatch.setenv("RLSWEEP_KEY_FILE", str(key_file))
    try:
        return trust.sign(payload, identity)
    finally:
        monkeypatch.setenv("RLSWEEP_KEY_FILE", mine)


def job_log(job_dir: Path) -> str:
    """The job's log (Hydra's, named after the app: rlsweep.log, app.log)."""
    return "".join(p.read_text() for p in sorted(job_dir.glob("*.log")))


# ------------------------------------------------------------ a planted checkpoint, in a sweep


def rerun_with_planted(args: Sequence[str], cwd: Path, sweep: Path) -> tuple[Path, dict, dict]:
    """Run the one-job sweep ``args``, then make its job unfinished (no result.json) with a
    planted checkpoint, and run the same command again: the job's directory, its result
    before and after."""
    first = run_python(args, cwd)
    assert first.returncode == 0, first.stderr[-3000:]
    (result_file,) = sweep.glob(f"*/{RESULT_FILE}")
    job_dir, before = result_file.parent, json.loads(result_file.read_text())
    result_file.unlink()
    (job_dir / CHECKPOINT_FILE).write_bytes(planted(cwd / "MARKER"))
    again = run_python(args, cwd)
    assert again.returncode == 0, again.stderr[-3000:]
    return job_dir, before, json.loads(result_file.read_text())


def test_a_checkpoint_planted_in_a_builtin_job_runs_no_code(workdir: Path) -> None:
    args = ["-m", "rlsweep", "-m", "seed=0", *TINY, "launcher=serial", NO_REPORT]
    args.append("train.checkpoint_every_s=0")
    job_dir, before, after = rerun_with_planted(args, workdir, workdir / "multirun" / "default")
    assert not (workdir / "MARKER").exists()
    assert after["resumed_at_steps"] == []  # from scratch: the fresh run's numbers
    assert after["state_sha256"] == before["state_sha256"]
    assert after["final_episode_returns"] == before["final_episode_returns"]
    assert "not resuming from checkpoint.pt: no rlsweep signature" in job_log(job_dir)
    assert not (job_dir / CHECKPOINT_FILE).exists()


def test_a_checkpoint_planted_in_an_api_job_runs_no_code(workdir: Path) -> None:
    """An app's ``job.restore()`` (tests/apps/loop) refuses it too."""
    args = [str(LOOP_APP), "-m", "seed=0", "steps=6", "sleep_s=0", "rlsweep=serial", NO_REPORT]
    job_dir, before, after = rerun_with_planted(args, workdir, workdir / "multirun" / "app")
    assert not (workdir / "MARKER").exists()
    assert after["resumed"] == 0 and after["total"] == before["total"]
    assert "not resuming from checkpoint.pt: no rlsweep signature" in job_log(job_dir)


# ------------------------------------------------- what is refused, and why (in one process)


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_a_builtin_checkpoint_is_resumed_only_if_signed_by_the_user_for_the_job(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = job_config([*BUDGET, "train.checkpoint_every_s=0"])
    digest = checkpoint.config_digest(computation_config(job))
    fresh = train_and_evaluate(job, tmp_path / "fresh")
    genuine = (tmp_path / "fresh" / CHECKPOINT_FILE).read_bytes()  # the final state's
    marker, other_key = tmp_path / "MARKER", tmp_path / "keys" / "someone-else"
    cases = {
        # A file signed with someone else's key, naming this job.
        "forged": (
            sign_as(other_key, planted(marker), digest, monkeypatch),
            "not signed by this user's key (or altered since): refused, as a file others "
            "may have planted",
        ),
        # A header naming another job: not looked further into.
        "another job's": (
            sign_as(other_key, planted(marker), "another", monkeypatch),
            "not this job's: a checkpoint of a different config",
        ),
        "cut short": (genuine[: len(genuine) // 2], "damaged"),
        "altered": (genuine[:-1] + bytes([genuine[-1] ^ 1]), "not signed by this user's key"),
    }
    for name, (data, why) in cases.items():
        job_dir = tmp_path / name.replace(" ", "-")
        job_dir.mkdir()
        (job_dir / CHECKPOINT_FILE).write_bytes(data)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            result = train_and_evaluate(job, job_dir)
        assert f"not resuming from checkpoint.pt: {why}" in caplog.text, (name, caplog.text)
        assert result["resumed_at_steps"] == [], name
        assert result["state_sha256"] == fresh["state_sha256"], name
    assert not marker.exists()
    # The user's own checkpoint of the job resumes (its last iteration boundary), bit for bit.
    (tmp_path / "genuine").mkdir()
    (tmp_path / "genuine" / CHECKPOINT_FILE).write_bytes(genuine)
    resumed = train_and_evaluate(job, tmp_path / "genuine")
    assert len(resumed["resumed_at_steps"]) == 1 and resumed["resumed_at_steps"][0] > 0
    assert resumed["state_sha256"] == fresh["state_sha256"]


def test_an_api_checkpoint_is_restored_only_if_signed_by_the_user_for_the_job(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    identity = identity_of({"lr": 0.1, "seed": 0}, Keys())
    marker = tmp_path / "MARKER"
    saved = Job(identity, tmp_path / "saved")
    saved.directory.mkdir()
    saved.log(1, x=1.0)
    saved.checkpoint({"step": 1}, every_s=0.0)
    cases = {
        "unsigned": (planted(marker), "no rlsweep signature"),
        "forged": (
            sign_as(tmp_path / "other-key", planted(marker), identity.digest, monkeypatch),
            "not signed by this user's key",
        ),
        "another job's": (
            saved.checkpoint_path.read_bytes(),
            "not this job's: another job's (other settings)",
        ),
    }
    for name, (data, why) in cases.items():
        other = identity_of({"lr": 0.2, "seed": 0}, Keys())
        job = Job(other if name == "another job's" else identity, tmp_path / name)
        job.directory.mkdir()
        job.checkpoint_path.write_bytes(data)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert job.restore() is None, name
        assert f"not resuming from checkpoint.pt: {why}" in caplog.text, (name, caplog.text)
        assert job.resumed_at == [] and job.metrics == [], name
    assert not marker.exists()
    again = Job(identity, saved.directory)
    assert again.restore() == {"step": 1} and again.resumed_at == [1]


# ------------------------------------------------------------------------------ the key


def test_the_key_is_made_for_the_user_alone_and_refused_if_others_may_read_it(
    tmp_path: Path, user_key: Path
) -> None:
    from rlsweep import trust

    assert not user_key.exists()
    signed = trust.sign(b"payload", "job")
    assert stat.S_IMODE(user_key.stat().st_mode) == 0o600
    assert trust.verify(signed, "job") == b"payload"  # the same key, read back
    user_key.chmod(0o640)
    with pytest.raises(trust.KeyFileError, match=r"open to others \(mode 0640\).*chmod 600"):
        trust.verify(signed, "job")
    user_key.chmod(0o600)
    user_key.write_text("not a key\n")
    with pytest.raises(trust.KeyFileError, match="is not an rlsweep key"):
        trust.sign(b"payload", "job")


# ------------------------------------------------------------------------------ rlsweep.check


@pytest.fixture
def timed_sweep(workdir: Path) -> Path:
    """A one-job sweep of tests/apps/check_apps/timed, serially."""
    proc = run_python([str(TIMED_APP), "-m", "+rlsweep=serial", NO_REPORT], workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return workdir / "multirun" / "app"


def test_the_check_refuses_the_command_of_a_directory_others_may_write(
    timed_sweep: Path, workdir: Path
) -> None:
    record_file = timed_sweep / SWEEP_FILE
    record = json.loads(record_file.read_text())
    marker = workdir / "MARKER"
    record["app"]["command"] = ["sh", "-c", f"touch {marker}", "sh"]  # as someone planted it
    record_file.write_text(json.dumps(record))
    for writable in (timed_sweep, record_file):  # the directory, or its sweep.json
        mode = writable.stat().st_mode
        writable.chmod(mode | stat.S_IWGRP)
        proc = run_python(["-m", "rlsweep.check", str(timed_sweep)], workdir)
        writable.chmod(mode)
        assert proc.returncode == 2, proc.stdout + proc.stderr[-3000:]
        assert f"{writable} is writable by its group" in proc.stderr, proc.stderr
        assert f"sh -c 'touch {marker}' sh -m" in proc.stderr, proc.stderr
        assert "--trust" in proc.stderr, proc.stderr
        assert not marker.exists()


def test_the_check_shows_and_runs_the_command_of_a_directory_others_may_write_with_trust(
    timed_sweep: Path, workdir: Path
) -> None:
    command = json.loads((timed_sweep / SWEEP_FILE).read_text())["app"]["command"]
    timed_sweep.chmod(timed_sweep.stat().st_mode | stat.S_IWGRP | stat.S_IWOTH)
    proc = run_python(["-m", "rlsweep.check", str(timed_sweep), "--trust"], workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "No difference found" in proc.stdout
    assert f"rlsweep.check: Running, twice, in {workdir}: {command[0]}" in proc.stderr
