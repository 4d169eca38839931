"""A job that ends its own process (``os._exit(0)``, ``sys.exit(0)``) instead of returning
fails, once, as what it is: not a worker death ("out of memory?") run again as a suspect,
nor, under the serial executor, the silent end of the sweep. Real sweeps of
tests/apps/exits, on the pool and serially; a forked child's own ``os._exit`` is the real
one; rlsweep's fault injection still kills its worker (tests/test_faults.py)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from conftest import NO_REPORT, run_python

from rlsweep.launch import exits

APP = Path(__file__).parent / "apps" / "exits" / "app.py"
POOL = ("hydra.launcher.executor=joblib", "hydra.launcher.n_jobs=2")
SERIAL = ("hydra.launcher.executor=serial",)


def sweep(tmp_path: Path, *args: str, grid: str = "x=1,2,3") -> tuple[int, str, Path]:
    """Run the app's sweep of ``grid`` (x=2 ends its process); its status, stderr and dir."""
    command = [str(APP), "-m", grid, "exit_x=2", *args, "hydra.sweep.dir=sweep", NO_REPORT]
    proc = run_python(command, tmp_path, timeout=120)
    return proc.returncode, proc.stderr, tmp_path / "sweep"


def attempts(job_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (job_dir / "attempts.jsonl").read_text().splitlines()]


def ran(job_dir: Path) -> int:
    """How many times the job ran (a line of ran.txt each)."""
    return len((job_dir / "ran.txt").read_text().splitlines())


def assert_the_others_completed(
    root: Path, names: tuple[str, ...] = ("x=1", "x=3"), *, once: bool = True, fork: bool = False
) -> None:
    for name in names:
        result = json.loads((root / name / "result.json").read_text())
        assert result["score"] == float(name[2:]), result
        assert attempts(root / name)[-1]["outcome"] == "completed"
        if once:
            assert ran(root / name) == 1 and len(attempts(root / name)) == 1
        assert (root / name / "child.txt").is_file() == fork


@pytest.mark.parametrize("executor", [POOL, SERIAL], ids=["pool", "serial"])
def test_os_exit_0_fails_its_job_once_as_what_it_is(
    tmp_path: Path, executor: tuple[str, ...]
) -> None:
    """The other jobs are still running when x=2 exits (on the pool they sleep 1 s): a
    worker death would have run them all again as suspects. Each job first runs a fork
    child, which ends through the real os._exit: the other jobs complete."""
    sleep = "sleep_s=1" if executor == POOL else "sleep_s=0"
    code, stderr, root = sweep(tmp_path, *executor, sleep, "fork=true")
    assert code == 1, stderr[-3000:]
    assert "1 of 3 jobs failed" in stderr
    assert_the_others_completed(root, fork=True)
    culprit = root / "x=2"
    assert ran(culprit) == 1 and not (culprit / "result.json").exists()
    ((attempt,),) = [attempts(culprit)]
    assert attempt["outcome"] == "failed"
    assert "the job called os._exit(0) before its task function returned" in str(attempt["error"])
    error = (culprit / "error.txt").read_text()
    assert "os._exit(0)" in error and "app.py" in error  # the app's line, in its traceback
    for text in (stderr, error, str(attempt)):
        assert "out of memory" not in text and "worker process died" not in text


@pytest.mark.parametrize("executor", [POOL, SERIAL], ids=["pool", "serial"])
def test_sys_exit_0_fails_its_job_and_the_sweep_says_so(
    tmp_path: Path, executor: tuple[str, ...]
) -> None:
    """Before, SystemExit left run_job and ended the sweep itself, status 0, jobs unrun."""
    code, stderr, root = sweep(tmp_path, *executor, "how=sys_exit")
    assert code == 1, stderr[-3000:]
    assert_the_others_completed(root)
    (attempt,) = attempts(root / "x=2")
    assert attempt["outcome"] == "failed"
    assert "the job called sys.exit(0) before its task function returned" in str(attempt["error"])
    assert "sys.exit(0)" in (root / "x=2" / "error.txt").read_text()


def test_retries_apply_to_an_exit_as_to_any_failure(tmp_path: Path) -> None:
    retry = ("exit_code=7", "hydra.launcher.retries=1")
    code, stderr, root = sweep(tmp_path, *POOL, *retry, grid="x=1,2")
    assert code == 1, stderr[-3000:]
    assert_the_others_completed(root, ("x=1",))
    assert ran(root / "x=2") == 2
    outcomes = attempts(root / "x=2")
    assert [a["outcome"] for a in outcomes] == ["failed", "failed"]
    assert all("os._exit(7)" in str(a["error"]) for a in outcomes)


def test_os_exit_from_another_thread_still_ends_the_worker_said_as_an_exit(
    tmp_path: Path,
) -> None:
    """A thread of the job has the real os._exit: its worker dies (the job crashed; the
    others complete), and the crash names the process's own exit, not only the OS."""
    code, stderr, root = sweep(tmp_path, *POOL, "how=thread", "exit_code=5", grid="x=1,2")
    assert code == 1, stderr[-3000:]
    assert_the_others_completed(root, ("x=1",), once=False)  # perhaps run again, a suspect
    attempt = attempts(root / "x=2")[-1]
    assert attempt["outcome"] == "crashed"
    assert "os._exit from a thread other than the job's" in str(attempt["error"])


def test_os_exit_outside_the_jobs_thread_is_the_one_before_and_comes_back_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In process: another thread's os._exit is the one the job found (here a recorder in
    place of the real one), the job's own raises, and the job leaves it as it found it."""
    called: list[int] = []
    monkeypatch.setattr(os, "_exit", called.append)
    before = os._exit

    def task(cfg: object) -> float:
        other = threading.Thread(target=os._exit, args=(4,))
        other.start()
        other.join()
        try:
            os._exit(0)
        except Exception:  # an app's catch-all does not stop it
            return 0.0
        return 1.0

    with pytest.raises(exits.TaskExited, match=r"called os\._exit\(0\) before its task"):
        exits.exits_fail_the_job(task)(None)
    assert called == [4] and os._exit is before and not exits._running
