"""The Ray executor (``rlsweep=ray``) on a real local Ray cluster: a head node and a worker
node of one CPU and two declared GPUs each, started once for the module
(``ray.cluster_utils.Cluster``); the sweeps are the third-party app tests/apps/plain run as a
user runs it, connecting to that cluster by its address. A third node joins from its own
mount namespace for the last two tests: one sweep's directory is hidden from it, then it is
killed under another sweep."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import ray
from conftest import NO_REPORT, TINY, results, run_clis
from ray.cluster_utils import Cluster
from test_any_app import APP, run_app, run_serially
from test_stream import PLAN, check_contract, stream, times

from rlsweep.launch.worker import worker_pid

# No usage report to Ray's servers from the test clusters.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

GRID = ["x=1,2", "seed=0,1"]
# The head's health checks, fast: a killed node is known dead about a second later. Jobs at
# the test's niceness, as on a cluster of its own (Ray adds 15, and the busy processes a
# busy run puts beside the suite would leave them almost no CPU).
CLUSTER_CONFIG = {
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 3,
    "worker_niceness": 0,
}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Future[dict[str, Any]]]:
    """The grid run serially, in the background while the cluster starts."""
    work = tmp_path_factory.mktemp("serial")

    def run() -> dict[str, Any]:
        proc = run_serially(GRID, work)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return results(work / "multirun" / "app")

    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(run)


Runs = dict[str, subprocess.CompletedProcess[str]]
# A local cluster for one sweep, without the dashboard's processes (CPU the tests need).
LOCAL = ["hydra.launcher.ray.address=local", "+hydra.launcher.ray.init.include_dashboard=false"]


@pytest.fixture(scope="module")
def built_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Future[Runs]]]:
    """The built-in app's A2C on two seeds with launcher=ray on a local cluster, and
    serially, in the background from the module's start (while its cluster starts); under
    numerics=portable, whose variables Ray's worker processes must start with."""
    work = tmp_path_factory.mktemp("built_in")
    grid = ["-m", "agent=a2c", "seed=0,1", *TINY, "hydra.launcher.numerics=portable"]
    for name in ("ray", "serial"):
        (work / name).mkdir()
    runs: dict[str, tuple[list[str], Path, None]] = {
        "ray": ([*grid, "launcher=ray", *LOCAL], work / "ray", None),
        "serial": ([*grid, "launcher=serial"], work / "serial", None),
    }
    with ThreadPoolExecutor(1) as pool:
        yield work, pool.submit(run_clis, runs)


@pytest.fixture(scope="module")
def cluster(
    reference: Future[dict[str, Any]], built_in: tuple[Path, Future[Runs]]
) -> Iterator[Cluster]:
    """Head and worker node, one CPU and two declared GPUs each; this process connected
    (to list the nodes)."""
    node: dict[str, Any] = {"num_cpus": 1, "num_gpus": 2, "include_dashboard": False}
    local = Cluster(initialize_head=True, head_node_args={**node, "_system_config": CLUSTER_CONFIG})
    try:
        local.add_node(**node)
        local.wait_for_nodes()
        ray.init(address=local.address)
        yield local
    finally:
        ray.shutdown()
        local.shutdown()


def on_ray(cluster: Cluster, env: dict[str, str], *args: str) -> list[str]:
    """The overrides of tests/apps/plain's sweep ``args`` on ``cluster``."""
    # The jobs' results are the point here, not the report.
    return [*args, "rlsweep=ray", NO_REPORT, *cluster_args(cluster, env)]


def cluster_args(cluster: Cluster, env: dict[str, str]) -> list[str]:
    """The launcher's overrides for ``cluster``, ``env`` set in every job's process."""
    return [
        f"hydra.launcher.ray.address={cluster.address}",
        *(f"+hydra.launcher.ray.init.runtime_env.env_vars.{k}={v}" for k, v in env.items()),
    ]


def executions(records: Path) -> list[dict[str, Any]]:
    """What every execution of a job saw (tests/apps/plain's PLAIN_APP_RECORD), in order."""
    found = [json.loads(p.read_text()) for p in records.glob("*.json")]
    return sorted(found, key=lambda r: r["start"])


def attempts(job_dir: Path) -> list[tuple[int, str]]:
    lines = (job_dir / "attempts.jsonl").read_text().splitlines()
    return [(a["attempt"], a["outcome"]) for a in map(json.loads, lines)]


def alive() -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n["Alive"]]


def wait_for(condition: Any, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def grid(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The grid on the cluster at half a GPU a job: its sweep directory and records."""
    work, records = tmp_path_factory.mktemp("grid"), tmp_path_factory.mktemp("records")
    env = {"PLAIN_APP_RECORD": str(records), "PLAIN_APP_SLEEP_S": "0.3"}
    proc = run_app(on_ray(cluster, env, *GRID, "hydra.launcher.gpus_per_job=0.5"), work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = "2 node(s) for these jobs, room for 2 at once (1 CPU, 0.5 GPU each)"
    assert said in proc.stdout + proc.stderr
    return work / "multirun" / "app", records


def test_a_grid_on_two_nodes_gives_serials_results_bit_for_bit(
    grid: tuple[Path, Path], reference: Future[dict[str, Any]]
) -> None:
    sweep, records = grid
    found = {name: without_gpus(result) for name, result in results(sweep).items()}
    assert found == reference.result()  # every value, hash and identity
    assert len(reference.result()) == 4
    ran = executions(records)
    assert Counter(r["job"] for r in ran) == {name: 1 for name in reference.result()}
    assert {d.name: attempts(d) for d in sweep.glob("*=*")} == {
        name: [(1, "completed")] for name in reference.result()
    }
    assert len({r["RAY_RAYLET_PID"] for r in ran}) == 2  # both nodes ran jobs


def test_a_fractional_gpu_share_gives_each_job_its_own_device(grid: tuple[Path, Path]) -> None:
    """Each node declares GPUs 0 and 1: a job at gpus_per_job=0.5 sees one of them, never
    both (Ray's scheduler packs two such jobs onto one GPU), and its result.json says which."""
    sweep, records = grid
    seen = {r["job"]: r["CUDA_VISIBLE_DEVICES"] for r in executions(records)}
    assert len(seen) == 4 and set(seen.values()) <= {"0", "1"}, seen
    recorded = {name: result["rlsweep"]["gpus"] for name, result in results(sweep).items()}
    assert recorded == {name: {"devices": [cuda], "per_job": 0.5} for name, cuda in seen.items()}


def without_gpus(result: dict[str, Any]) -> dict[str, Any]:
    """A result.json without the GPUs its job was given (where it ran, not what it is)."""
    record = {k: v for k, v in result["rlsweep"].items() if k != "gpus"}
    return {**result, "rlsweep": record}


def test_released_jobs_start_on_the_freed_node_while_the_first_batch_runs(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A streaming launch (a search's) on Ray: the long first job holds one node while the
    chain a -> b, c -> d, e runs on the other; c fails on both its attempts."""
    (tmp_path / "events.jsonl").touch()
    env = {"STREAM_LOG": str(tmp_path / "events.jsonl")}
    args = ["hydra.launcher.executor=ray", "hydra.launcher.retries=1", *cluster_args(cluster, env)]
    record, events, _ = stream(PLAN, tmp_path, *args)
    check_contract(PLAN, record)
    starts, ends = times(events, "start"), times(events, "end")
    assert Counter({name: len(t) for name, t in starts.items()}) == {
        "long": 1,
        "a": 1,
        "b": 1,
        "c": 2,
        "d": 1,
        "e": 1,
    }
    (long_end,) = ends["long"]
    assert starts["b"][0] < long_end and starts["d"][0] < long_end  # no barrier


def test_the_built_in_app_on_a_local_cluster_gives_serials_numbers(
    built_in: tuple[Path, Future[Runs]],
) -> None:
    """launcher=ray with address=local: a cluster of this machine, started for the sweep
    (beside the module's) and stopped with it; A2C's numbers are serial's, bit for bit."""
    work, future = built_in
    runs = future.result()
    for proc in runs.values():
        assert proc.returncode == 0, proc.stderr[-3000:]
    said = runs["ray"].stdout + runs["ray"].stderr
    assert "Started a local Ray instance" in said
    ray_run, serial = (numbers(work / name / "multirun" / "default") for name in runs)
    assert ray_run == serial and len(serial) == 2
    assert {r["rlsweep"]["numerics"]["setting"] for r in ray_run.values()} == {"portable"}


def test_a_local_cluster_runs_the_jobs_at_the_sweeps_niceness(tmp_path: Path) -> None:
    """Ray's raylet would start the jobs' workers 15 nice levels below itself, where
    processes beside them (a busy run of this suite, a user's other work) leave them
    almost no CPU: a local cluster rlsweep starts runs them as joblib's workers run."""
    records = tmp_path / "records"
    records.mkdir()
    proc = run_app(
        ["x=1", "rlsweep=ray", NO_REPORT, *LOCAL], tmp_path, env={"PLAIN_APP_RECORD": str(records)}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (seen,) = executions(records)
    assert seen["RAY_RAYLET_PID"] and seen["nice"] == os.nice(0)


def numbers(sweep: Path) -> dict[str, dict[str, Any]]:
    """Each job's result.json without its timings (which differ run to run)."""
    timings = ("wall_time_s", "phase_seconds")
    return {
        name: {k: v for k, v in result.items() if k not in timings}
        for name, result in results(sweep).items()
    }


def test_ctrl_c_cancels_every_task_and_the_rerun_completes_with_identical_results(
    cluster: Cluster, tmp_path: Path, reference: Future[dict[str, Any]]
) -> None:
    records = tmp_path / "records"
    records.mkdir()
    args = ["-m", *on_ray(cluster, {"PLAIN_APP_RECORD": str(records), "PLAIN_APP_SLEEP_S": "1"})]
    proc = subprocess.Popen(
        [sys.executable, str(APP), *args, *GRID],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sweep = tmp_path / "multirun" / "app"
    wait_for(lambda: len(executions(records)) >= 3, "a second round of jobs to start")
    assert _running_ray_jobs(tmp_path)  # the check below sees this sweep's tasks
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "Run the same command again to resume" in err
    assert "Ray task(s) of this sweep" in out + err
    finished = set(results(sweep))
    assert 0 < len(finished) < 4
    wait_for(lambda: not _running_ray_jobs(tmp_path), "the cancelled tasks' processes to end", 30)
    time.sleep(1.0)
    assert set(results(sweep)) == finished  # no cancelled task finished behind the sweep
    rerun = run_app([*args[1:], *GRID], tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert results(sweep) == reference.result()
    ran = Counter(r["job"] for r in executions(records))
    assert all(ran[name] == 1 for name in finished)  # finished jobs did not run again


def test_a_job_past_its_time_limit_is_cancelled_on_its_node_and_the_others_complete(
    cluster: Cluster, tmp_path: Path
) -> None:
    """job_timeout_s on Ray: the job with x=1 sleeps for 10 minutes, the one with x=2 not.
    x=1's task is cancelled after its 60 s (its worker process killed, its node's CPU
    freed), failed as timed out and not retried (retries=1); x=2 completes. (Beside 4 busy
    processes a limit of 5 s timed x=2 out too: Hydra's start of a job took 4 s there; on a
    slower CPU, x=2's attempt took 34 s beside them, near a limit of 30 s.)"""
    env = {"PLAIN_APP_SLEEP_S": "600", "PLAIN_APP_SLEEP_X": "1"}
    limits = ["hydra.launcher.job_timeout_s=60", "hydra.launcher.retries=1"]
    start = time.monotonic()
    proc = run_app(on_ray(cluster, env, "x=1,2", *limits), tmp_path)
    assert time.monotonic() - start < 240
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "1 of 2 jobs failed" in proc.stderr, proc.stderr[-3000:]
    sweep = tmp_path / "multirun" / "app"
    hung, done = sweep / "x=1", sweep / "x=2"
    assert set(results(sweep)) == {done.name}
    assert attempts(hung) == [(1, "timed_out")] and attempts(done) == [(1, "completed")]
    assert (
        "timed out: still running after hydra.launcher.job_timeout_s=60 s"
        in (hung / "error.txt").read_text()
    )
    pid = worker_pid(hung)  # the cancelled task's worker, killed
    assert pid is not None
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), "the cancelled task's worker to end", 60)
    total = ray.cluster_resources()["CPU"]
    wait_for(lambda: ray.available_resources().get("CPU") == total, "every CPU free again", 60)


def _running_ray_jobs(cwd: Path) -> list[int]:
    """Processes running a job's Ray task (Ray titles them ray::run_on_node) in ``cwd``
    (the task moves there): this sweep's, not those of another sweep on the machine."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True)
    running = []
    for line in out.stdout.splitlines():
        pid, args = line.strip().split(" ", 1)
        if args.startswith("ray::run_on_node"):
            with contextlib.suppress(OSError):  # ended meanwhile
                if Path(f"/proc/{pid}/cwd").resolve() == cwd.resolve():
                    running.append(int(pid))
    return running


@dataclass
class ThirdNode:
    """A node that joined the cluster from its own mount namespace, where ``hidden`` is an
    empty tmpfs: it sees every other path as this machine does."""

    process: subprocess.Popen[str]
    node_id: str
    hidden: Path

    def kill(self) -> None:
        """SIGKILL to every process of the node at once, its workers included (Ray starts
        them in sessions of their own): a node lost, no goodbye."""
        for pid in _tree(self.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.communicate(timeout=60)


def _tree(root: int) -> list[int]:
    """``root`` and every process descending from it."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True, check=True)
    children: dict[int, list[int]] = {}
    for line in out.stdout.splitlines():
        pid, ppid = map(int, line.split())
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


@pytest.fixture(scope="module")
def third_node(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThirdNode]:
    hidden = tmp_path_factory.mktemp("hidden")
    before = {n["NodeID"] for n in alive()}
    command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--num-cpus=1"]
    process = subprocess.Popen(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            'mount -t tmpfs rlsweep-test "$0" && exec "$@"',
            str(hidden),
            *command,
            f"--address={cluster.address}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    node = None
    try:
        wait_for(lambda: len(alive()) == 3 or process.poll() is not None, "the third node")
        assert process.poll() is None, process.communicate()[1][-2000:]
        (node_id,) = [n["NodeID"] for n in alive() if n["NodeID"] not in before]
        node = ThirdNode(process, node_id, hidden)
        yield node
    finally:
        if process.poll() is None:
            ThirdNode(process, "", hidden).kill()
        wait_for(lambda: len(alive()) == 2, "the third node to be known dead", 30)


def test_a_sweep_directory_the_workers_do_not_share_is_refused_before_any_job_starts(
    third_node: ThirdNode, cluster: Cluster, tmp_path: Path
) -> None:
    sweep = third_node.hidden / "sweep"
    proc = run_app(on_ray(cluster, {}, *GRID, f"hydra.sweep.dir={sweep}"), tmp_path)
    assert proc.returncode != 0
    said = proc.stdout + proc.stderr
    assert f"the sweep directory {sweep} is not on a file system that every node" in said
    assert third_node.node_id[:8] in said and "Nothing was started" in said
    assert "Traceback" not in said
    assert not [p for p in sweep.iterdir() if p.is_dir()]  # no job directory
    assert not list(sweep.glob(".rlsweep-ray-check*"))


def test_a_killed_node_fails_only_its_running_job_which_runs_again_once(
    third_node: ThirdNode, cluster: Cluster, tmp_path: Path, reference: Future[dict[str, Any]]
) -> None:
    """Once the third node runs a job, every process of it is killed at once."""
    known = {str(n.all_processes["raylet"][0].process.pid) for n in cluster.list_all_nodes()}
    records = tmp_path / "records"
    records.mkdir()
    env = {"PLAIN_APP_RECORD": str(records), "PLAIN_APP_SLEEP_S": "1.5"}
    proc = subprocess.Popen(
        [sys.executable, str(APP), "-m", *on_ray(cluster, env, *GRID, "hydra.launcher.retries=1")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    on_node = lambda: [r for r in executions(records) if r["RAY_RAYLET_PID"] not in known]  # noqa: E731
    wait_for(on_node, "a job on the third node")
    third_node.kill()
    (killed,) = on_node()
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    said = out + err
    assert "room for 3 at once" in said
    sweep = tmp_path / "multirun" / "app"
    assert results(sweep) == reference.result()
    ran = Counter(r["job"] for r in executions(records))
    assert ran == {name: 1 + (name == killed["job"]) for name in reference.result()}
    for job in sweep.glob("*=*"):
        expected = [(1, "crashed"), (2, "completed")] if job.name == killed["job"] else None
        assert attempts(job) == (expected or [(1, "completed")])
    first = json.loads((sweep / killed["job"] / "attempts.jsonl").read_text().splitlines()[0])
    assert first["error"].startswith("JobLost: Ray lost the job's process: "), first
    assert f"job #{_index(sweep, killed['job'])} " in said and "crashed on attempt 1" in said


def _index(sweep: Path, job: str) -> int:
    """A job's number in the sweep (``#3``), from its directory's Hydra config."""
    import yaml

    hydra = yaml.safe_load((sweep / job / ".hydra" / "hydra.yaml").read_text())
    return int(hydra["hydra"]["job"]["num"])


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (
            ["hydra.launcher.gpus_per_job=0.5", "hydra.launcher.gpus=[0,1]"],
            "hydra.launcher.gpus does not apply to executor=ray: each node declares its GPUs",
        ),
        (["+hydra.launcher.ray.init.address=x:1"], "ray.init.address is not allowed"),
    ],
)
def test_options_ray_cannot_take_are_refused_before_anything_is_written(
    tmp_path: Path, options: list[str], needle: str
) -> None:
    proc = run_app(["x=1,2", "rlsweep=ray", *options], tmp_path)
    assert proc.returncode != 0 and needle in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "multirun").exists()
