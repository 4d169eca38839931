"""Values no JSON number holds: refused in a config before any job runs, recorded as valid
JSON when a job returns one; replicate indices that are no index refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import NO_REPORT, run_python

APP = Path(__file__).parent / "apps" / "values" / "app.py"


def sweep(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return run_python([str(APP), "-m", "+rlsweep=serial", "hydra.sweep.dir=sweep", *args], cwd)


def strict(text: str) -> object:
    """JSON as a strict reader takes it (no NaN, Infinity literals)."""

    def refuse(name: str) -> object:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_a_nan_config_value_is_refused_before_any_job(tmp_path: Path) -> None:
    proc = sweep(tmp_path, "lr=nan,0.1", "seed=range(2)")
    assert proc.returncode != 0
    assert "Config key 'lr' is nan: a job's values must be finite numbers" in proc.stderr
    assert not list((tmp_path / "sweep").glob("*/result.json"))


def test_a_replicate_index_that_is_no_index_is_refused(tmp_path: Path) -> None:
    proc = sweep(tmp_path, "seed=range(-3,0)")
    assert proc.returncode != 0
    assert "The replicate key 'seed' is -3 in job (+rlsweep=serial seed=-3)" in proc.stderr
    assert not list((tmp_path / "sweep").glob("*/result.json"))


def test_returned_nan_infinities_and_huge_numbers_are_valid_json(tmp_path: Path) -> None:
    values = "value=not_a_number,infinity,minus_infinity,huge,2.5"
    proc = sweep(tmp_path, values, "seed=range(2)")
    assert proc.returncode == 0, proc.stderr
    found = {
        p.parent.name: strict(p.read_text()) for p in (tmp_path / "sweep").glob("*/result.json")
    }
    assert len(found) == 10
    returned = {name.split(",")[0]: r["return"] for name, r in found.items()}  # type: ignore[index]
    assert returned == {
        "value=not_a_number": "NaN",
        "value=infinity": "Infinity",
        "value=minus_infinity": "-Infinity",
        "value=huge": 10**400,
        "value=2.5": 2.5,
    }
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    groups = {g["group"]: g for g in summary["groups"]}
    assert groups["value=2.5"]["completed"] == 2 and groups["value=2.5"]["mean"] == 2.5
    assert (tmp_path / "sweep" / "report.md").is_file()


def test_nothing_written_for_a_refused_sweep(tmp_path: Path) -> None:
    proc = sweep(tmp_path, "+extra=inf", NO_REPORT)
    assert proc.returncode != 0 and "Config key 'extra' is inf" in proc.stderr
