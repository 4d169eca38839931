"""scripts/check_docs.py: the README's and docs' links resolve and their commands parse.

It passes on this tree, and fails, naming the file, the line and the problem, on a broken
link, a missing anchor or image, and on commands that would fail: an unknown key, an unknown
config choice, a value only one of a sweep's choices rejects, a sweep without -m, unquoted
parentheses, overrides outside Hydra's grammar, a misspelled key of rlsweep's in an app's
command, a script that does not exist."""

from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType

import pytest
from conftest import load_script, run_python

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_docs.py"


@functools.cache
def checker() -> ModuleType:
    """scripts/check_docs.py as a module (scripts/ is not a package)."""
    return load_script(SCRIPT)


def tree(tmp_path: Path, readme: str, pages: dict[str, str] | None = None) -> Path:
    """A tree holding ``readme`` as README.md and ``pages`` under it."""
    (tmp_path / "README.md").write_text(readme)
    for name, text in (pages or {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def bash(*lines: str) -> str:
    return "# A tree\n\n```bash\n" + "\n".join(lines) + "\n```\n"


def problems(root: Path) -> list[str]:
    return list(checker().check(root))


def test_the_repository_passes() -> None:
    proc = run_python([str(SCRIPT)], ROOT, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 problem(s)" in proc.stdout


def test_a_broken_link_fails_the_command(tmp_path: Path) -> None:
    readme = "# T\n\nSee [the guide](docs/guide.md) and [this](docs/here.md#the-here-page).\n"
    root = tree(tmp_path, readme, {"docs/here.md": "# The here page\n"})
    proc = run_python([str(SCRIPT), "--root", str(root)], ROOT, timeout=120)
    assert proc.returncode == 1
    assert "README.md:3: link to 'docs/guide.md': no such file" in proc.stderr
    assert "here.md" not in proc.stderr  # the good link and its anchor pass


def test_links_images_and_anchors(tmp_path: Path) -> None:
    readme = (
        '# T\n\n![plot](docs/plot.png) <img src="docs/gone.png" width="3">\n'
        "[a](docs/page.md#no-such-heading) [b](docs/page.md#a-page-with-code) "
        "[c](https://example.org/x) `[not a link](nowhere.md)`\n"
        "```text\n[in code](nowhere.md)\n```\n"
    )
    pages = {"docs/page.md": "# A page, with `code`\n\n[back](../README.md#t)\n"}
    found = problems(tree(tmp_path, readme, pages))
    assert found == [
        "README.md:3: link to 'docs/plot.png': no such file",
        "README.md:3: link to 'docs/gone.png': no such file",
        "README.md:4: link to 'docs/page.md#no-such-heading': no heading #no-such-heading there",
    ]


def test_an_unknown_key_fails(tmp_path: Path) -> None:
    command = "python -m rlsweep -m agent=a2c,ppo agent.learnin_rate=3e-4 'seed=range(2)'"
    found = problems(tree(tmp_path, bash(command)))
    assert len(found) == 1
    assert found[0].startswith("README.md:4: does not compose (agent=a2c agent.learnin_rate=3e-4")
    assert "learnin_rate" in found[0] and found[0].endswith(command)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # every choice of a sweep is composed: PPO has clip_range, A2C does not
        ("python -m rlsweep -m agent=ppo,a2c agent.clip_range=0.1", "(agent=a2c agent.clip_range"),
        ("python -m rlsweep -m agent=a2c,ppx", "Could not find 'agent/ppx'"),
        ("python -m rlsweep agent=a2c,ppo", "a sweep without -m"),
        ("python -m rlsweep -m seed=range(8)", "not valid shell: an unquoted parenthesis"),
        ("python -m rlsweep -m n_jobs=0", "n_jobs (hydra.launcher.n_jobs) must be >= 1"),
        ("python -m rlsweep -m agent.learning_rate=abc", "could not be converted to Float"),
        ("python -m rlsweep -m launcher=slurm hydra.launcher.slurm.timeout_min=0", "timeout_min"),
        ("python -m rlsweep -m search.trials=3 compare.rounds=2", "both set"),
        ("python -m rlsweep.nothing multirun/x", "no module rlsweep.nothing"),
        ("python train.py -m 'lr=[1,2' 'seed=range(2)'", "overrides do not parse"),
        ("python train.py -m +rlsweep=joblib hydra.launcher.identity.replicat=x", "replicat"),
        ("python train.py -m rlsweep/trackers=[tensorbord]", "tensorbord"),
        ("python train.py -m hydra.sweeper.rerun=sometimes", "rerun"),
        ("pip install -e . && bash scripts/missing.sh", "no such script scripts/missing.sh"),
        ("python bench/missing.py --full", "no such file bench/missing.py"),
        ("echo 'unclosed", "not valid shell: No closing quotation"),
    ],
)
def test_a_command_that_would_fail_is_found(tmp_path: Path, command: str, expected: str) -> None:
    found = problems(tree(tmp_path, bash("# a comment", command)))
    assert len(found) == 1 and found[0].startswith("README.md:5: "), found
    assert expected in found[0]


def test_commands_that_work_pass(tmp_path: Path) -> None:
    readme = bash(
        "pip install torch==2.13.0 && pip install -e '.[test]' && bash scripts/ok.sh",
        "python -m rlsweep -m agent=a2c,ppo 'seed=range(8)' launcher=slurm \\",
        "  hydra.launcher.slurm.partition=cpu 'logger=[tensorboard,wandb]'  # on a cluster",
        "python -m rlsweep -m +preset=ppo_cartpole 'agent.learning_rate=interval(1e-4,1e-2)' \\",
        "  search.trials=16 search.sampler=tpe 2>&1 | tee search.log",
        "python -m rlsweep +experiment=main_grid",
        "python -m rlsweep --config-dir ~/my_own_conf -m launcher=mine",  # a user's: syntax only
        "python -m rlsweep.report multirun/default --metric eval/reward",
        "python train.py -m +rlsweep=joblib hydra.launcher.identity.replicate=env.seed \\",
        "  'env.seed=range(8)' optim.lr=1e-3,3e-4 'rlsweep/trackers=[tensorboard]' ...",
        "PYTHONPATH=src nice -n 19 python train.py -m hydra/sweeper=optuna 'lr=interval(0,1)'",
    )
    root = tree(tmp_path, readme, {"scripts/ok.sh": "true\n"})
    assert problems(root) == []


def test_an_app_of_the_tree_composes_on_its_own_config(tmp_path: Path) -> None:
    app = 'import hydra\n\n@hydra.main(config_path="conf", config_name="config")\ndef main(cfg): ...\n'
    pages = {"app/train.py": app, "app/conf/config.yaml": "lr: 0.1\nseed: 0\n"}
    ok = "python app/train.py -m lr=0.1,0.01 'seed=range(2)'"
    assert problems(tree(tmp_path, bash(ok), pages)) == []
    found = problems(tree(tmp_path, bash("python app/train.py -m lrr=0.1"), pages))
    assert len(found) == 1 and "lrr" in found[0]


def test_commands_of_docs_pages_are_checked(tmp_path: Path) -> None:
    pages = {"docs/page.md": bash("python -m rlsweep -m env=nowhere")}
    found = problems(tree(tmp_path, "# T\n", pages))
    assert len(found) == 1 and found[0].startswith("docs/page.md:4: does not compose")
