"""One run of a job at a time, whatever started it: a job claims its directory while it
runs (an flock that dies with its holder), and a second run of it waits for the first and
then takes its result instead of computing the job again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from conftest import NO_REPORT

APP = Path(__file__).parent / "apps" / "plain" / "app.py"


def test_two_sweeps_into_one_directory_run_each_job_exactly_once(tmp_path: Path) -> None:
    """The second sweep is started after the first one's lock file was deleted (as a user
    tidying a directory might, or a second SLURM array after a killed sweep's first): every
    job still runs once, and both sweeps end with every job completed."""
    log = tmp_path / "executions.log"
    env = {**os.environ, "PLAIN_APP_LOG": str(log), "PLAIN_APP_SLEEP_S": "8"}
    args = [sys.executable, str(APP), "-m", "x=1,2", "seed=range(2)", "hydra.sweep.dir=sweep"]
    args += ["hydra.launcher.n_jobs=2", NO_REPORT]

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    first = start()
    sweep = tmp_path / "sweep"
    deadline = time.monotonic() + 120
    while not (log.exists() and log.read_text().strip()):  # a job of the first sweep runs
        assert time.monotonic() < deadline and first.poll() is None, first.stderr
        time.sleep(0.05)
    (sweep / ".rlsweep.lock").unlink()
    second = start()
    out = [p.communicate(timeout=180) for p in (first, second)]
    assert (first.returncode, second.returncode) == (0, 0), out
    executions = Counter(log.read_text().split())
    assert executions == {f"x={x},seed={s}": 1 for x in (1, 2) for s in (0, 1)}, out
    assert "another run of this job holds it (pid " in out[1][1]  # the second one waited
    assert "completed by the other run" in out[1][1]
    assert len(list(sweep.glob("*/result.json"))) == 4


def test_submitit_jobs_record_their_attempts_numbered_across_runs(tmp_path: Path) -> None:
    """Under submitit (SLURM, and its local executor here) every attempt is in the job's
    attempts.jsonl as under the pool: a second run of the sweep numbers its attempt 2."""
    args = [str(APP), "-m", "rlsweep=submitit_local", "x=1,2", "hydra.sweep.dir=sweep", NO_REPORT]
    for rerun in ("missing", "all"):
        proc = subprocess.run(
            [sys.executable, *args, f"hydra.sweeper.rerun={rerun}"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    for job_dir in sorted((tmp_path / "sweep").glob("x=*")):
        lines = (job_dir / "attempts.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        assert [(r["attempt"], r["outcome"]) for r in records] == [
            (1, "completed"),
            (2, "completed"),
        ]
