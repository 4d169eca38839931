"""A job is its config values *and* its config-group choices.

The app (tests/apps/choices) chooses its code by the name of an option of group ``algo``
whose options ``a`` and ``b`` hold identical values, as multi-algorithm benchmarks do, and
has a ``task`` group of nested options (``nav/small``, ``nav/big``). It imports nothing from
rlsweep and is opted in from the command line.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import NO_REPORT, run_python

from rlsweep.choices import job_choices, under
from rlsweep.identity import Keys, identity_of, without_choices
from rlsweep.seeding import Seeds
from rlsweep.store import atomic_write_json

APP = Path(__file__).parent / "apps" / "choices" / "app.py"


def sweep(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return run_python([str(APP), "-m", "+rlsweep=serial", "hydra.sweep.dir=sweep", *args], cwd)


def results(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    """Each job's result.json, by its directory's name."""
    return {p.parent.name: json.loads(p.read_text()) for p in sweep_dir.glob("*/result.json")}


def test_two_options_configured_alike_are_two_groups_with_their_own_seeds(
    tmp_path: Path,
) -> None:
    proc = sweep(tmp_path, "algo=a,b", "seed=range(2)")
    assert proc.returncode == 0, proc.stderr
    found = results(tmp_path / "sweep")
    assert sorted(found) == ["algo=a,seed=0", "algo=a,seed=1", "algo=b,seed=0", "algo=b,seed=1"]
    for name, result in found.items():  # each job's code ran: b's returns are 2.x
        assert int(result["return"]) == (1 if name.startswith("algo=a") else 2)
        assert result["rlsweep"]["job"]["config"]["hydra"] == {
            "choices": {"algo": name[5], "task": "nav/small"}
        }
    assert len({r["rlsweep"]["identity"] for r in found.values()}) == 4
    read = {n: (tmp_path / "sweep" / n / "seed.txt").read_text() for n in found}
    assert read["algo=a,seed=0"] != read["algo=b,seed=0"]  # the choice keys the seeds too

    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    groups = {g["group"]: g for g in summary["groups"]}
    assert sorted(groups) == ["algo=a", "algo=b"]
    assert [groups[g]["completed"] for g in ("algo=a", "algo=b")] == [2, 2]
    assert 2 <= groups["algo=b"]["mean"] < 3 and 1 <= groups["algo=a"]["mean"] < 2
    report = (tmp_path / "sweep" / "report.md").read_text()
    assert "4 jobs: 4 completed" in report and "not placed" not in report


def test_a_second_sweep_choosing_another_option_runs_its_own_jobs(tmp_path: Path) -> None:
    first = sweep(tmp_path, "algo=a", "seed=range(2)", NO_REPORT)
    assert first.returncode == 0, first.stderr
    second = sweep(tmp_path, "algo=b", "seed=range(2)", NO_REPORT)
    assert second.returncode == 0, second.stderr
    assert "already complete" not in second.stderr
    found = results(tmp_path / "sweep")
    assert {n: int(r["return"]) for n, r in found.items()} == {
        "algo=a,seed=0": 1,
        "algo=a,seed=1": 1,
        "algo=b,seed=0": 2,
        "algo=b,seed=1": 2,
    }
    again = sweep(tmp_path, "algo=b", "seed=range(2)", NO_REPORT)
    assert "2 of 2 jobs already complete (skipped), 0 to run" in again.stderr


def test_a_task_group_sweep_is_labelled_by_its_choices(tmp_path: Path) -> None:
    proc = sweep(tmp_path, "task=nav/small,nav/big", "seed=range(2)")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    assert sorted(g["group"] for g in summary["groups"]) == ["task=nav/big", "task=nav/small"]
    report = (tmp_path / "sweep" / "report.md").read_text()
    assert "task.size" not in report and "task.maze" not in report

    # A value of the option swept beside the choice stays in the label.
    grid = sweep(tmp_path / "grid", "task=nav/small,nav/big", "task.horizon=10,20")
    assert grid.returncode == 0, grid.stderr
    summary = json.loads((tmp_path / "grid" / "sweep" / "summary.json").read_text())
    assert sorted(g["group"] for g in summary["groups"]) == [
        f"task={t},task.horizon={h}" for t in ("nav/big", "nav/small") for h in (10, 20)
    ]


def legacy(result_path: Path) -> None:
    """Rewrite a result.json as rlsweep recorded it before group choices were part of a job
    (its identity's JSON without ``hydra`` in its config and shared values, and its digest:
    computed here, apart from rlsweep's own rule)."""
    import hashlib

    from rlsweep.identity import canonical_json

    result = json.loads(result_path.read_text())
    job = result["rlsweep"]["job"]
    old = {
        **job,
        **{
            part: {k: v for k, v in job[part].items() if k != "hydra"}
            for part in ("config", "shared")
        },
    }
    digest = hashlib.sha256(canonical_json(old).encode("ascii")).hexdigest()
    result["rlsweep"] = {**result["rlsweep"], "identity": digest, "job": old}
    atomic_write_json(result_path, result)


def test_results_recorded_before_choices_are_found_by_hydras_record(tmp_path: Path) -> None:
    proc = sweep(tmp_path, "seed=range(2)", NO_REPORT)
    assert proc.returncode == 0, proc.stderr
    job_dirs = sorted((tmp_path / "sweep").glob("seed=*"))
    for job_dir in job_dirs:
        legacy(job_dir / "result.json")

    again = sweep(tmp_path, "seed=range(2)", NO_REPORT)
    assert again.returncode == 0, again.stderr
    assert "2 of 2 jobs already complete (skipped), 0 to run" in again.stderr
    assert "2 completed job(s) recorded before config-group choices" in again.stderr
    for result in results(tmp_path / "sweep").values():
        assert result["rlsweep"]["job"]["config"]["hydra"]["choices"]["algo"] == "a"

    # Hydra's record says another option ran: not this job's result; nothing is run.
    legacy(job_dirs[0] / "result.json")
    hydra_yaml = job_dirs[0] / ".hydra" / "hydra.yaml"
    hydra_yaml.write_text(hydra_yaml.read_text().replace("algo: a", "algo: b"))
    refused = sweep(tmp_path, "seed=range(2)", NO_REPORT)
    assert refused.returncode != 0
    assert "the config-group choices differ (algo: 'b' then, 'a' now)" in refused.stderr


def test_two_jobs_of_one_sweep_never_share_an_identity(tmp_path: Path) -> None:
    proc = sweep(tmp_path, "+tag=x,y", "hydra.launcher.identity.ignore=[tag]")
    assert proc.returncode != 0
    assert "Two jobs of this sweep are the same job" in proc.stderr
    assert "(+rlsweep=serial +tag=x) and (+rlsweep=serial +tag=y)" in proc.stderr
    assert not (tmp_path / "sweep").exists() or not list((tmp_path / "sweep").glob("*/"))


CONFIG = {"algo": {"lr": 0.1}, "seed": 3}


def test_choices_key_the_streams_and_agent_side_groups_keep_common_random_numbers() -> None:
    a = identity_of(CONFIG, Keys(), choices={"algo": "a", "hydra/launcher": "rlsweep"})
    b = identity_of(CONFIG, Keys(), choices={"algo": "b", "rlsweep": "joblib"})
    assert a.digest != b.digest and a.config["hydra"] == {"choices": {"algo": "a"}}
    env = [Seeds(i).seed("env", shared=True) for i in (a, b)]
    assert env[0] != env[1]  # by default a choice makes every stream differ

    crn = Keys(agent=("algo",))
    ca, cb = (identity_of(CONFIG, crn, choices={"algo": x}) for x in "ab")
    assert Seeds(ca).seed("env", shared=True) == Seeds(cb).seed("env", shared=True)
    assert Seeds(ca).seed("policy") != Seeds(cb).seed("policy")

    # An app without groups: the identity (and every seed) it always had.
    plain = identity_of(CONFIG, Keys(), choices={"hydra/launcher": "rlsweep", "rlsweep": "x"})
    assert plain.digest == identity_of(CONFIG, Keys()).digest == without_choices(a).digest


@pytest.mark.parametrize(
    ("choices", "ignored", "expected"),
    [
        ({"algo": "a", "task/env": "nav", "hydra/job_logging": "default"}, (), None),
        ({"algo": None, "logger": "csv"}, ("logger",), {}),
        ({"algo/optim": "adam", "algo": "ppo"}, ("algo.optim",), {"algo": "ppo"}),
        ({"rlsweep/trackers": "tb", "rlsweep": "joblib"}, (), {}),
    ],
)
def test_which_choices_are_part_of_a_job(
    choices: dict[str, Any], ignored: tuple[str, ...], expected: dict[str, str] | None
) -> None:
    want = expected if expected is not None else {"algo": "a", "task/env": "nav"}
    assert job_choices(choices, ignored) == want
    assert under("algo/optim", ["algo"]) and not under("algorithm", ["algo"])


def test_a_completed_job_that_no_group_can_count_is_listed_never_dropped(tmp_path: Path) -> None:
    """Two completed jobs at one group and replicate that are other jobs (here: the same
    values under other kernels): one is counted, the other listed as not placed, and the
    report and summary say so; the same job found twice is counted once, and said."""
    from rlsweep.identity import Identity
    from rlsweep.report.build import write_report
    from rlsweep.store import write_record

    def job(name: str, numerics: str, value: float, replicate: int = 0) -> None:
        config = {"x": 1, "seed": replicate}
        identity = Identity(config, replicate, {"x": 1}, numerics=numerics)
        (tmp_path / name).mkdir()
        write_record(tmp_path / name, {"return": value}, identity, {"replicate": "seed"})

    job("seed=0", "native", 1.0)
    job("seed=1", "native", 2.0, replicate=1)
    job("portable,seed=0", "portable", 5.0)
    report = write_report([tmp_path])
    # The first in name order is counted (portable,seed=0); the other listed.
    assert [(g.group, g.completed, g.mean) for g in report.groups] == [("all", 2, 3.5)]
    assert [r.job for r in report.unplaced] == ["seed=0"]
    assert "and 1 completed not placed in a group (listed at the end)" in report.text
    assert "Not placed in any group, not counted (1 completed)" in report.text
    assert "- `seed=0`" in report.text
    from rlsweep.summary import summarize

    summarize(tmp_path, echo=False)
    summary = (tmp_path / "summary.md").read_text()
    assert "3 jobs: 3 completed, 0 failed, 0 incomplete. 1 of them no group counts" in summary
