"""The Ray cluster as the Ray executor sees it: connecting (or starting a local one), its
nodes and how many jobs fit them, the check that every node shares the sweep's directory,
and what a job's Ray task runs on its node."""

from __future__ import annotations

import logging
import math
import os
import secrets
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn

from rlsweep.errors import ConfigError, RLSweepError
from rlsweep.executors.ray_options import RayOptions
from rlsweep.gpus import CUDA_ENV, gpu_env
from rlsweep.launch.worker import worker_entry
from rlsweep.store import write_no_follow

log = logging.getLogger(__name__)

# The file the sweep's process writes into the sweep directory for a launch on Ray: every
# job's task reads it before it starts (a node that does not see it cannot run the job).
CHECK_FILE = ".rlsweep-ray-check"
# How long the nodes may take to answer the shared-directory check (a worker process to
# start on each, on a busy node).
CHECK_TIMEOUT_S = 180.0
# Ray's raylet starts its worker processes 15 nice levels below itself (RAY_worker_niceness
# adds to its own): on a machine where anything else takes the CPU, a local cluster's jobs
# then get almost none of it (beside 4 busy processes on 2 cores, 2 tiny A2C jobs made no
# progress in 4 minutes). A local cluster rlsweep starts runs its jobs at the niceness of
# the sweep's own process, as the serial and joblib launchers do, unless
# RAY_worker_niceness is set in its environment.
NICENESS_ENV = "RAY_worker_niceness"


class NotShared(RLSweepError):
    """A node does not see the sweep's directory as the sweep's own process does."""


@dataclass(frozen=True)
class Node:
    """One live node of the cluster and the resources it declares."""

    node_id: str
    address: str
    cpus: float
    gpus: float

    @property
    def name(self) -> str:
        return f"{self.address} ({self.node_id[:8]})"

    def fits(self, threads: int, gpus: float) -> int:
        """How many jobs of ``threads`` CPUs and ``gpus`` GPUs this node runs at once (a
        fractional share packs onto one GPU, as Ray's scheduler does)."""
        by_cpu = int(self.cpus // threads)
        if not gpus:
            return by_cpu
        if gpus < 1:
            by_gpu = math.floor(self.gpus + 1e-9) * math.floor(1 / gpus + 1e-9)
        else:
            by_gpu = math.floor(self.gpus / gpus + 1e-9)
        return min(by_cpu, by_gpu)


def connect(options: RayOptions) -> str:
    """Connect this process to the cluster ``options`` name, or start a local one (once per
    process: later launches reuse the connection). Returns what it did, for the log."""
    import ray

    if ray.is_initialized():
        return "connected to the Ray cluster this process uses"
    address = None if options.address == "auto" else options.address
    with _own_sigterm(), _jobs_at_this_niceness():
        try:
            context = ray.init(address=address, **_init_arguments(options.init))
        except (ConnectionError, ValueError, TypeError) as exc:
            raise ConfigError(_connect_error(options, exc)) from None
    where = getattr(context, "address_info", {}).get("gcs_address") or "?"
    return f"Ray cluster at {where}"


def _init_arguments(init: dict[str, Any]) -> dict[str, Any]:
    """ray.init's arguments, with the jobs' environment variables as strings (a value set
    on the command line may be typed: env_vars.X=1)."""
    runtime_env = init.get("runtime_env")
    if not isinstance(runtime_env, dict) or not isinstance(runtime_env.get("env_vars"), dict):
        return init
    env_vars = {str(k): str(v) for k, v in runtime_env["env_vars"].items()}
    return {**init, "runtime_env": {**runtime_env, "env_vars": env_vars}}


def _connect_error(options: RayOptions, exc: Exception) -> str:
    if isinstance(exc, ConnectionError):
        stale = (
            " (with address=auto: RAY_ADDRESS, or the cluster `ray start` last started on this "
            "machine, which may have stopped: `ray stop` forgets it)"
            if options.address == "auto"
            else ""
        )
        return (
            f"could not connect to the Ray cluster at hydra.launcher.ray.address="
            f"{options.address}{stale}: {exc}. Start its head node (`ray start --head`), "
            "check the address (host:port of the head node), or set address=local to start a "
            "local cluster. A cluster with token authentication (Ray's default since 2.5x) "
            "needs RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN, or ~/.ray/auth_token as "
            "on the head) in this process's environment. Nothing was started."
        )
    return (
        f"Ray refused hydra.launcher.ray.init={dict(options.init)} (address="
        f"{options.address}): {exc}. Nothing was started."
    )


@contextmanager
def _jobs_at_this_niceness() -> Iterator[None]:
    """While ray.init runs: a local cluster it starts inherits this environment, and its
    raylet (at this process's niceness) adds 0 to it for the jobs' worker processes, where
    it adds 15 by default. An existing cluster keeps its own setting (its raylets run)."""
    if NICENESS_ENV in os.environ:
        yield
        return
    os.environ[NICENESS_ENV] = "0"
    try:
        yield
    finally:
        os.environ.pop(NICENESS_ENV, None)


@contextmanager
def _own_sigterm() -> Iterator[None]:
    """Keep this process's SIGTERM handler: ray.init replaces it with one that exits at
    once, where the sweep's own handler stops the running jobs and says how to resume."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def alive_nodes() -> list[Node]:
    """The cluster's live nodes, with the CPUs and GPUs each declares."""
    import ray

    return [
        Node(
            node_id=str(n["NodeID"]),
            address=str(n.get("NodeManagerAddress", "?")),
            cpus=float(n.get("Resources", {}).get("CPU", 0.0)),
            gpus=float(n.get("Resources", {}).get("GPU", 0.0)),
        )
        for n in ray.nodes()
        if n.get("Alive")
    ]


def job_nodes(nodes: list[Node], threads: int, gpus: float) -> list[Node]:
    """The nodes a job of ``threads`` CPUs and ``gpus`` GPUs fits, or a ConfigError."""
    fit = [n for n in nodes if n.fits(threads, gpus) > 0]
    if not fit:
        wanted = f"{threads} CPU{'s' if threads > 1 else ''}" + (
            f" and {gpus:g} GPU" if gpus else ""
        )
        have = ", ".join(f"{n.name}: {n.cpus:g} CPUs, {n.gpus:g} GPUs" for n in nodes)
        raise ConfigError(
            f"no node of the Ray cluster can run a job of {wanted} (the job's thread count; "
            f"hydra.launcher.gpus_per_job): {have or 'no live node'}. Lower the job's threads "
            "or GPU share, or add a node that has them (`ray start --address=... "
            "--num-cpus=N --num-gpus=G`). Nothing was started."
        )
    return fit


def check_shared(sweep_dir: Path, nodes: list[Node], runtime_env: dict[str, Any]) -> str:
    """Check that every node sees the sweep directory as this process does, before any job
    starts: a task on each node reads a file this process wrote there, and writes one this
    process then reads. Returns the launch's token (its tasks check it again before each
    job); a ConfigError names the nodes that do not share it. The check's tasks run in the
    jobs' ``runtime_env``, so the worker process each node starts for it runs jobs next."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    directory = sweep_dir.resolve()
    token = secrets.token_hex(8)
    write_no_follow(directory / CHECK_FILE, token)
    probe = ray.remote(_probe)
    refs = {
        probe.options(
            num_cpus=0,
            runtime_env=runtime_env,
            max_retries=0,
            retry_exceptions=False,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        ).remote(str(directory), token, node.node_id, os.getcwd()): node
        for node in nodes
    }
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=CHECK_TIMEOUT_S)
    seen = [(f"{refs[r].name}: no answer in {CHECK_TIMEOUT_S:g} s", refs[r]) for r in late]
    for ref in ready:
        node = refs[ref]
        try:
            found = _seen_here(directory, token, node, ray.get(ref))
        except ray.exceptions.RayError as exc:
            found = [f"{node.name}: {_first_line(exc)}"]
        seen.extend((text, node) for text in found)
    for ref in late:
        ray.cancel(ref, force=True)
    live = {node.node_id for node in alive_nodes()}  # a node that left meanwhile runs no job
    problems = [text for text, node in seen if node.node_id in live]
    if problems:
        (directory / CHECK_FILE).unlink(missing_ok=True)
        raise ConfigError(_not_shared(directory, problems))
    return token


def _seen_here(directory: Path, token: str, node: Node, answer: str) -> list[str]:
    """What the node's probe found (an error, or where it wrote), checked from this side."""
    if answer.startswith("error: "):
        return [f"{node.name}: {answer.removeprefix('error: ')}"]
    written = directory / f"{CHECK_FILE}.{node.node_id}"
    try:
        seen = written.read_text()
    except OSError:
        seen = None
    finally:
        written.unlink(missing_ok=True)
    if seen != token:
        return [f"{node.name} ({answer}): what it wrote there does not appear on this machine"]
    return []


def _not_shared(directory: Path, problems: list[str]) -> str:
    listed = "; ".join(problems)
    return (
        f"the sweep directory {directory} is not on a file system that every node of the "
        f"Ray cluster shares with this machine ({listed}). Each job writes its directory on "
        "the node that runs it, and this sweep reads them here: put hydra.sweep.dir on a "
        "shared file system mounted at the same path on every node (NFS, ...), or run on "
        "this machine alone (address=local). Nothing was started."
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {(text.splitlines() or [''])[0]}"


def _probe(directory: str, token: str, node_id: str, cwd: str) -> str:
    """Runs on a node: read this launch's check file, write one back; where it ran."""
    where = socket.gethostname()
    try:
        os.chdir(cwd)
        _see_token(Path(directory) / CHECK_FILE, token)
        write_no_follow(Path(directory, f"{CHECK_FILE}.{node_id}"), token)
    except (OSError, NotShared) as exc:
        return f"error: {exc} (on {where})"
    return f"host {where}"


def _see_token(check_file: Path, token: str) -> None:
    try:
        seen = check_file.read_text()
    except OSError as exc:
        raise NotShared(
            f"cannot read {check_file}, which the sweep's process wrote ({exc.strerror})"
        ) from None
    if seen != token:
        raise NotShared(
            f"{check_file} holds another launch's token: this node sees another directory "
            "at that path than the sweep's process"
        )


def run_on_node(
    shared: bytes, job_blob: bytes, cwd: str, check_file: str, token: str, gpus: float
) -> Any:
    """A job's Ray task, on its node: in the sweep's working directory (job directories may
    be relative to it), once the node is seen to share the sweep directory, the job as a
    pool's worker runs it (:func:`rlsweep.launch.worker.worker_entry`). With a GPU share,
    the devices Ray gave the task (its CUDA_VISIBLE_DEVICES) are the job's, for its
    result.json and log."""
    try:
        os.chdir(cwd)
    except OSError as exc:
        raise NotShared(
            f"the sweep's working directory {cwd} does not exist on {socket.gethostname()} "
            f"({exc.strerror})"
        ) from None
    _see_token(Path(check_file), token)
    if gpus:
        devices = [d for d in os.environ.get(CUDA_ENV, "").split(",") if d]
        os.environ.update(gpu_env(devices, gpus))
    ret: JobReturn = worker_entry(shared, job_blob)
    return ret
