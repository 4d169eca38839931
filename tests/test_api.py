"""rlsweep's public API for user code: identity, seeds, the running job, its record."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import NO_REPORT, run_python

import rlsweep
from rlsweep.identity import identity_of
from rlsweep.results import result_values

API_APP = Path(__file__).parent / "apps" / "api" / "app.py"
KEYS = rlsweep.Keys(agent=("algo", "lr"), ignore=("tag",))
CONFIG = {"algo": "a", "lr": 0.1, "seed": 2, "tag": "x", "env": {"id": "E", "n": 3}}


def test_identity_is_the_config_values_under_the_documented_rule() -> None:
    ident = identity_of(CONFIG, KEYS)
    assert ident.replicate == 2 and ident.root == 0 and ident.threads == 1
    assert dict(ident.config) == {"algo": "a", "lr": 0.1, "seed": 2, "env": {"id": "E", "n": 3}}
    assert dict(ident.agent) == {"algo": "a", "lr": 0.1}
    assert dict(ident.shared) == {"env": {"id": "E", "n": 3}}
    # An ignored key, key order, and ints written as such: the same job.
    same = identity_of({"env": {"n": 3, "id": "E"}, "seed": 2, "lr": 0.1, "algo": "a"}, KEYS)
    assert same.digest == ident.digest
    assert identity_of({**CONFIG, "lr": 0.2}, KEYS).digest != ident.digest
    # Hydra's exclude_keys are ignored too (dotted paths reach into sections).
    assert identity_of({**CONFIG, "env": {"id": "E", "n": 4}}, KEYS, ["env.n"]).digest == (
        identity_of(CONFIG, KEYS, ["env.n"]).digest
    )


def test_seeds_follow_the_identity_not_the_process() -> None:
    a = rlsweep.Seeds(identity_of(CONFIG, KEYS))
    b = rlsweep.Seeds(identity_of({**CONFIG, "algo": "b", "lr": 0.5}, KEYS))
    other_replicate = rlsweep.Seeds(identity_of({**CONFIG, "seed": 3}, KEYS))
    # Shared streams: common random numbers across agent-side values at one replicate.
    assert a.seeds("env", 4, shared=True) == b.seeds("env", 4, shared=True)
    assert a.seeds("env", 4, shared=True) != other_replicate.seeds("env", 4, shared=True)
    # Agent-side streams differ; purposes and indices never collide.
    assert a.seed("policy") != b.seed("policy")
    leaves = [a.seed("policy"), a.seed("env"), *a.seeds("env", 4, shared=True), a.seed("x", 1)]
    assert len(set(leaves)) == len(leaves)
    assert a.seed("torch", bits=32) == a.seed("torch") & 0xFFFFFFFF
    np.testing.assert_array_equal(
        a.generator("g").random(4), np.random.default_rng(a.sequence("g")).random(4)
    )
    with pytest.raises(ValueError, match="bits"):
        a.seed("x", bits=16)


def test_an_integer_seed_that_is_no_index_stays_an_ordinary_value() -> None:
    ident = identity_of({"seed": -1, "x": 1}, rlsweep.Keys())
    assert ident.replicate == 0 and dict(ident.shared) == {"seed": -1, "x": 1}


def test_a_bad_thread_count_is_refused_naming_the_key() -> None:
    with pytest.raises(rlsweep.ConfigError, match="torch_threads"):
        identity_of({"torch_threads": 0}, rlsweep.Keys())


def test_current_outside_a_job_says_how_to_get_one() -> None:
    with pytest.raises(RuntimeError, match=r"@rlsweep\.task"):
        rlsweep.current()


def test_what_a_task_returns_is_recorded_as_json() -> None:
    assert result_values(0.5) == {"return": 0.5}
    assert result_values(np.float32(0.25)) == {"return": 0.25}
    assert result_values({"a": 1, "b": [1, 2], "c": object}) == {
        "a": 1,
        "b": [1, 2],
        "c": repr(object),
    }
    assert result_values(None) == {"return": None}


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_python([str(API_APP), *args], cwd)


def test_an_app_using_the_api_gets_its_seeds_alone_or_in_any_sweep(tmp_path: Path) -> None:
    sweep = run(["-m", "algo=a,b", "seed=range(2)"], tmp_path)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    alone = run(["algo=b", "seed=1", "tag=t", "hydra.run.dir=alone"], tmp_path)
    assert alone.returncode == 0, alone.stderr[-3000:]
    root = tmp_path / "multirun" / "app"
    got = {
        d.name: json.loads((d / "api_seeds.json").read_text()) for d in root.iterdir() if d.is_dir()
    }
    assert sorted(got) == ["algo=a,seed=0", "algo=a,seed=1", "algo=b,seed=0", "algo=b,seed=1"]
    # The job run alone (with an ignored tag) is the sweep's job, draw for draw.
    assert json.loads((tmp_path / "alone" / "api_seeds.json").read_text()) == got["algo=b,seed=1"]
    for rep in (0, 1):
        a, b = got[f"algo=a,seed={rep}"], got[f"algo=b,seed={rep}"]
        assert a["env"] == b["env"] and a["yaml_env"] == b["yaml_env"]  # shared streams
        assert a["policy"] != b["policy"] and a["global"] != b["global"]
    # The documented rule: the seeds follow from the identity recorded in result.json.
    record = json.loads((root / "algo=b,seed=1" / "result.json").read_text())
    job = record["rlsweep"]["job"]
    seeds = rlsweep.Seeds(
        rlsweep.Identity(
            config=job["config"],
            replicate=job["replicate"],
            shared=job["shared"],
            agent=job["agent"],
            root=job["root"],
        )
    )
    assert got["algo=b,seed=1"]["env"] == seeds.seeds("env", 3, shared=True)
    assert got["algo=b,seed=1"]["yaml_env"] == seeds.seed("yaml_env", shared=True)
    assert got["algo=b,seed=1"]["policy"] == seeds.seed("policy")
    assert record["score"] == pytest.approx(0.2)
    with (root / "algo=b,seed=1" / "metrics.csv").open() as f:
        assert list(csv.DictReader(f)) == [
            {"step": "1", "value": "0.1"},
            {"step": "2", "value": "0.2"},
        ]


def test_values_from_seeds_hydra_or_the_clock_are_not_part_of_a_job() -> None:
    from omegaconf import OmegaConf

    from rlsweep.identity import task_config

    cfg = OmegaConf.create(
        {
            "a": 1,
            "out": "${hydra:runtime.output_dir}/x",
            "stamp": "${now:%H-%M-%S}",
            "nested": {"seed": "${rlsweep.seed:p}", "copy": "${a}"},
            "hydra": {"job": {"name": "j"}},
            # Values computed from those are left out too (before, they failed to resolve),
            # however they reach them: a whole value, part of a text, a node, a list element.
            "logger": {"name": "${stamp}", "dir": "${out}/logs", "seed": "${nested.seed}"},
            "copied": "${nested}",
            "paths": ["${out}", "fixed"],
        }
    )
    assert task_config(cfg) == {
        "a": 1,
        "nested": {"copy": 1},
        "logger": {},
        "copied": {"copy": 1},
        "paths": ["fixed"],
    }


@pytest.mark.parametrize(
    "config",
    [
        {"a": 1, "lr": 0.1, "seed": 3, "env": {"id": "E", "ks": [1, 2.5, None, True]}},
        {"a": "???", "b": None, "logger": {"tensorboard": {"flush_s": 5}}},
        {"a": 1, "logger": {"tensorboard": {}, "other": 2}},
        {"s": "\\${not an interpolation}", "t": "50$"},  # escaped: resolved as text
        {"hydra": {"job": {"name": "j"}}, "x": [{"y": "${x.1}"}, 7]},
    ],
)
def test_a_config_without_interpolations_is_its_own_values(config: dict[str, object]) -> None:
    """task_config takes a plain config's values as they are (no resolving copy): the same
    values, ``hydra`` left out, as resolving gives; an app's own ``logger`` is its own."""
    from omegaconf import OmegaConf

    from rlsweep import identity

    cfg = OmegaConf.create(config)
    fast = identity.task_config(cfg)
    # The same values with one interpolation more: resolved through a copy.
    slow = identity.task_config(OmegaConf.create({**config, "_": "${oc.env:HOME,x}"}))
    slow.pop("_")
    assert fast == slow
    assert "hydra" not in fast and fast.get("logger") == config.get("logger")


LOOP_APP = Path(__file__).parent / "apps" / "loop" / "app.py"


def loop_results(sweep: Path) -> dict[str, tuple[dict[str, object], str]]:
    """Each job's result.json values (without the identity) and metrics.csv text."""
    out = {}
    for result in sorted(sweep.glob("*/result.json")):
        values = json.loads(result.read_text())
        values.pop("rlsweep")
        out[result.parent.name] = (values, (result.parent / "metrics.csv").read_text())
    return out


def test_a_killed_sweep_resumes_each_job_from_its_checkpoint_bit_for_bit(tmp_path: Path) -> None:
    """The checkpoint pattern (Job.checkpoint / Job.restore): the sweep's process is
    SIGKILLed half-way (its workers die with it); the same command then resumes every
    started job from its last checkpoint and ends with the uninterrupted run's numbers."""
    import signal
    import time

    args = [str(LOOP_APP), "-m", "seed=range(2)", "steps=60", NO_REPORT]
    sweep = tmp_path / "multirun" / "app"
    with ThreadPoolExecutor(1) as pool:  # the uninterrupted reference runs meanwhile
        running = pool.submit(run_python, [*args, "hydra.sweep.dir=reference"], tmp_path)
        proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                rows = [len(p.read_text().splitlines()) for p in sweep.glob("*/metrics.csv")]
                if len(rows) == 2 and min(rows) > 10:
                    break
                time.sleep(0.1)
            else:
                raise AssertionError("the jobs did not get going")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        reference = running.result()
    assert reference.returncode == 0, reference.stderr[-3000:]
    assert not list(sweep.glob("*/result.json"))  # both were cut off half-way
    time.sleep(1.0)  # the workers notice their parent is gone

    resumed = run_python(args, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after, before = loop_results(sweep), loop_results(tmp_path / "reference")
    # Named by the key the sweep varies (steps=60 is the same for both: in sweep.json).
    assert sorted(after) == sorted(before) == ["seed=0", "seed=1"]
    for job in after:
        assert after[job][0]["resumed"] == 1 and before[job][0]["resumed"] == 0
        assert after[job][0]["total"] == before[job][0]["total"]
        assert after[job][1] == before[job][1]  # metrics.csv, row for row
        assert not (sweep / job / "checkpoint.pt").exists()


def test_the_api_names_stay_the_api_after_rlsweeps_modules_load() -> None:
    """Importing rlsweep's own modules (as a worker does before it unpickles a task) leaves
    ``rlsweep.task`` the decorator: no submodule shares a public name."""
    code = (
        "import rlsweep, rlsweep.launch.worker, rlsweep.app, rlsweep.summary; "
        "print(all(callable(getattr(rlsweep, n)) for n in rlsweep.__all__))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"
