"""launcher=slurm and launcher=submitit_local: options, errors, and runs on a real cluster.

The ``slurm`` tests need a running SLURM cluster; on a machine without one they skip,
saying how to start the local one (``sudo bash scripts/start-local-slurm.sh``). With
RLSWEEP_REQUIRE_SLURM=1 (CI) they fail instead of skipping.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import (
    SLEEPING_ENV,
    TINY,
    results,
    run_cli,
    run_clis,
    run_python,
    start_cli,
    start_python,
)
from test_determinism import fingerprint

from rlsweep.errors import ConfigError
from rlsweep.executors import submitit as _submitit
from rlsweep.slurm_options import SlurmOptions

HOW_TO_START = (
    "no SLURM cluster here: start the local one with `sudo bash scripts/start-local-slurm.sh` "
    "(Debian/Ubuntu; installs slurm, munge and mariadb on first use), then run the tests again"
)


def _cluster_problem() -> str | None:
    """Why the SLURM tests cannot run here, or None when a cluster answers."""
    for command in ("sbatch", "srun", "squeue", "sacct", "sinfo", "scancel"):
        if shutil.which(command) is None:
            return f"{command} is not on PATH"
    try:
        info = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20, check=False
        )
        acct = subprocess.run(
            ["sacct", "-n", "-X", "-j", "1"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"SLURM does not answer: {exc}"
    if info.returncode != 0:
        return f"sinfo failed: {info.stderr.strip()}"
    if not any(s.strip("*~#") in ("idle", "mixed", "allocated") for s in info.stdout.split()):
        return f"no node is up (sinfo: {info.stdout.split()})"
    if acct.returncode != 0:
        return f"sacct does not work (accounting off?): {acct.stderr.strip()}"
    return None


@pytest.fixture(scope="module")
def cluster() -> None:
    problem = _cluster_problem()
    if problem is None:
        return
    message = f"{problem}; {HOW_TO_START}"
    if os.environ.get("RLSWEEP_REQUIRE_SLURM") == "1":
        pytest.fail(f"RLSWEEP_REQUIRE_SLURM=1 but {message}")
    pytest.skip(message)


def sacct_states(array_id: str, *, tasks: int = 0) -> dict[str, str]:
    """Final states of an array's tasks from the accounting database.

    sacct lags a few seconds behind the controller, and a job id reused after a purge can
    still name an older job there: with ``tasks``, wait until that many array tasks
    (``<id>_<i>``) are recorded in a final state.
    """
    deadline = time.monotonic() + 60
    while True:
        states = _sacct(array_id)
        done = [k for k, v in states.items() if "_" in k and v not in ("PENDING", "RUNNING")]
        if len(done) >= tasks or time.monotonic() > deadline:
            return {k: v for k, v in states.items() if "_" in k} if tasks else states
        time.sleep(0.5)


def _sacct(array_id: str) -> dict[str, str]:
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", array_id],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("|", 1) for line in out.splitlines() if line)


def array_ids(sweep_dir: Path) -> list[str]:
    """The SLURM job (array) ids of a sweep (submitit's folders are named by job id; a
    batch of one job is a plain job, not an array)."""
    ids = {
        p.name.split("_")[0]
        for p in sweep_dir.glob(".submitit/*/*")
        if p.is_dir() and p.name.replace("_", "").isdigit()
    }
    return sorted(ids, key=int)


def wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


# ---------------------------------------------------------------- no cluster needed


def test_the_docs_cluster_yaml_selects_slurm_with_its_settings(workdir: Path) -> None:
    """docs/slurm.md's own cluster file, used as the page says, sets what it claims."""
    page = (Path(__file__).parents[1] / "docs" / "slurm.md").read_text()
    yaml_text = page.split("`myconf/launcher/mycluster.yaml`:\n\n```yaml\n", 1)[1]
    yaml_text = yaml_text.split("```", 1)[0]
    (workdir / "myconf/launcher").mkdir(parents=True)
    (workdir / "myconf/launcher/mycluster.yaml").write_text(yaml_text)
    proc = run_cli(["--config-dir", "myconf", "launcher=mycluster", "--cfg", "hydra"], workdir)
    assert proc.returncode == 0, proc.stderr
    launcher = proc.stdout.split("\n  launcher:\n", 1)[1]
    for line in ("executor: slurm", "partition: cpu", "account: my-lab", "timeout_min: 120"):
        assert line in launcher, line
    assert "- module load python/3.11" in launcher and "max_num_requeue: 5" in launcher


def sbatch_script(opts: SlurmOptions, *, threads: int, job_name: str, n_jobs: int) -> str:
    """The sbatch script submitit writes for a batch of ``n_jobs`` with these options."""
    from submitit.slurm.slurm import _make_sbatch_string

    params = _submitit.slurm_parameters(opts, threads=threads, job_name=job_name, n_jobs=n_jobs)
    return str(
        _make_sbatch_string(
            command="python -u -m submitit.core._submit FOLDER",
            folder="FOLDER/%j",
            map_count=n_jobs if n_jobs > 1 else None,
            **params,
        )
    )


def test_sbatch_script_carries_every_option() -> None:
    opts = SlurmOptions(
        partition="gpu",
        account="rl",
        qos="high",
        timeout_min=30,
        cpus_per_task=2,
        gpus_per_node=1,
        mem_gb=4,
        constraint="avx512",
        exclude="node[01-02]",
        array_parallelism=2,
        setup=["module load python/3.11"],
        additional_parameters={"mail-type": "END"},
    )
    script = sbatch_script(opts, threads=2, job_name="rlsweep-x", n_jobs=4)
    for line in (
        "#SBATCH --partition=gpu",
        "#SBATCH --account=rl",
        "#SBATCH --qos=high",
        "#SBATCH --time=30",
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --gpus-per-node=1",
        "#SBATCH --mem=4GB",
        "#SBATCH --constraint=avx512",
        "#SBATCH --exclude='node[01-02]'",
        "#SBATCH --array=0-3%2",  # one array for the batch, 2 jobs at once
        "#SBATCH --mail-type=END",
        "#SBATCH --job-name=rlsweep-x",
        "#SBATCH --ntasks-per-node=1",
        "export OMP_NUM_THREADS=2",
        "export MKL_NUM_THREADS=2",
        "export RLSWEEP_THREADS_PER_JOB=2",
        "module load python/3.11",
    ):
        assert line in script.splitlines(), f"{line!r} missing from:\n{script}"
    # The thread caps come before the user's lines (which may override them).
    assert script.index("export OMP_NUM_THREADS=2") < script.index("module load python/3.11")
    # One GPU per array task: each task is its own allocation, no GPU shared by jobs.
    assert "--gres" not in script and "CUDA_VISIBLE_DEVICES" not in script


def test_defaults_request_no_gpu_and_no_limit() -> None:
    script = sbatch_script(SlurmOptions(), threads=1, job_name="j", n_jobs=3)
    lines = script.splitlines()
    assert "#SBATCH --array=0-2%3" in lines
    assert "#SBATCH --cpus-per-task=1" in lines
    assert "#SBATCH --time=60" in lines
    assert not any(
        flag in script for flag in ("--gpus", "--partition", "--account", "--qos", "--mem")
    )


def test_cpus_per_task_defaults_to_the_jobs_threads() -> None:
    import pickle

    from omegaconf import OmegaConf

    from rlsweep.identity import Keys, identity_of
    from rlsweep.launch.compose import Recipe
    from rlsweep.launch.jobs import SweepJob

    def job(i: int, keys: dict[str, object]) -> SweepJob:
        base = OmegaConf.create({**keys, "hydra": {"job": {"name": "j"}, "overrides": {}}})
        recipe = Recipe(pickle.dumps(base), pickle.dumps(base), (), (), "", {})
        return SweepJob(i, (), recipe, identity_of(keys, Keys()))

    jobs = [job(i, {"torch_threads": 3}) for i in range(2)]
    assert _submitit.cpus_per_task(SlurmOptions(), jobs) == 3
    assert _submitit.cpus_per_task(SlurmOptions(cpus_per_task=5), jobs) == 5
    assert _submitit.cpus_per_task(SlurmOptions(), [job(0, {})]) == 1


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("timeout_min", 0, "timeout_min"),
        ("cpus_per_task", 0, "cpus_per_task"),
        ("array_parallelism", 0, "array_parallelism"),
        ("max_num_requeue", -1, "max_num_requeue"),
    ],
)
def test_invalid_options_are_refused(field: str, value: int, needle: str) -> None:
    opts = SlurmOptions()
    setattr(opts, field, value)
    with pytest.raises(ConfigError, match=needle):
        opts.check("submitit_local")


def test_slurm_without_slurm_names_the_problem_and_alternatives(workdir: Path) -> None:
    proc = run_cli(
        ["-m", "seed=0", *TINY, "launcher=slurm"],
        workdir,
        env={"PATH": str(Path(sys.executable).parent)},  # python, but no sbatch / srun
    )
    assert proc.returncode != 0
    for needle in ("sbatch", "start-local-slurm.sh", "launcher=submitit_local", "launcher=joblib"):
        assert needle in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not list(workdir.glob("multirun/*/*/result.json"))


def test_submitit_local_runs_the_grid_bitwise_like_serial(workdir: Path) -> None:
    grid = ["-m", "agent=a2c", "seed=0,1", *TINY]
    runs = run_clis(
        {
            "local": ([*grid, "launcher=submitit_local", "name=local"], workdir, None),
            "serial": ([*grid, "launcher=serial", "name=serial"], workdir, None),
        }
    )
    for proc in runs.values():
        assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = fingerprint(workdir / "multirun/local"), fingerprint(workdir / "multirun/serial")
    assert len(a) == 2 and a == b


def test_submitit_local_gives_each_job_its_own_gpu(workdir: Path) -> None:
    """No GPU here: the test checks the environment each job sees (torch stays on CPU)."""
    proc = run_cli(
        [
            "-m",
            "agent=a2c",
            "seed=0,1,2",
            *TINY,
            "launcher=submitit_local",
            "hydra.launcher.slurm.gpus_per_node=1",
            "name=gpus",
        ],
        workdir,
        env={"CUDA_VISIBLE_DEVICES": "0,1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = []
    for err in workdir.glob("multirun/gpus/.submitit/*/*/*_log.err"):
        for line in err.read_text().splitlines():
            if line.startswith("[rlsweep] job "):
                seen.append(line.split("CUDA_VISIBLE_DEVICES=")[1].strip())
    # Two GPUs, three jobs: at most two at once, each on one device, never all on GPU 0.
    assert sorted(seen) in (["0", "0", "1"], ["0", "1", "1"]), seen


def test_submitit_local_without_gpus_refuses_gpus_per_node(workdir: Path) -> None:
    proc = run_cli(
        ["-m", "seed=0", *TINY, "launcher=submitit_local", "hydra.launcher.slurm.gpus_per_node=1"],
        workdir,
        env={"CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.returncode != 0
    assert "gpus_per_node=1" in proc.stderr and "0 GPU" in proc.stderr, proc.stderr[-2000:]


# ---------------------------------------------------------------- on a real cluster


@pytest.mark.slurm
def test_grid_as_one_array_bitwise_equal_to_joblib(cluster: None, workdir: Path) -> None:
    grid = ["-m", "agent=a2c,ppo", "seed=range(2)", *TINY]
    slurm = [*grid, "launcher=slurm", "hydra.launcher.slurm.array_parallelism=2", "name=slurm"]
    runs = run_clis(  # the joblib reference runs meanwhile, beside the cluster's jobs
        {
            "slurm": (slurm, workdir, None),
            "joblib": ([*grid, "launcher=joblib", "n_jobs=2", "name=joblib"], workdir, None),
        }
    )
    for proc in runs.values():
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert "4/4 done | 0 failed" in runs["slurm"].stderr
    sweep = workdir / "multirun/slurm"
    a, b = fingerprint(sweep), fingerprint(workdir / "multirun/joblib")
    assert len(a) == 4 and a == b
    assert len({v[1] for v in a.values()}) == 4  # four genuinely different jobs
    # One SLURM job array for the batch, throttled to 2 tasks at once.
    (array,) = array_ids(sweep)
    assert sacct_states(array, tasks=4) == {f"{array}_{i}": "COMPLETED" for i in range(4)}
    scripts = list(sweep.glob(f".submitit/*/{array}/*submission.sh")) or list(
        sweep.glob(".submitit/*/*/*submission.sh")
    )
    assert scripts and "#SBATCH --array=0-3%2" in scripts[0].read_text()


@pytest.mark.slurm
def test_failing_job_is_failed_in_slurm_with_its_traceback(cluster: None, workdir: Path) -> None:
    proc = run_cli(["-m", "env=fault", "seed=0,1", *TINY, "launcher=slurm", "name=f"], workdir)
    assert proc.returncode != 0
    assert "1 of 2 jobs failed" in proc.stderr and "InjectedFault" in proc.stderr, proc.stderr
    sweep = workdir / "multirun/f"
    (array,) = array_ids(sweep)
    assert sacct_states(array, tasks=2) == {f"{array}_0": "FAILED", f"{array}_1": "COMPLETED"}
    (failed_dir,) = [d for d in sweep.iterdir() if "seed=0" in d.name]
    error = (failed_dir / "error.txt").read_text()
    assert "Traceback" in error and "InjectedFault: injected fault at step 50" in error
    assert "InjectedFault" in (sweep / "summary.md").read_text()
    assert len(results(sweep)) == 1


@pytest.mark.slurm
def test_cancelled_job_is_reported_failed_and_not_waited_for(cluster: None, workdir: Path) -> None:
    args = ["-m", "env=fault", "env.kwargs.fault=hang", "seed=0,1", *TINY]
    proc = start_cli([*args, "launcher=slurm", "name=c"], workdir)
    sweep = workdir / "multirun/c"
    try:
        wait_for(lambda: array_ids(sweep), 60, "the array's submission")
        (array,) = array_ids(sweep)
        hanging = f"{array}_0"  # seed=0 hangs (the fault's replicate)
        wait_for(lambda: sacct_states(array).get(hanging) == "RUNNING", 60, "the job to run")
        subprocess.run(["scancel", hanging], check=True)
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "1 of 2 jobs failed" in stderr and "cancelled in SLURM" in stderr, stderr[-3000:]
    (failed_dir,) = [d for d in sweep.iterdir() if "seed=0" in d.name]
    assert "cancelled in SLURM" in (failed_dir / "error.txt").read_text()
    final = sacct_states(array, tasks=2)
    assert final[f"{array}_1"] == "COMPLETED"
    assert final[hanging].startswith("CANCELLED")


@pytest.mark.slurm
def test_ctrl_c_cancels_the_array_and_says_so(cluster: None, workdir: Path) -> None:
    args = ["-m", "env=fault", "env.kwargs.fault=hang", "seed=0,1", *TINY]
    proc = start_cli([*args, "launcher=slurm", "name=i"], workdir)
    sweep = workdir / "multirun/i"
    try:
        wait_for(lambda: array_ids(sweep), 60, "the array's submission")
        (array,) = array_ids(sweep)
        wait_for(lambda: sacct_states(array).get(f"{array}_0") == "RUNNING", 60, "the job to run")
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert f"cancelled SLURM job array {array} (scancel {array})" in stderr, stderr[-3000:]
    wait_for(
        lambda: (
            not subprocess.run(
                ["squeue", "-h", "-j", array], capture_output=True, text=True, check=False
            ).stdout.strip()
        ),
        30,
        "the array to leave the queue",
    )
    assert sacct_states(array, tasks=1)[f"{array}_0"].startswith("CANCELLED")


@pytest.mark.slurm
def test_a_sweep_killed_mid_array_is_adopted_by_the_same_command_and_runs_each_job_once(
    cluster: None, workdir: Path
) -> None:
    """kill -9 of the sweep's process while its array runs (SLURM runs it on), then the same
    command: it follows the array's live tasks instead of submitting a second array, and
    every job runs exactly once (one attempt each), its result that of an uninterrupted run."""
    grid = ["-m", "seed=range(3)", *SLEEPING_ENV, *TINY]
    args = [*grid, "launcher=slurm", "hydra.launcher.slurm.array_parallelism=1", "name=k"]
    sweep = workdir / "multirun/k"
    proc = start_cli(args, workdir)
    try:
        wait_for(lambda: array_ids(sweep), 60, "the array's submission")
        (array,) = array_ids(sweep)
        wait_for(lambda: sacct_states(array).get(f"{array}_0") == "RUNNING", 60, "a job to run")
        proc.kill()  # SIGKILL: no handler runs, nothing is cancelled
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    live = subprocess.run(
        ["squeue", "-h", "-r", "-o", "%i", "-j", array], capture_output=True, text=True
    ).stdout.split()
    assert f"{array}_0" in live and len(live) >= 2, live  # one running, the rest queued
    again = run_cli(args, workdir)
    assert again.returncode == 0, again.stderr[-3000:]
    said = again.stdout + again.stderr
    assert "following them instead of submitting them again" in said, said
    assert array_ids(sweep) == [array]  # no second array
    assert sacct_states(array, tasks=3) == {f"{array}_{i}": "COMPLETED" for i in range(3)}
    attempts = {
        d.name: [json.loads(line)["outcome"] for line in (d / "attempts.jsonl").open()]
        for d in sorted(sweep.iterdir())
        if d.is_dir() and not d.name.startswith(".")
    }
    assert attempts == {name: ["completed"] for name in attempts} and len(attempts) == 3
    reference = run_cli([*grid, "launcher=serial", "name=ref"], workdir)
    assert reference.returncode == 0, reference.stderr[-3000:]
    assert fingerprint(sweep) == fingerprint(workdir / "multirun/ref")


@pytest.mark.slurm
def test_a_recorded_task_is_adopted_only_under_its_own_job_name(
    cluster: None, tmp_path: Path
) -> None:
    """A job id a purged cluster gives out again names another job: never adopted. A line a
    killed writer cut short is skipped, the whole ones still read."""
    from rlsweep.executors.slurm_tasks import Task, live_tasks, record_tasks, recorded_tasks

    out = subprocess.run(
        ["sbatch", "--parsable", "-J", "someone-else", "-o", "/dev/null", "--wrap", "sleep 60"],
        capture_output=True,
        text=True,
        check=True,
    )
    job_id = out.stdout.strip().split(";")[0]
    try:
        mine = Task(job_id, "seed=0", "/f/%j", "app-k")
        theirs = Task(job_id, "seed=1", "/f/%j", "someone-else")
        record_tasks(tmp_path, [mine])
        with (tmp_path / ".rlsweep.slurm.jsonl").open("a") as f:
            f.write('{"task_id": "1_0", "job": "se')  # cut short
        record_tasks(tmp_path, [theirs])
        assert recorded_tasks(tmp_path) == [mine, theirs]
        assert live_tasks(recorded_tasks(tmp_path)) == {"seed=1": theirs}
    finally:
        subprocess.run(["scancel", job_id], check=False)
    wait_for(lambda: not live_tasks([theirs]), 30, "the cancelled job to leave the queue")


@pytest.mark.slurm
def test_invalid_partition_surfaces_slurms_reason(cluster: None, workdir: Path) -> None:
    proc = run_cli(
        ["-m", "seed=0,1", *TINY, "launcher=slurm", "hydra.launcher.slurm.partition=nope"],
        workdir,
    )
    assert proc.returncode != 0
    assert "SLURM refused the job array" in proc.stderr, proc.stderr[-2000:]
    assert "invalid partition" in proc.stderr.lower()
    assert "Nothing was submitted" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slurm
def test_timed_out_and_preempted_jobs_checkpoint_requeue_and_resume_bitwise(
    cluster: None, workdir: Path
) -> None:
    """Two jobs with a 2-minute SLURM time limit, signalled mid-training as submitit's own
    ``_interrupt`` does it: job 0 is preempted (SIGTERM then USR2), job 1 times out (USR2
    alone; with a limit this short submitit counts every USR2 as a time-out and spends one
    of ``max_num_requeue``). Each checkpoints at its next iteration boundary, requeues
    itself, resumes, and ends bitwise equal to the same job run serially (the serial
    reference runs meanwhile). SLURM's own timer sends the same USR2: measured with this
    cluster, 16 to 31 s into a 1-minute job, which is too unpredictable to wait for here;
    with 2 minutes it comes 90 s in (signal_delay_s is 30 s), after these jobs end. (With 1
    minute, a resumed job slowed by a busy machine got SLURM's own USR2 and resumed twice.)

    Job 1's ``scontrol requeue`` returns only after SLURM has signalled the job's processes
    for the requeue, as it did on a busy machine: SLURM's SIGTERM kills it, and the job,
    queued to resume, must not be reported failed."""
    # Jobs of about 8 s that mostly sleep, so that they are signalled mid-training without
    # taking the CPU from the rest of the suite.
    grid = ["-m", "seed=0,1", *SLEEPING_ENV, "train.total_steps=4096", "eval.every_steps=512"]
    grid += ["eval.episodes=2", "train.checkpoint_every_s=null"]
    on_slurm = [*grid, "launcher=slurm", "hydra.launcher.slurm.timeout_min=2", "name=p"]
    slow = workdir / "slow-scontrol"
    slow.mkdir()
    (slow / "scontrol").write_text(
        "#!/bin/bash\n"
        f'{shutil.which("scontrol")} "$@"; rc=$?\n'
        # exec: scontrol's own process waits, so that the requeue's SIGTERM ends it (a
        # child sleep of this script's shell could die alone, the shell then exiting 0).
        'if [ "$1" = requeue ] && [ "${SLURM_ARRAY_TASK_ID:-}" = 1 ] && [ $rc = 0 ]; then\n'
        "  exec sleep 300\n"
        "fi\n"
        "exit $rc\n"
    )
    (slow / "scontrol").chmod(0o755)
    proc = start_cli(on_slurm, workdir, env={"PATH": f"{slow}{os.pathsep}{os.environ['PATH']}"})
    serial = start_cli([*grid, "launcher=serial", "name=s"], workdir)
    sweep = workdir / "multirun/p"

    def evaluations(seed: int) -> int:
        files = list(sweep.glob(f"seed={seed}/metrics.csv"))
        return len(files[0].read_text().splitlines()) - 1 if files else 0

    try:
        wait_for(lambda: array_ids(sweep), 60, "the array's submission")
        (array,) = array_ids(sweep)
        signals = {0: ("SIGTERM", "USR2"), 1: ("USR2",)}  # preemption, time-out
        for seed, sigs in signals.items():
            wait_for(lambda s=seed: evaluations(s) >= 2, 120, f"job {seed} to train a while")
            for sig in sigs:
                subprocess.run(["scancel", "--signal", sig, f"{array}_{seed}"], check=True)
        _, stderr = proc.communicate(timeout=300)
        _, serial_stderr = serial.communicate(timeout=120)
    finally:
        for p in (proc, serial):
            if p.poll() is None:
                p.kill()
    assert proc.returncode == 0, stderr[-3000:]
    assert serial.returncode == 0, serial_stderr[-3000:]
    assert fingerprint(sweep) == fingerprint(workdir / "multirun/s")
    for seed in signals:
        (job_dir,) = sweep.glob(f"seed={seed}")
        result = json.loads((job_dir / "result.json").read_text())
        (step,) = result["resumed_at_steps"]
        assert 0 < step < 4096
        log = (job_dir / "rlsweep.log").read_text()
        assert f"checkpointed at step {step:,d} and stopped (SIGUSR2" in log
        assert f"resumed from checkpoint.pt at step {step:,d}" in log
        assert not (job_dir / "checkpoint.pt").exists() and not (job_dir / "error.txt").exists()
        (submitit_log,) = sweep.glob(f".submitit/*/{array}_{seed}/*_log.out")
        text = submitit_log.read_text()
        assert "this job is timed-out." in text  # submitit spent one of max_num_requeue
        if seed == 0:
            assert f"Requeued job {array}_{seed} (2 remaining timeouts)" in text
        else:  # its scontrol killed by the requeue's SIGTERM
            (submitit_err,) = sweep.glob(f".submitit/*/{array}_{seed}/*_log.err")
            err = submitit_err.read_text()
            assert "scontrol requeue" in err
            assert "was killed by SIGTERM (SLURM ending this job for its requeue)" in err
    assert sacct_states(array, tasks=2) == {f"{array}_{i}": "COMPLETED" for i in range(2)}


@pytest.mark.slurm
def test_an_app_using_the_checkpoint_api_resumes_bitwise_after_preemption(
    cluster: None, workdir: Path
) -> None:
    """Any Hydra app with the checkpoint pattern (tests/apps/loop): its SLURM job is
    signalled as for a preemption, checkpoints, requeues itself, resumes, and ends with the
    numbers of the same job run serially."""
    app = str(Path(__file__).parent / "apps" / "loop" / "app.py")
    grid = [app, "-m", "seed=range(1)", "steps=80", "sleep_s=0.1"]
    on_slurm = [*grid, "rlsweep=slurm", "hydra.sweep.dir=multirun/p"]
    on_slurm += ["hydra.launcher.slurm.timeout_min=30"]
    proc = start_python(on_slurm, workdir)
    # The serial reference runs meanwhile, in a process of its own.
    serial = start_python([*grid, "rlsweep=serial", "hydra.sweep.dir=multirun/s"], workdir)
    sweep = workdir / "multirun/p"
    metrics = sweep / "seed=0" / "metrics.csv"  # named by the key the sweep varies
    try:
        wait_for(lambda: array_ids(sweep), 60, "the job's submission")
        (array,) = array_ids(sweep)
        wait_for(lambda: metrics.is_file() and len(metrics.read_text().split()) > 10, 60, "steps")
        subprocess.run(["scancel", "--signal", "USR2", array], check=True)
        _, stderr = proc.communicate(timeout=180)
        _, serial_stderr = serial.communicate(timeout=120)
    finally:
        for p in (proc, serial):
            if p.poll() is None:
                p.kill()
    assert proc.returncode == 0, stderr[-3000:]
    assert serial.returncode == 0, serial_stderr[-3000:]
    job_dir = sweep / "seed=0"
    on_cluster = json.loads((job_dir / "result.json").read_text())
    reference = json.loads((workdir / "multirun/s/seed=0/result.json").read_text())
    assert on_cluster["resumed"] == 1 and reference["resumed"] == 0
    assert on_cluster["total"] == reference["total"]
    assert metrics.read_text() == (workdir / "multirun/s/seed=0/metrics.csv").read_text()
    log = (job_dir / "app.log").read_text()
    assert "checkpointed at step" in log and "resumed from checkpoint.pt at step" in log


@pytest.mark.slurm
def test_a_sweep_over_max_array_size_is_submitted_as_several_arrays(
    cluster: None, workdir: Path
) -> None:
    """The test cluster's MaxArraySize is 5 (scripts/start-local-slurm.sh): 7 jobs go as
    arrays of 5 and 2, and every job completes."""
    assert _submitit.max_array_size() == 5
    app = str(Path(__file__).parent / "apps" / "plain" / "app.py")
    proc = run_python(
        [app, "-m", "x=range(7)", "rlsweep=slurm", "hydra.sweep.dir=multirun/m"], workdir
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = workdir / "multirun" / "m"
    assert len(list(sweep.glob("x=*/result.json"))) == 7
    arrays = array_ids(sweep)
    assert len(arrays) == 2
    assert f"submitted 7 jobs as SLURM job arrays {', '.join(arrays)}" in proc.stdout + proc.stderr
    assert sacct_states(arrays[0], tasks=5) == {f"{arrays[0]}_{i}": "COMPLETED" for i in range(5)}
    assert sacct_states(arrays[1], tasks=2) == {f"{arrays[1]}_{i}": "COMPLETED" for i in range(2)}
