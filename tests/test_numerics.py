"""numerics=portable: a job gives the same bits under every kernel a machine's libraries could
pick; numerics=native: it does not, and each result says which kernels computed it.

A "machine" here is this one with OpenBLAS's kernel forced in the sweep's environment
(``OPENBLAS_CORETYPE``: SkylakeX is the AVX-512 kernel OpenBLAS picks on AVX-512 CPUs,
Haswell and Zen the AVX2 ones it picks on the others) and numpy's AVX-512 loops on or off
(``NPY_DISABLE_CPU_FEATURES``), as another CPU's libraries would choose them. The app
(tests/apps/numerics) multiplies float32 matrices (OpenBLAS) and takes float64 exp and log
(numpy's SIMD loops) in a checkpointed loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, run_python

from rlsweep.errors import ConfigError
from rlsweep.identity import Identity
from rlsweep.launch.options import LauncherOptions
from rlsweep.numerics import PORTABLE_ENV, cpu, shell_lines

APP = Path(__file__).parent / "apps" / "numerics" / "app.py"
AVX512_LOOPS = "X86_V4 AVX512_ICL AVX512_SPR"
# Each machine's environment; NPY_ENABLE_CPU_FEATURES cleared (numpy refuses it beside
# NPY_DISABLE_CPU_FEATURES), the other pinning variables too.
MACHINES = {
    "skylakex": {"OPENBLAS_CORETYPE": "SkylakeX", "NPY_DISABLE_CPU_FEATURES": ""},
    "skylakex-avx2-numpy": {
        "OPENBLAS_CORETYPE": "SkylakeX",
        "NPY_DISABLE_CPU_FEATURES": AVX512_LOOPS,
    },
    "haswell": {"OPENBLAS_CORETYPE": "Haswell", "NPY_DISABLE_CPU_FEATURES": ""},
    "zen": {"OPENBLAS_CORETYPE": "Zen", "NPY_DISABLE_CPU_FEATURES": ""},
}
UNPINNED = {k: "" for k in PORTABLE_ENV if k not in ("OPENBLAS_CORETYPE",)}

needs_avx2 = pytest.mark.skipif(
    cpu()["isa"] not in ("x86-64-v3", "x86-64-v4"),
    reason="numerics=portable runs AVX2 kernels: x86-64 CPUs with AVX2 only",
)
needs_avx512 = pytest.mark.skipif(
    cpu()["isa"] != "x86-64-v4",
    reason="the AVX-512 kernels whose bits differ run only on a CPU with AVX-512",
)


def sweep(
    cwd: Path, machine: str, *args: str, extra: dict[str, str] | None = None, report: bool = False
) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    env = {**UNPINNED, **MACHINES[machine], **(extra or {})}
    command = [str(APP), "-m", f"hydra.sweeper.report={report}", "hydra.sweep.dir=sweep", *args]
    return run_python(command, cwd, env=env)


def records(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    """result.json of every job, by its replicate (``seed=0``: a single job's directory is
    named ``defaults``)."""
    out = {}
    for path in sweep_dir.glob("*/result.json"):
        result = json.loads(path.read_text())
        out[f"seed={result['rlsweep']['job']['replicate']}"] = result
    return out


def side_by_side(runs: dict[str, tuple[Path, str, list[str]]]) -> dict[str, dict[str, Any]]:
    """Sweeps of the app (name: (cwd, machine, args)), two at a time; each one's results."""
    with ThreadPoolExecutor(2) as pool:
        done = {name: pool.submit(sweep, cwd, m, *args) for name, (cwd, m, args) in runs.items()}
        out = {}
        for name, future in done.items():
            proc = future.result()
            assert proc.returncode == 0, f"{name}: {proc.stderr[-3000:]}"
            out[name] = records(runs[name][0] / "sweep")
    return out


@needs_avx512
def test_portable_gives_the_same_bits_under_every_kernel_and_native_does_not(
    tmp_path: Path,
) -> None:
    """Under every executor: the pool's workers (skylakex), the serial executor, whose jobs
    move to a worker started pinned (skylakex-avx2-numpy), submitit's local executor
    (haswell) and a single job, which runs in a worker forked from the sweep's process when
    that one started pinned (zen with the variables), or in a fresh pinned worker (zen)."""
    executors = {
        "skylakex": ["seed=0,1"],
        "skylakex-avx2-numpy": ["seed=0,1", "rlsweep=serial"],
        "haswell": ["seed=0,1", "rlsweep=submitit_local"],
        "zen": ["seed=0"],
    }
    runs = {f"{m}/native": (tmp_path / m / "native", m, ["seed=0,1"]) for m in MACHINES}
    for m, args in executors.items():
        runs[f"{m}/portable"] = (
            tmp_path / m / "portable",
            m,
            [*args, "hydra.launcher.numerics=portable"],
        )
    results = side_by_side(runs)
    trace = tmp_path / "trace.txt"
    pinned = sweep(
        tmp_path / "pinned",
        "zen",
        "seed=0",
        "hydra.launcher.numerics=portable",
        extra={**PORTABLE_ENV, "RLSWEEP_TRACE": str(trace)},
    )
    assert pinned.returncode == 0, pinned.stderr
    results["zen-pinned/portable"] = records(tmp_path / "pinned" / "sweep")
    events = [line.split()[2] for line in trace.read_text().splitlines()]

    bits = {name: {job: r["bits"] for job, r in jobs.items()} for name, jobs in results.items()}
    native = {m: bits[f"{m}/native"] for m in MACHINES}
    assert native["skylakex"]["seed=0"] != native["haswell"]["seed=0"]  # OpenBLAS's kernels
    assert native["skylakex"]["seed=0"] != native["skylakex-avx2-numpy"]["seed=0"]  # numpy's
    assert native["haswell"] == native["zen"]  # Zen runs OpenBLAS's Haswell kernels
    portable = [jobs for name, jobs in bits.items() if name.endswith("/portable")]
    assert len({jobs["seed=0"] for jobs in portable}) == 1, bits
    assert len({jobs["seed=1"] for jobs in portable if "seed=1" in jobs}) == 1, bits
    assert portable[0]["seed=0"] not in {jobs["seed=0"] for jobs in native.values()}

    fingerprints = {
        name: {job: r["rlsweep"]["numerics"] for job, r in jobs.items()}
        for name, jobs in results.items()
    }
    for name, jobs in fingerprints.items():  # in every result.json
        for fingerprint in jobs.values():
            kernels = fingerprint["kernels"]
            if name.endswith("/portable"):
                assert fingerprint["setting"] == "portable"
                assert kernels["blas"].endswith(" Haswell") and kernels["numpy"].endswith(" X86_V3")
            else:
                assert fingerprint["setting"] == "native"
    assert fingerprints["skylakex/native"]["seed=0"]["kernels"]["blas"].endswith(" SkylakeX")
    assert "X86_V4" in fingerprints["skylakex/native"]["seed=0"]["kernels"]["numpy"]
    digests = {f["digest"] for name, jobs in fingerprints.items() for f in jobs.values()}
    assert len(digests) == 1 + 3  # one for portable; skylakex, its avx2-numpy, haswell=zen
    identity = results["skylakex/portable"]["seed=0"]["rlsweep"]["job"]
    assert identity["numerics"] == "portable"
    assert "numerics" not in results["skylakex/native"]["seed=0"]["rlsweep"]["job"]
    # The pinned sweep's single job ran in a worker forked from it (it installed no Hydra
    # state of its own, as a fresh worker does): the fork inherits the pinned libraries.
    assert "task-start" in events and "install" not in events, events


@needs_avx512
def test_the_built_in_a2c_job_that_moved_with_the_kernel_no_longer_does(tmp_path: Path) -> None:
    """A2C seed 6 (a README job that OpenBLAS's kernel moved) on a short budget."""
    job = ["agent=a2c", "seed=6", "train.total_steps=2000", "eval.every_steps=2000"]
    runs = {
        (m, setting): tmp_path / f"{m}-{setting}"
        for m in ("skylakex", "haswell")
        for setting in ("native", "portable")
    }

    def one(key: tuple[str, str]) -> str:
        machine, setting = key
        runs[key].mkdir()
        env = {**UNPINNED, **MACHINES[machine]}
        proc = run_cli(["-m", *job, f"numerics={setting}", "report=false"], runs[key], env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (result,) = records(runs[key] / "multirun" / "default").values()
        return str(result["state_sha256"])

    with ThreadPoolExecutor(2) as pool:
        state = dict(zip(runs, pool.map(one, runs), strict=True))
    assert state["skylakex", "native"] != state["haswell", "native"]
    assert state["skylakex", "portable"] == state["haswell", "portable"]


def test_resuming_on_another_fingerprint_says_so_in_the_jobs_log(tmp_path: Path) -> None:
    """The job fails once after its step-3 checkpoint, and is run again on another kernel."""
    first = sweep(tmp_path, "zen", "seed=0", "fail_at=3", extra={"OPENBLAS_CORETYPE": "Prescott"})
    assert first.returncode != 0 and "failing once at step 3" in first.stderr
    again = sweep(tmp_path, "zen", "seed=0", "fail_at=3")
    assert again.returncode == 0, again.stderr
    log = (tmp_path / "sweep" / "defaults" / "app.log").read_text()
    assert "resumed under another numerics fingerprint (blas: " in log, log
    assert "then, 'openblas" in log and "Haswell' now" in log, log


@needs_avx512
def test_the_summary_and_report_flag_a_group_whose_jobs_ran_under_different_kernels(
    tmp_path: Path,
) -> None:
    """Two replicates on one machine, a third added later on another: one group, two
    fingerprints."""
    first = sweep(tmp_path, "skylakex", "seed=0,1", report=True)
    assert first.returncode == 0, first.stderr
    warning = "the jobs of 1 group ran under different numerics fingerprints (all: 2)."
    assert warning not in (tmp_path / "sweep" / "summary.md").read_text()
    grown = sweep(tmp_path, "haswell", "seed=0,1,2", report=True)
    assert grown.returncode == 0, grown.stderr
    assert warning in grown.stdout, grown.stdout
    for name in ("summary.md", "report.md"):
        assert warning in (tmp_path / "sweep" / name).read_text(), name
    kernels = [
        r["rlsweep"]["numerics"]["kernels"]["blas"] for r in records(tmp_path / "sweep").values()
    ]
    assert sorted(k.split()[-1] for k in kernels) == ["Haswell", "SkylakeX", "SkylakeX"]


@needs_avx2
def test_a_job_finished_under_the_other_setting_is_refused_on_resume(tmp_path: Path) -> None:
    assert sweep(tmp_path, "zen", "seed=0,1").returncode == 0
    refused = sweep(tmp_path, "zen", "seed=0,1", "hydra.launcher.numerics=portable")
    assert refused.returncode != 0
    assert "numerics: 'native' then, 'portable' now" in refused.stderr, refused.stderr
    rerun = sweep(
        tmp_path, "zen", "seed=0,1", "hydra.launcher.numerics=portable", "hydra.sweeper.rerun=all"
    )
    assert rerun.returncode == 0, rerun.stderr
    assert {r["rlsweep"]["job"]["numerics"] for r in records(tmp_path / "sweep").values()} == {
        "portable"
    }


def test_a_native_jobs_identity_is_what_it_was_before_the_setting() -> None:
    """Results recorded before numerics existed still count for their jobs."""
    native = Identity(config={"lr": 0.1}, replicate=3, shared={"lr": 0.1})
    portable = Identity(config={"lr": 0.1}, replicate=3, shared={"lr": 0.1}, numerics="portable")
    assert "numerics" not in native.to_json() and portable.to_json()["numerics"] == "portable"
    assert native.digest != portable.digest


def test_settings_that_cannot_hold_are_refused_up_front() -> None:
    base: dict[str, Any] = {
        "executor": "joblib",
        "n_jobs": None,
        "backend": "loky",
        "start_method": "spawn",
        "progress": False,
        "idle_worker_timeout": 1.0,
    }
    with pytest.raises(ConfigError, match=r"hydra.launcher.numerics='fast' is not allowed"):
        LauncherOptions.of({**base, "numerics": "fast"}).checked()
    with pytest.raises(ConfigError, match="use backend=loky"):
        LauncherOptions.of({**base, "backend": "multiprocessing", "numerics": "portable"}).checked()


@needs_avx2
def test_a_slurm_jobs_shell_lines_pin_its_kernels(tmp_path: Path) -> None:
    """The lines a SLURM job's script runs before Python, run by a real shell."""
    script = "\n".join(
        [
            *shell_lines("portable"),
            f"exec {sys.executable} -c 'import numpy, threadpoolctl; print(threadpoolctl.threadpool_info())'",
        ]
    )
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": AVX512_LOOPS, "OPENBLAS_CORETYPE": "Zen"}
    proc = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "'architecture': 'Haswell'" in proc.stdout
    assert shell_lines("native") == []
