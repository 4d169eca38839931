"""The launcher's own rules, on a third-party app (tests/apps/plain, no torch): options
refused before anything is written, attempts logged by every executor, the sweep-level
keys of any app refused, and failures of the cluster's tools said, not swallowed."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from test_any_app import run_app, run_serially


def test_threading_backend_refuses_jobs_that_change_directory(tmp_path: Path) -> None:
    proc = run_app(["x=1,2", "hydra.launcher.backend=threading", "hydra.job.chdir=true"], tmp_path)
    assert proc.returncode != 0
    assert "backend=threading needs hydra.job.chdir=false" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "multirun").exists()  # refused before anything was written


@pytest.mark.parametrize(
    ("option", "needle"),
    [
        ("hydra.launcher.retries=1", "retries is not supported with executor=submitit_local"),
        ("+hydra.launcher.job_timeout_s=5", "job_timeout_s does not apply"),
    ],
)
def test_submitit_options_are_refused_before_the_sweep_starts(
    tmp_path: Path, option: str, needle: str
) -> None:
    proc = run_app(["x=1,2", "rlsweep=submitit_local", option], tmp_path)
    assert proc.returncode != 0 and needle in proc.stderr
    assert not (tmp_path / "multirun").exists()  # no lock, no multirun.yaml


def test_serial_retries_log_every_attempt_and_start_without_the_old_error(
    tmp_path: Path,
) -> None:
    once = tmp_path / "fail-once"
    once.touch()
    env = {"PLAIN_APP_FAIL_ONCE": str(once)}
    proc = run_serially(["x=1,2", "fail_x=2", "hydra.launcher.retries=1"], tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (job,) = [p for p in (tmp_path / "multirun" / "app").iterdir() if p.name.startswith("x=2")]
    attempts = [json.loads(line) for line in (job / "attempts.jsonl").read_text().splitlines()]
    assert [(a["attempt"], a["outcome"]) for a in attempts] == [(1, "failed"), (2, "completed")]
    assert attempts[0]["error"] == "RuntimeError: planned failure at x=2"
    assert not (job / "error.txt").exists()  # the retry succeeded: no stale traceback
    assert "launching 2 jobs serially" in proc.stdout + proc.stderr


def test_failed_jobs_are_listed_without_hydras_stack_trace_hint(tmp_path: Path) -> None:
    proc = run_app(["x=1,2", "fail_x=2"], tmp_path)
    assert proc.returncode == 1
    assert "1 of 2 jobs failed:" in proc.stderr and "traceback: " in proc.stderr
    assert "HYDRA_FULL_ERROR" not in proc.stderr  # the traceback is in error.txt, said above


def test_one_job_is_one_job(tmp_path: Path) -> None:
    proc = run_serially(["x=1"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "rlsweep launching 1 job serially" in proc.stdout + proc.stderr


def test_a_key_the_launcher_reads_cannot_be_swept_in_any_app(tmp_path: Path) -> None:
    """The app's own key that hydra.launcher interpolates: every job would run with one."""
    proc = run_app(["x=1,2", "hydra.launcher.n_jobs=${x}"], tmp_path)
    assert proc.returncode != 0
    assert "Sweeping over 'x' (x=1,2) is not supported" in proc.stderr
    assert not (tmp_path / "multirun").exists()


def test_a_failed_scancel_is_said_with_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlsweep.executors.submitit import _scancel

    fake = tmp_path / "scancel"
    fake.write_text("#!/bin/sh\necho 'scancel: error: Access/permission denied' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    _scancel(["41"])
    err = capsys.readouterr().err
    assert "could not cancel SLURM job array 41: scancel: error: Access/permission denied" in err
    assert "scancel 41" in err and "cancelled SLURM" not in err


def test_a_job_error_says_whether_the_job_was_preempted_across_processes() -> None:
    """A SLURM job requeues itself only after a stop on request: known by type, not text."""
    import pickle

    from rlsweep.errors import JobError

    stopped = pickle.loads(pickle.dumps(JobError("Preempted: stopped", "tb", preempted=True)))
    assert stopped.preempted and stopped.remote_traceback == "tb"
    assert not pickle.loads(pickle.dumps(JobError("Preempted: a message", "tb"))).preempted


def test_files_a_killed_run_left_are_removed_when_the_sweep_runs_again(tmp_path: Path) -> None:
    """A SIGKILL inside an atomic write leaves its temporary file; one after a job's result
    was written leaves its checkpoint and worker pid (found by bench/chaos.py)."""
    assert run_serially(["x=1,2"], tmp_path).returncode == 0
    sweep = tmp_path / "multirun" / "app"
    (job,) = [p for p in sweep.iterdir() if p.name.startswith("x=1")]
    left = [job / ".result.json.k2j4x9.tmp", job / "checkpoint.pt", job / ".worker.pid"]
    left.append(sweep / ".summary.md.a8d3.tmp")
    for path in left:
        path.write_text("cut short")
    again = run_serially(["x=1,2"], tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "2 of 2 jobs already complete (skipped)" in again.stderr
    assert "removed 4 file(s) that killed runs left" in again.stderr
    assert [p for p in left if p.exists()] == []
    assert (job / "result.json").is_file()


def test_a_full_disk_is_said_in_one_paragraph(tmp_path: Path) -> None:
    import errno

    from omegaconf import OmegaConf

    from rlsweep.errors import ConfigError
    from rlsweep.sweep.run import SweepRun
    from rlsweep.task_api import TaskHooks

    def full(sweep_dir: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(sweep_dir / "summary.md"))

    class Launcher:  # any Hydra launcher: here one whose jobs all completed
        def launch(self, jobs: list[list[str]], initial_job_idx: int) -> list[object]:
            return []

    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "s")}}})
    run = SweepRun(Launcher(), config, TaskHooks(on_sweep_end=full), "missing")
    with pytest.raises(
        ConfigError, match=r"No space left on the device of .* \(writing .*summary\.md\)"
    ):
        run.run([[["x=1"]]])


def test_a_job_recorded_before_its_pool_broke_is_never_run_again(tmp_path: Path) -> None:
    """A worker dies; the pool breaks and fails every future in flight, including that of
    a job whose other worker had just recorded its result (found by bench/chaos.py, seed
    2029, round 39): that job is done, not run again."""
    import pickle
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    from hydra.core.utils import JobStatus
    from omegaconf import OmegaConf

    from rlsweep.executors.dispatch import Dispatcher
    from rlsweep.identity import Keys, identity_of
    from rlsweep.launch.compose import Recipe
    from rlsweep.launch.jobs import SweepJob
    from rlsweep.launch.options import LauncherOptions
    from rlsweep.progress import Progress
    from rlsweep.store import write_record

    def job(i: int) -> SweepJob:
        hydra = {"job": {"name": "j"}, "overrides": {}, "runtime": {}}
        base = pickle.dumps(OmegaConf.create({"x": i, "hydra": hydra}))
        made = SweepJob(
            i, (f"x={i}",), Recipe(base, base, (), (), "", {}), identity_of({"x": i}, Keys())
        )
        made.__dict__["directory"] = tmp_path / f"x={i}"  # where it writes
        return made

    jobs = [job(0), job(1)]
    write_record(jobs[0].directory, {"score": 1.0}, jobs[0].identity)  # done in its worker
    submitted: list[int] = []

    def submit(pool: object, j: SweepJob) -> Future[object]:
        submitted.append(j.idx)
        future: Future[object] = Future()
        future.set_exception(BrokenProcessPool("a worker died"))
        return future

    class Pools:
        def make(self, lane: int) -> tuple[object, object]:
            return object(), lambda: None

        def kill(self, pool: object) -> None:
            pass

    options = LauncherOptions.of({
        "executor": "joblib", "n_jobs": 2, "backend": "loky", "start_method": "spawn",
        "progress": False, "idle_worker_timeout": 1.0,
    }).checked()  # fmt: skip
    progress = Progress(total=2, enabled=False)
    results = Dispatcher(options, submit, jobs, progress, Pools()).run()  # type: ignore[arg-type]
    assert submitted == [0, 1]  # job 0 was never submitted again
    assert [r.status for r in results] == [JobStatus.COMPLETED, JobStatus.FAILED]
    assert results[0].return_value["score"] == 1.0
    attempts = (jobs[0].directory / "attempts.jsonl").read_text()
    assert '"outcome": "completed"' in attempts


def test_a_module_another_thread_is_importing_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threaded jobs: one job's thread imports torch while another sets its thread count
    (a partly initialised torch has no get_num_threads yet; seen once in CI)."""
    import sys
    import threading
    import time

    from rlsweep.threads import loaded

    (tmp_path / "slow_module.py").write_text("import time\ntime.sleep(1.0)\nVALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert loaded("slow_module") is None  # not imported: not imported here either
    importer = threading.Thread(target=__import__, args=("slow_module",))
    importer.start()
    while "slow_module" not in sys.modules:
        time.sleep(0.01)
    module = loaded("slow_module")  # partly initialised until the other thread is done
    assert module is not None and module.VALUE == 42
    importer.join()
    monkeypatch.delitem(sys.modules, "slow_module")


COMPOSE_SPY = """
import os, sys
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from rlsweep.launch.compose import Recipe

def spy(cls, name):
    original = getattr(cls, name)
    def logged(*args, **kwargs):
        with open(os.environ["COMPOSE_LOG"], "a") as f:
            f.write(f"{os.path.basename(sys.argv[0])} {name}\\n")
        return original(*args, **kwargs)
    setattr(cls, name, logged)

spy(ConfigLoaderImpl, "load_sweep_config")
spy(Recipe, "compose")
"""


def test_submitit_jobs_are_composed_where_they_run_not_in_the_parent(tmp_path: Path) -> None:
    spy = tmp_path / "spy"
    spy.mkdir()
    (spy / "sitecustomize.py").write_text(COMPOSE_SPY)
    log = tmp_path / "compose.log"
    path = os.pathsep.join(p for p in (str(spy), os.environ.get("PYTHONPATH")) if p)
    env = {"PYTHONPATH": path, "COMPOSE_LOG": str(log)}
    proc = run_app(["x=1,2,3", "lr=0.1,0.2", "rlsweep=submitit_local"], tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    calls = log.read_text().splitlines()
    # The parent composes once for the sweep's one set of config-group choices, and runs
    # no job's composition; each job is composed once, in the process that runs it.
    assert sorted(c for c in calls if c.startswith("app.py")) == ["app.py load_sweep_config"]
    assert sorted(c for c in calls if not c.startswith("app.py")) == ["_submit.py compose"] * 6


# ------------------------------------------------ the options, declared once (issue 54)


def test_the_launcher_node_is_the_options_declared_once() -> None:
    """Hydra's node ``hydra/launcher=rlsweep`` holds LauncherOptions' config keys and no
    other, the plugin declares none of its own (no field, no constructor parameter), and
    every key's value is what the launcher's options hold."""
    import inspect

    from hydra.core.config_store import ConfigStore
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from hydra_plugins.rlsweep_launcher.rlsweep_launcher import (
        RLSweepLauncher,
        RLSweepLauncherConf,
    )
    from rlsweep.launch.options import LauncherOptions

    node = ConfigStore.instance().load("hydra/launcher/rlsweep.yaml").node
    assert list(node) == LauncherOptions.config_keys()
    assert issubclass(OmegaConf.get_type(node), LauncherOptions)  # type: ignore[arg-type]
    assert "__annotations__" not in vars(RLSweepLauncherConf)  # the node's name, no field
    kinds = [p.kind for p in inspect.signature(RLSweepLauncher.__init__).parameters.values()]
    assert kinds == [inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.VAR_KEYWORD]
    overrides = {"executor": "serial", "n_jobs": 3, "retries": 2, "slurm": {"qos": "high"}}
    given = OmegaConf.merge(node, overrides)
    launcher = instantiate(given)  # as Hydra makes it: the node's keys as keyword arguments
    assert isinstance(launcher.options, LauncherOptions)
    expected = OmegaConf.to_object(given)
    for key in LauncherOptions.config_keys():
        assert getattr(launcher.options, key) == getattr(expected, key), key
    assert launcher.options.slurm.qos == "high" and launcher.options.workers == 1
    unknown = r"RLSweepLauncher\.__init__\(\) got an unexpected keyword argument 'no_such_option'"
    with pytest.raises(TypeError, match=unknown):  # as Python says it of any constructor
        RLSweepLauncher(no_such_option=1)


def test_an_option_added_as_one_field_is_a_config_key_and_reaches_the_executors() -> None:
    """A field is all an option takes: it is a key of the config node, with its default,
    and its value is in the options every executor is handed (checked, sized for the jobs'
    threads, moved to fresh workers or to a forked one). Derived fields are no keys."""
    from dataclasses import dataclass

    from omegaconf import OmegaConf

    from rlsweep.launch.options import LauncherOptions

    @dataclass(frozen=True)
    class WithAnOption(LauncherOptions):
        # What the new option does (the comment --cfg hydra users read in the source).
        answer: int = 42

    node = OmegaConf.structured(WithAnOption)
    assert list(node) == [*LauncherOptions.config_keys(), "answer"] and node.answer == 42
    assert not {"workers", "gpu_share", "devices", "threads_per_job"} & set(node)
    options = WithAnOption.of({"answer": 7, "n_jobs": 2}).checked()
    handed = [options, options.for_threads(2), options.in_workers(), options.single_job_fork()]
    for executor_sees in handed:
        assert isinstance(executor_sees, WithAnOption) and executor_sees.answer == 7
    with pytest.raises(TypeError, match="unexpected keyword argument 'workers'"):
        LauncherOptions.of({"workers": 3})  # derived, not a key: never set from a config
