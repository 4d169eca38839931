"""The Hydra entry point behind ``python -m rlsweep``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rlsweep.identity import Identity, Keys
from rlsweep.paths import conf_dir, config_dirs, prog
from rlsweep.task_api import task as rlsweep_task


def identity(cfg: DictConfig) -> Identity:
    """A built-in agent job's identity (see rlsweep.job.job_identity): the first thing a
    job computes, so a single run's config errors end here."""
    from rlsweep.config import load_job_config
    from rlsweep.errors import ConfigError
    from rlsweep.job import job_identity

    try:
        job = load_job_config(cfg)
    except ConfigError:
        _forget_single_run()
        raise
    return job_identity(job)


def _forget_single_run() -> None:
    """A single run refused by its config: remove what Hydra wrote for it before the task
    ran (its ``.hydra/`` and log, and the directories made for them), so that a typo leaves
    nothing behind, as it does with ``-m`` (refused before any job). A directory holding
    anything else (an earlier run's files) is kept."""
    import shutil

    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.RUN:
        return
    hydra_cfg = HydraConfig.get()
    directory = Path(hydra_cfg.runtime.output_dir)
    written = {hydra_cfg.output_subdir, f"{hydra_cfg.job.name}.log"}
    if not directory.is_dir() or {p.name for p in directory.iterdir()} - written:
        return
    shutil.rmtree(directory)
    cwd = Path.cwd().resolve()
    for parent in directory.resolve().parents:  # runs/<name>/, runs/: if left empty
        if not parent.is_relative_to(cwd) or parent == cwd or any(parent.iterdir()):
            break
        parent.rmdir()


def validate(cfg: DictConfig) -> None:
    """Called by rlsweep's launcher on every job's config before any job starts."""
    from rlsweep.config import load_job_config

    load_job_config(cfg)


def changed_since(cfg: DictConfig, result: dict[str, Any]) -> str | None:
    """Called by rlsweep's sweeper for each completed job it would skip: what the job's
    settings now differ in from those its ``result.json`` was computed with, or None."""
    from omegaconf import OmegaConf

    from rlsweep.config import load_job_config
    from rlsweep.errors import ConfigError
    from rlsweep.identity import setting_changes
    from rlsweep.job import computation_config

    stored = result.get("config")
    if not isinstance(stored, dict):  # a result without its config (an older rlsweep's)
        return None
    try:  # typed by the job schema: an option the stored config lacks takes its (neutral) default
        then = load_job_config(OmegaConf.create(stored))
    except ConfigError as exc:
        return f"its stored settings are no longer valid ({exc})"
    return setting_changes(computation_config(then), computation_config(load_job_config(cfg)))


def on_sweep_end(sweep_dir: Path) -> None:
    """Called by rlsweep's sweeper after the last batch, whether or not jobs failed:
    writes the statistical report and prints the summary table."""
    from rlsweep.summary import summarize, summarize_at_end

    summarize_at_end(sweep_dir, summarize)


@rlsweep_task(
    # ``seed`` is the replicate index the job derives every seed from (rlsweep.job).
    keys=Keys(replicate_value="index"),
    identity=identity,
    validate=validate,
    changed_since=changed_since,
    on_sweep_end=on_sweep_end,
)
def agent_task(cfg: DictConfig) -> dict[str, Any]:
    """One job (Hydra calls this once per job, in whatever process the launcher chose)."""
    from rlsweep.job import run_agent_job

    return run_agent_job(cfg)


def check_yaml(dirs: list[Path]) -> str | None:
    """One paragraph naming the first YAML file that does not parse, or None."""
    import yaml

    for directory in dirs:
        for path in sorted(directory.rglob("*.yaml")):
            try:
                yaml.safe_load(path.read_text())
            except yaml.YAMLError as exc:
                where = getattr(exc, "problem_mark", None)
                line = f" (line {where.line + 1}, column {where.column + 1})" if where else ""
                problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
                return (
                    f"rlsweep: the config file {path}{line} is not valid YAML: {problem}. "
                    "Fix the file (or remove it) and run again; nothing was started."
                )
    return None


def launcher_problem(argv: list[str], launchers: list[str]) -> str | None:
    """A command line choosing a Hydra launcher plugin (``hydra/launcher=joblib``), or no
    launcher (``launcher=null``): what to type instead, or None. The built-in app's jobs
    run on rlsweep's launcher, chosen by its own group (conf/launcher/*.yaml); another
    plugin's config would only fail on its options (``Key 'executor' not in ...``)."""
    named = ", ".join(f"launcher={name}" for name in launchers)
    for arg in argv:
        key, _, value = arg.lstrip("+~").partition("=")
        if key == "hydra/launcher" and value != "rlsweep":
            plugin = value or "(none)"
            instead = _INSTEAD.get(value, value if value in launchers else "joblib")
            return (
                f"rlsweep: {arg} picks Hydra's launcher plugin {plugin!r}: python -m rlsweep "
                f"runs its jobs on rlsweep's own launcher, chosen with launcher=NAME "
                f"(conf/launcher/*.yaml: {named}), e.g. launcher={instead}. Nothing was "
                "started."
            )
        if key == "launcher" and (arg.startswith("~") or value in ("null", "")):
            return (
                f"rlsweep: {arg} leaves python -m rlsweep without a launcher: choose one with "
                f"launcher=NAME ({named}; joblib by default). Nothing was started."
            )
    return None


# rlsweep's launcher closest to each Hydra launcher plugin.
_INSTEAD = {
    "basic": "serial",
    "joblib": "joblib",
    "submitit_local": "submitit_local",
    "submitit_slurm": "slurm",
    "ray": "ray",
    "ray_aws": "ray",
}


def _refusal(argv: list[str]) -> str | None:
    """Why the command line cannot run, said before Hydra starts (None: it can). Hydra's
    own flags are checked first, by its parser under the program's name (not
    ``__main__.py``'s): a bad one ends here with argparse's usage line and status 2."""
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()
    parser.prog = prog()
    parser.parse_args(argv)
    dirs = config_dirs(argv)
    launchers = sorted({p.stem for d in dirs for p in (d / "launcher").glob("*.yaml")})
    return launcher_problem(argv, launchers) or check_yaml(dirs)


def main() -> None:
    """``python -m rlsweep [-m] [overrides...]``: one job, or a sweep with ``-m``."""
    import sys

    import hydra

    problem = _refusal(sys.argv[1:])
    if problem is not None:
        print(problem, file=sys.stderr)
        raise SystemExit(1)
    hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")(agent_task)()
