"""A sweep's fixed overhead (issue 19, goal 4), checked through ``RLSWEEP_TRACE``: imports
and Hydra's state paid once per worker, not once per job; the report's modules imported
while the jobs run; and none of them in a sweep whose task writes no report."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from conftest import NO_REPORT, TINY, run_cli, run_python

PLAIN_APP = Path(__file__).parent / "apps" / "plain" / "app.py"


def trace_events(path: Path) -> list[tuple[float, int, str]]:
    return [
        (float(t), int(pid), e)
        for t, pid, e in (ln.split() for ln in path.read_text().splitlines())
    ]


def test_four_jobs_on_two_workers_install_hydra_and_import_twice(tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    done = run_python(
        [str(PLAIN_APP), "-m", "x=1,2", "seed=range(2)", "hydra.launcher.n_jobs=2"],
        tmp_path,
        env={"RLSWEEP_TRACE": str(trace)},
    )
    assert done.returncode == 0, done.stderr
    events = trace_events(trace)
    pids = {
        e: [pid for _, pid, name in events if name == e]
        for e in ("task-start", "install", "worker-init")
    }
    assert len(pids["task-start"]) == 4
    # Two worker processes ran the four jobs: each imported the app's modules and installed
    # the launch's Hydra state once.
    assert len(set(pids["task-start"])) == 2
    assert sorted(pids["install"]) == sorted(set(pids["task-start"]))
    assert sorted(pids["worker-init"]) == sorted(set(pids["task-start"]))
    # The parent imported the report's modules while the jobs ran: the summary only draws.
    when = {name: t for t, _, name in events if name in ("preload-end", "summary-start")}
    assert when["preload-end"] <= when["summary-start"]


NO_REPORT_APP = """
import atexit, json, os, sys

import hydra
import rlsweep


def heavy_modules() -> None:
    loaded = [m for m in ("matplotlib", "pandas", "pyarrow") if m in sys.modules]
    with open(os.environ["MODULES_FILE"], "w") as f:
        json.dump(loaded, f)


atexit.register(heavy_modules)


def no_report(sweep_dir) -> None:
    print("no report for", sweep_dir.name)


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
@rlsweep.task{DECLARATIONS}
def main(cfg) -> float:
    return float(cfg.x)


if __name__ == "__main__":
    main()
"""


def write_app(directory: Path, declarations: str) -> Path:
    """An app on rlsweep's joblib launcher whose parent records which report modules it
    imported; ``declarations``: what its ``@rlsweep.task`` gets, e.g. ``(on_sweep_end=...)``."""
    (directory / "conf").mkdir()
    (directory / "conf" / "config.yaml").write_text(
        textwrap.dedent(
            """\
            defaults:
              - rlsweep: joblib
              - _self_
            x: 1
            hydra:
              job:
                chdir: false
            """
        )
    )
    app = directory / "app.py"
    app.write_text(NO_REPORT_APP.replace("{DECLARATIONS}", declarations))
    return app


def test_a_sweep_whose_task_writes_no_report_never_imports_matplotlib(tmp_path: Path) -> None:
    write_app(tmp_path, "(on_sweep_end=no_report)")
    modules = tmp_path / "modules.json"
    done = run_python(
        [str(tmp_path / "app.py"), "-m", "x=1,2,3", "hydra.launcher.n_jobs=2"],
        tmp_path,
        env={"MODULES_FILE": str(modules)},
    )
    assert done.returncode == 0, done.stderr
    assert "no report for" in done.stdout
    assert json.loads(modules.read_text()) == []
    assert not list(tmp_path.glob("multirun/*/report*"))


def test_a_sweep_that_asks_for_no_report_writes_none_and_never_imports_matplotlib(
    tmp_path: Path,
) -> None:
    app = write_app(tmp_path, "")  # rlsweep's own summary and report by default
    modules = tmp_path / "modules.json"
    command = [str(app), "-m", "x=1,2,3", "hydra.launcher.n_jobs=2"]
    env = {"MODULES_FILE": str(modules)}
    done = run_python([*command, "hydra.sweeper.report=false"], tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    [sweep_dir] = tmp_path.glob("multirun/*")
    assert len(list(sweep_dir.glob("*/result.json"))) == 3
    assert json.loads(modules.read_text()) == []
    assert not list(sweep_dir.glob("report*")) and not (sweep_dir / "summary.csv").exists()
    assert "no summary or report (report=false): python -m rlsweep.report" in done.stderr

    # The switch is not part of any job: the same sweep with its report skips all three
    # jobs and writes the summary and report over them.
    again = run_python(command, tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    assert "3 of 3 jobs already complete (skipped), 0 to run" in again.stderr
    assert "matplotlib" in json.loads(modules.read_text())
    assert (sweep_dir / "report.md").exists() and (sweep_dir / "summary.csv").exists()


def test_the_built_in_app_takes_report_false_at_the_top_level(tmp_path: Path) -> None:
    command = ["-m", "seed=0,1", *TINY, "n_jobs=2"]
    done = run_cli([*command, "report=false"], tmp_path)
    assert done.returncode == 0, done.stderr
    sweep_dir = tmp_path / "multirun" / "default"
    assert len(list(sweep_dir.glob("*/result.json"))) == 2
    # Not in the jobs' directory names, nor in what they compute: the next run skips both.
    assert not list(sweep_dir.glob("*report*"))
    again = run_cli(command, tmp_path)
    assert again.returncode == 0, again.stderr
    assert "2 of 2 jobs already complete (skipped), 0 to run" in again.stderr
    assert (sweep_dir / "report.md").exists()
    wrong = run_cli([*command, "report=maybe"], tmp_path)
    assert wrong.returncode == 1
    assert "report (hydra.sweeper.report)='maybe' is not allowed" in wrong.stderr, wrong.stderr
    assert "Traceback" not in wrong.stderr
    single = run_cli([*TINY, "report=maybe"], tmp_path)  # a single run checks it too
    assert single.returncode == 1
    assert "report must be true or false, got 'maybe'" in single.stderr, single.stderr


def test_a_large_batch_starts_its_workers_while_the_parent_checks_its_jobs(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "trace.txt"
    command = [str(PLAIN_APP), "-m", "seed=range(256)", "hydra.launcher.n_jobs=2"]
    command.append(NO_REPORT)  # the launch is the point, not the report
    done = run_python(command, tmp_path, env={"RLSWEEP_TRACE": str(trace)})
    assert done.returncode == 0, done.stderr
    events = trace_events(trace)
    names = [name for _, _, name in events]
    assert names.count("task-start") == 256
    # The pool was started right after the first job was checked, before the other 255
    # were; then each of its two workers installed the launch's Hydra state once (the
    # launch found them warm, with the same state: no second install).
    assert names.index("workers-starting") < names.index("jobs-checked")
    workers = {pid for _, pid, name in events if name == "worker-init"}
    assert len(workers) == 2
    assert sorted(pid for _, pid, name in events if name == "install") == sorted(workers)
    assert {pid for _, pid, name in events if name == "task-start"} == workers

    # A resume whose first job is complete starts no worker ahead: it may run none.
    trace.unlink()
    again = run_python(command, tmp_path, env={"RLSWEEP_TRACE": str(trace)})
    assert again.returncode == 0, again.stderr
    assert "256 of 256 jobs already complete (skipped), 0 to run" in again.stderr
    names = [name for _, _, name in trace_events(trace)]
    assert "workers-starting" not in names and "worker-init" not in names


def test_a_large_batch_refused_after_its_workers_started_stops_them(tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    # Job 0 (total_steps=1000) is valid and starts the workers; job 1 is refused.
    done = run_python(
        ["-m", "rlsweep", "-m", "seed=range(128)", "train.total_steps=1000,-1", "n_jobs=2"],
        tmp_path,
        env={"RLSWEEP_TRACE": str(trace)},
    )
    assert done.returncode == 1
    assert "train.total_steps must be >= 1, got -1" in done.stderr
    events = trace_events(trace)
    assert [name for _, _, name in events if name == "workers-starting"] == ["workers-starting"]
    assert "jobs-checked" not in [name for _, _, name in events]
    assert not list(tmp_path.glob("multirun/*/*/result.json"))
    # No worker outlives the refused command.
    alive = [pid for _, pid, _ in events if Path(f"/proc/{pid}").exists()]
    assert alive == []
