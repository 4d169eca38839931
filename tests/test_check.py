"""``python -m rlsweep.check`` believed: no difference where the numbers are the same, the
first differing series named where they are not, and no folder left behind.

Two apps as published (tests/apps/check_apps, nothing of rlsweep in them, opted in from the
command line): one names its run folder by time and a random hash and pickles its config
there (``timed``), one writes a timestamped plain-text log as MuJoCo does beside its series
(``textlog``). ``CHECK_APP_NOISY=<series>`` (the check's runs inherit the environment)
makes one series differ from run to run, on purpose. Each check runs with ``TMPDIR`` set
to a folder of the test's, listed afterwards. The matching of two runs' trees is tested on
trees written here.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import NO_REPORT, run_python

from rlsweep.check.diff import compare_jobs
from rlsweep.check.runs import match_runs

APPS = Path(__file__).parent / "apps" / "check_apps"
# The name the timed app gives its run folder, hash and time included.
RUN_FOLDER = r"outputs/ppo_cartpole_[0-9a-f]{6}_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d"


def sweep(app: str, tmp: Path) -> Path:
    """A one-job sweep of the app ``app``, serially, opted in from the command line."""
    proc = run_python([str(APPS / app / "app.py"), "-m", "+rlsweep=serial", NO_REPORT], tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp / "multirun" / "app"


def check(
    sweep_dir: Path, tmp: Path, noisy: str | None = None, *options: str
) -> tuple[subprocess.CompletedProcess[str], list[Path]]:
    """The check of the sweep's job (``noisy``: the series made nondeterministic), and the
    ``rlsweep-check-*`` folders its temp directory holds afterwards."""
    temp = tmp / ("tmp-" + (noisy or "same").replace("/", "-"))
    temp.mkdir()
    env = {"TMPDIR": str(temp), **({"CHECK_APP_NOISY": noisy} if noisy else {})}
    proc = run_python(["-m", "rlsweep.check", str(sweep_dir), *options], tmp, env=env)
    return proc, sorted(temp.glob("rlsweep-check-*"))


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sweep("timed", tmp_path_factory.mktemp("timed"))


@pytest.fixture(scope="module")
def textlog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sweep("textlog", tmp_path_factory.mktemp("textlog"))


def test_run_folders_named_by_time_and_hash_are_matched(timed: Path) -> None:
    proc, left = check(timed, timed.parent.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    # Every series (the one named by its run folder's path too), result and file compared:
    # train/loss, outputs/<run folder>/train/reward, monitor/train/reward; 8 steps each;
    # final.json, seeds.json, packages.json and config.pkl (which holds its run folder's name).
    assert (
        "No difference found in 3 logged series (24 values), 1 result value(s) and "
        "4 other file(s)." in proc.stdout
    ), proc.stdout
    assert re.search(
        rf"Matched under other names: {RUN_FOLDER} \(run 1\) = {RUN_FOLDER} \(run 2\)", proc.stdout
    ), proc.stdout
    assert "Written by run" not in proc.stdout  # nothing left unmatched
    assert "Left out as timings (they differ between any two runs): time/fps" in proc.stdout
    assert left == []  # its temporary folder removed


def test_a_series_made_nondeterministic_is_named_under_its_run_folder(timed: Path) -> None:
    proc, left = check(timed, timed.parent.parent, noisy="train/reward")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    # The run folder's series, paired across the two runs' names, at the step the noise
    # starts (not "missing" at step 0: a series of one run only).
    number = r"-?\d+\.\d+(e[-+]\d+)?"
    first = (
        rf"First difference: {RUN_FOLDER}/events\.out\.tfevents\.[^,]+, "
        rf"{RUN_FOLDER}/train/reward at step 3: {number} \(run 1\) vs {number} \(run 2\)\n"
    )
    assert re.search(first, proc.stdout), proc.stdout
    assert "The two runs were removed (--keep keeps them, to look into)." in proc.stdout
    assert left == []


def test_a_timestamped_text_log_is_no_difference(textlog: Path) -> None:
    proc, left = check(textlog, textlog.parent.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "No difference found in 2 logged series (16 values)" in proc.stdout, proc.stdout
    logs = re.search(r"Text logs, not compared as results: (.*)", proc.stdout)
    assert logs is not None, proc.stdout
    # MuJoCo's log differs only in its time; train.log in the process id of each line.
    listed = logs.group(1).split(", ")
    assert "MUJOCO_LOG.TXT (same but for dates and times)" in listed, listed
    assert "train.log (differs from line 1)" in listed, listed
    assert left == []


def test_the_first_differing_series_is_named_beside_a_text_log(textlog: Path) -> None:
    proc, left = check(textlog, textlog.parent.parent, "eval/return", "--keep")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert "First difference: ppo/scalars/eval/return.csv, eval/return at step 3: " in proc.stdout
    assert "MUJOCO_LOG.TXT (same but for dates and times)" in proc.stdout
    # --keep: kept, and said where.
    assert len(left) == 1 and f"The two runs are kept in {left[0]} (run1/, run2/)." in proc.stdout
    # The text logs the check did not count as a difference do differ, byte for byte.
    mujoco = [
        (left[0] / run / "defaults" / "MUJOCO_LOG.TXT").read_bytes() for run in ("run1", "run2")
    ]
    assert mujoco[0] != mujoco[1]


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_folders_are_matched_by_masked_name_then_by_content(tmp_path: Path) -> None:
    """Two folders of one masked name told apart by what they hold; a folder named by
    random words matched by what it holds; a file that records its folder's name."""
    a = write(
        tmp_path / "a",
        {
            "logs/exp_20261202-101112/eval.npy": "1",
            "logs/exp_20261202-101113/train.npy": "2",
            "brave-panda/weights.bin": "3",
            "run_3f2a1c/config.yaml": "dir: logs/exp_20261202-101112\n",
        },
    )
    b = write(
        tmp_path / "b",
        {
            "logs/exp_20261202-101117/train.npy": "2",  # the earlier name, the other content
            "logs/exp_20261202-101118/eval.npy": "1",
            "quiet-otter/weights.bin": "3",
            "run_9b8e7d/config.yaml": "dir: logs/exp_20261202-101118\n",
            "extra.bin": "4",
        },
    )
    matching = match_runs(a, b)
    assert matching.renamed == [
        ("brave-panda", "quiet-otter"),
        ("logs/exp_20261202-101112", "logs/exp_20261202-101118"),
        ("logs/exp_20261202-101113", "logs/exp_20261202-101117"),
        ("run_3f2a1c", "run_9b8e7d"),
    ]
    assert matching.only == ([], ["extra.bin"])
    found = compare_jobs(a, b, limit=None, finished=True)
    assert found.files == 4  # config.yaml the same, run 2's folder names read as run 1's
    assert (
        str(found.difference) == "extra.bin: written by run 2 only (no file of run 1's matches it)"
    )
    (b / "extra.bin").unlink()
    (b / "quiet-otter" / "weights.bin").write_text("5")
    found = compare_jobs(a, b, limit=None, finished=True)
    assert str(found.difference) == "brave-panda/weights.bin: differs at byte 0"
