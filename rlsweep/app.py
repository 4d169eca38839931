"""The Hydra entry point behind ``python -m rlsweep``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rlsweep.identity import Identity, Keys
from rlsweep.paths import conf_dir
from rlsweep.task_api import task as rlsweep_task


def identity(cfg: DictConfig) -> Identity:
    """A built-in agent job's identity (see rlsweep.job.job_identity)."""
    from rlsweep.config import load_job_config
    from rlsweep.job import job_identity

    return job_identity(load_job_config(cfg))


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
    if not isinstance(stored, dict):  # written before results kept their config
        return None
    try:  # typed as today: options added since then take their (neutral) defaults
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


def _config_dirs(argv: list[str]) -> list[Path]:
    """The shipped conf/ and any ``--config-dir``/``-cd`` given on the command line."""
    dirs = [conf_dir()]
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            dirs.append(Path(argv[i + 1]))
        elif arg.startswith("--config-dir="):
            dirs.append(Path(arg.split("=", 1)[1]))
    return dirs


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


def main() -> None:
    """``python -m rlsweep [-m] [overrides...]``: one job, or a sweep with ``-m``."""
    import sys

    import hydra

    problem = check_yaml(_config_dirs(sys.argv[1:]))
    if problem is not None:
        print(problem, file=sys.stderr)
        raise SystemExit(1)
    hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")(agent_task)()
