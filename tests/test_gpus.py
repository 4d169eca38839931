"""GPUs shared between jobs (``hydra.launcher.gpus_per_job``, ``hydra.launcher.gpus``).

No GPU here: the devices are declared, and the jobs of tests/apps/gpus record the
CUDA_VISIBLE_DEVICES they saw, their process and when they ran. Concurrency is read from
the recorded intervals; the jobs wait for each other (a rendezvous with a long time-out),
so a sweep that can run N jobs at once shows N at once on a busy machine too.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_python

from rlsweep.errors import ConfigError
from rlsweep.executors.submitit_setup import slurm_parameters
from rlsweep.gpus import Lanes, check_share
from rlsweep.launch.options import LauncherOptions
from rlsweep.slurm_options import SlurmOptions

APP = Path(__file__).parent / "apps" / "gpus" / "app.py"
# Eight jobs at half a GPU each on two declared devices: four at once, two per device.
SHARED = ["-m", "x=range(8)", "total=8", "together=4", "hydra.launcher.gpus_per_job=0.5"]
DEVICES = "hydra.launcher.gpus=[0,1]"


def run_app(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> Any:
    proc = run_python([str(APP), *args], cwd, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def seen(sweep: Path) -> dict[str, dict[str, Any]]:
    """What each job recorded as it ended, by job directory."""
    return {p.parent.name: json.loads(p.read_text()) for p in sweep.glob("*/ended.json")}


def most_at_once(jobs: list[dict[str, Any]]) -> int:
    """The most recorded intervals [start, end] that overlap at one time."""
    return max((sum(o["start"] <= j["start"] <= o["end"] for o in jobs) for j in jobs), default=0)


def assert_shared_as_declared(sweep: Path) -> None:
    """Eight jobs at gpus_per_job=0.5 on devices 0 and 1: at most (and, the jobs waiting
    for each other, exactly) four at once, two per device, each seeing its one device,
    which its result.json and its log name."""
    jobs = seen(sweep)
    assert len(jobs) == 8, sorted(jobs)
    assert not [d for d, j in jobs.items() if j["waited_out"]], "fewer than 4 ran at once"
    assert {j["cuda"] for j in jobs.values()} == {"0", "1"}  # one device each, both used
    assert most_at_once(list(jobs.values())) == 4
    for device in ("0", "1"):
        assert most_at_once([j for j in jobs.values() if j["cuda"] == device]) == 2
    for name, job in jobs.items():
        record = json.loads((sweep / name / "result.json").read_text())["rlsweep"]
        assert record["gpus"] == {"devices": [job["cuda"]], "per_job": 0.5}
        log = (sweep / name / "app.log").read_text()
        assert f"this job's GPU(s): {job['cuda']} (CUDA_VISIBLE_DEVICES={job['cuda']}," in log


def identities(sweep: Path) -> dict[str, str]:
    return {
        p.parent.name: json.loads(p.read_text())["rlsweep"]["identity"]
        for p in sweep.glob("*/result.json")
    }


def test_pool_runs_eight_half_gpu_jobs_four_at_once_two_per_device(tmp_path: Path) -> None:
    """The done-when of issue 32 under the pool. n_jobs=8: the shares alone limit the
    jobs at once. A sweep of the same grid without GPUs (serial, alongside) gives the same
    job directories and identities: where a job ran is not what it is."""
    plain = subprocess.Popen(
        [sys.executable, str(APP), "-m", "x=range(8)", "rlsweep=serial", "hydra.sweep.dir=plain"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    run_app([*SHARED, DEVICES, "hydra.launcher.n_jobs=8"], tmp_path)
    assert plain.wait(timeout=300) == 0, plain.stderr.read() if plain.stderr else ""
    sweep = tmp_path / "multirun/app"
    assert_shared_as_declared(sweep)
    assert identities(sweep) == identities(tmp_path / "plain") and len(identities(sweep)) == 8
    assert "gpus" not in json.loads((tmp_path / "plain/x=0/result.json").read_text())["rlsweep"]
    # Each worker process stays on its device: a reused worker never changes devices.
    by_pid: dict[int, set[str]] = {}
    for job in seen(sweep).values():
        by_pid.setdefault(job["pid"], set()).add(job["cuda"])
    assert all(len(devices) == 1 for devices in by_pid.values()), by_pid


def test_submitit_local_runs_eight_half_gpu_jobs_four_at_once_two_per_device(
    tmp_path: Path,
) -> None:
    """The done-when of issue 32 under submitit's local executor (no SLURM needed)."""
    parallel = "hydra.launcher.slurm.array_parallelism=8"  # the shares alone limit them
    run_app([*SHARED, DEVICES, "rlsweep=submitit_local", parallel], tmp_path)
    assert_shared_as_declared(tmp_path / "multirun/app")


def test_a_single_job_with_gpus_runs_in_a_worker_on_its_devices(tmp_path: Path) -> None:
    """A launch of one job under the pool runs in a worker forked from the sweep's
    process, but not with GPUs: a process forked from one that initialised CUDA cannot use
    it. The job's process loaded the app itself. Whole GPUs, declared by name, with the
    multiprocessing backend."""
    sweep = subprocess.Popen(
        [
            sys.executable,
            str(APP),
            "-m",
            "x=3",
            "hydra.launcher.gpus_per_job=2",
            "hydra.launcher.gpus=[5,7]",
            "hydra.launcher.backend=multiprocessing",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = sweep.communicate(timeout=300)
    assert sweep.returncode == 0, err[-3000:]
    ((name, job),) = seen(tmp_path / "multirun/app").items()
    assert job["pid"] != sweep.pid and job["loaded_in"] not in (sweep.pid, None)
    assert job["cuda"] == "5,7"
    record = json.loads((tmp_path / "multirun/app" / name / "result.json").read_text())["rlsweep"]
    assert record["gpus"] == {"devices": ["5", "7"], "per_job": 2.0}
    assert "(1 threads per job), 2 GPUs per job on GPUs 5,7" in out + err


def test_a_crashed_worker_breaks_only_its_devices_lane(tmp_path: Path) -> None:
    """Job x=0 kills its worker (on device 0) once. Only the jobs in flight on device 0
    run again; every job completes, and no job that ran on device 1 ran twice."""
    once = tmp_path / "crash-once"
    once.touch()
    args = ["-m", "x=range(4)", "hold_s=1", "hydra.launcher.gpus_per_job=0.5", DEVICES]
    run_app([*args, "hydra.launcher.n_jobs=4"], tmp_path, {"GPUS_APP_CRASH_ONCE": f"0:{once}"})
    sweep = tmp_path / "multirun/app"
    assert not once.exists() and len(seen(sweep)) == 4
    runs = {d: (sweep / d / "runs.txt").read_text().split("\n")[:-1] for d in seen(sweep)}
    assert len(runs["x=0"]) == 2 and runs["x=0"][0].endswith(" 0"), runs
    for name, lines in runs.items():
        if name != "x=0" and lines[0].endswith(" 1"):
            assert len(lines) == 1, (name, lines)
    attempts = (sweep / "x=0/attempts.jsonl").read_text()
    assert '"outcome": "completed"' in attempts


def test_a_share_that_is_not_allowed_is_refused_before_anything_runs(tmp_path: Path) -> None:
    proc = run_python([str(APP), "-m", "x=0,1", "hydra.launcher.gpus_per_job=0.3"], tmp_path)
    assert proc.returncode != 0
    assert "hydra.launcher.gpus_per_job=0.3 is not allowed" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not (tmp_path / "multirun").exists()


# ---------------------------------------------------------------- options, no process


def options(**kwargs: Any) -> LauncherOptions:
    settings: dict[str, Any] = {
        "executor": "joblib",
        "n_jobs": 8,
        "backend": "loky",
        "start_method": "spawn",
        "progress": False,
        "idle_worker_timeout": 1.0,
    }
    return LauncherOptions.of({**settings, **kwargs}).checked()


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"gpus_per_job": 0.3}, "gpus_per_job=0.3 is not allowed"),
        ({"gpus_per_job": 1.5}, "gpus_per_job=1.5 is not allowed"),
        ({"gpus_per_job": -1}, "gpus_per_job=-1 is not allowed"),
        ({"gpus": [0, 1]}, "gpus lists devices but hydra.launcher.gpus_per_job is null"),
        ({"gpus_per_job": 1, "gpus": [0, 0]}, "list distinct devices"),
        ({"gpus_per_job": 4, "gpus": [0, 1]}, "more GPUs per job than the 2 device(s)"),
        ({"gpus_per_job": 1, "gpus": [0], "executor": "serial"}, "needs jobs in worker"),
        ({"gpus_per_job": 1, "gpus": [0], "backend": "threading"}, "needs jobs in worker"),
        ({"gpus_per_job": 0.5, "executor": "slurm"}, "shard"),
        ({"gpus_per_job": 1, "gpus": [0], "executor": "slurm"}, "does not apply to executor=slurm"),
        (
            {"gpus_per_job": 2, "gpus": [0, 1], "executor": "submitit_local", "n_jobs": None},
            "",
        ),
        (
            {"gpus_per_job": 2, "slurm": {"gpus_per_node": 1}, "executor": "submitit_local"},
            "disagree",
        ),
    ],
)
def test_gpu_options_are_checked(kwargs: dict[str, Any], needle: str) -> None:
    if not needle:  # allowed
        assert options(**kwargs).devices == ("0", "1")
        return
    with pytest.raises(ConfigError) as refused:
        options(**kwargs)
    assert needle in str(refused.value)
    assert "hydra.launcher." in str(refused.value)


def test_shares_and_lanes() -> None:
    assert check_share(0.25) == 0.25 and check_share(0.33) == 1 / 3 and check_share(None) == 0
    # Whole GPUs: each job its own pair; a fifth device left over.
    pairs = Lanes.create(("0", "1", "2", "3", "4"), 2, 8)
    assert pairs.devices == [("0", "1"), ("2", "3")] and pairs.slots == 2
    # A quarter each: four jobs to a device, no more than the limit (n_jobs) at once,
    # spread over the devices.
    quarters = Lanes.create(("0", "1"), 0.25, 3)
    assert quarters.capacity == 4 and quarters.slots == 3 and quarters.per_lane == 2
    assert [quarters.take(), quarters.take(), quarters.take(), quarters.take()] == [0, 1, 0, None]
    quarters.give(1)
    assert quarters.take() == 1
    assert quarters.env(1) == {
        "CUDA_VISIBLE_DEVICES": "1",
        "RLSWEEP_GPUS": "1",
        "RLSWEEP_GPUS_PER_JOB": "0.25",
    }
    assert Lanes.create((), 0, 3).env(0) == {}  # no GPU asked: the environment is left alone


def test_n_jobs_is_capped_by_the_shares() -> None:
    assert options(gpus_per_job=0.5, gpus=[0, 1], n_jobs=8).workers == 4
    assert options(gpus_per_job=1, gpus=[0, 1], n_jobs=None).for_threads(1).workers <= 2


def test_the_devices_this_machine_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA_VISIBLE_DEVICES when set (its names as they are); else nvidia-smi -L (a stand-in
    on PATH here); none: refused, saying where it looked."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aa,GPU-bb")
    assert options(gpus_per_job=1).devices == ("GPU-aa", "GPU-bb")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho 'GPU 0: Tesla T4 (UUID: GPU-aa)'\necho 'GPU 1: Tesla T4 (UUID: GPU-bb)'\n"
    )
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert options(gpus_per_job=0.5).devices == ("0", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ConfigError) as refused:
        options(gpus_per_job=1)
    assert "shows 0 GPUs (CUDA_VISIBLE_DEVICES='')" in str(refused.value)


def test_slurm_asks_whole_gpus_per_job() -> None:
    """On SLURM, gpus_per_job is sbatch's --gpus-per-node: each array task is its own
    allocation, so each job gets its own GPUs."""
    from submitit.slurm.slurm import _make_sbatch_string

    share = options(executor="slurm", gpus_per_job=2).gpu_share
    params = slurm_parameters(SlurmOptions(), threads=1, job_name="j", n_jobs=2, gpus=int(share))
    script = _make_sbatch_string(command="python", folder="F/%j", map_count=2, **params)
    assert "#SBATCH --gpus-per-node=2" in script.splitlines()
    none = slurm_parameters(SlurmOptions(), threads=1, job_name="j", n_jobs=2)
    assert "gpus_per_node" not in none
