"""The metric a researcher means (issue 56): a task that returns no number is reported on
the series the default rule ranks first (rlsweep.report.metrics), for apps logging as
TorchRL's examples, a multi-agent benchmark (BenchMARL), Stable-Baselines3, CleanRL and
Lightning do: their evaluation's mean return, else their training's.

Each test writes a job directory as rlsweep leaves it (tests/test_report_any_app.py) and the
app's logs into it with the library itself (TorchRL's loggers, Stable-Baselines3's own
training, torch's SummaryWriter, Lightning's CSVLogger) under the names it logs, then reads
the metric back through the report's reading path. The libraries are imported inside the
tests: collection stays cheap.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from test_report_any_app import write_app_job

from rlsweep.report.cli import main
from rlsweep.report.metrics import Metric, choose_metric, ranked_series, series_rank
from rlsweep.report.read import read_runs
from rlsweep.summary import summarize


def chosen(sweep: Path) -> Metric:
    """The default metric of the report on ``sweep``, read as the report reads it."""
    return choose_metric(read_runs([sweep]).runs)


def app_job(sweep: Path, seed: int = 0) -> Path:
    """A completed job of an app whose task function returned nothing."""
    return write_app_job(sweep, {"seed": seed}, None)


# ------------------------------------------------------------------------------ TorchRL


def torchrl_ppo_metrics(i: int) -> dict[str, float]:
    """What sota-implementations/ppo/ppo_mujoco.py logs per batch (its evaluation every
    batch here), ``timeit.todict(prefix="time")`` and ``time/speed`` included."""
    return {
        "train/reward": 10.0 * i,
        "train/episode_length": 100.0 + i,
        "train/loss_critic": 1.0 / i,
        "train/loss_entropy": -0.01,
        "train/loss_objective": 0.1 / i,
        "train/lr": 3e-4,
        "train/clip_epsilon": 0.2,
        "eval/reward": 20.0 * i,
        "time/training": 0.5,
        "time/eval": 0.25,
        "time/speed": 1000.0,
    }


def torchrl_multiagent_metrics(i: int) -> dict[str, float]:
    """What sota-implementations/multiagent/mappo_ippo.py logs (utils/logging.py), its
    ``/`` replaced by ``_`` as it does for every logger but wandb's."""
    logged = {
        "train/learner/loss_objective": 0.1 / i,
        "train/learner/loss_critic": 1.0 / i,
        **{f"train/reward/reward_{r}": v * i for r, v in (("min", 0), ("mean", 1), ("max", 2))},
        **{
            f"train/reward/episode_reward_{r}": 10 * v * i
            for r, v in (("min", 0), ("mean", 1), ("max", 2))
        },
        "train/sampling_time": 0.5,
        "train/total_frames": 6000.0 * i,
        "eval/episode_reward_min": 15.0 * i,
        "eval/episode_reward_max": 25.0 * i,
        "eval/episode_reward_mean": 20.0 * i,
        "eval/episode_len_mean": 100.0,
        "eval/evaluation_time": 1.5,
    }
    return {key.replace("/", "_"): value for key, value in logged.items()}


@pytest.mark.parametrize(
    ("example", "backend", "expected"),
    [
        ("ppo_mujoco", "tensorboard", "eval/reward"),
        ("multiagent", "csv", "eval_episode_reward_mean"),
    ],
)
def test_torchrls_examples_are_reported_on_their_evaluation_reward(
    tmp_path: Path, example: str, backend: str, expected: str
) -> None:
    """TorchRL's examples, as their loggers write them: ppo_mujoco's ``eval/reward``
    (TensorBoard), the multi-agent example's evaluation mean over its max and min (CSV
    files; its max was chosen before, first in sorted order)."""
    from torchrl.record.loggers import generate_exp_name, get_logger

    metrics = torchrl_ppo_metrics if example == "ppo_mujoco" else torchrl_multiagent_metrics
    for seed in range(2):
        job = app_job(tmp_path, seed)
        logger = get_logger(backend, str(job / "logs"), generate_exp_name("PPO", example))
        assert logger is not None
        for i in (1, 2, 3):
            logger.log_metrics(metrics(i), step=1000 * i)
        if backend == "tensorboard":
            logger.experiment.close()  # as each job's end flushes the app's open writer
    metric = chosen(tmp_path)
    assert set(metric.logged) == set(metrics(1))  # every name, read from the files
    assert metric.name == expected
    assert metric.reason.endswith(
        "a return or reward, of an evaluation"
        + (", of an episode, a mean" if example == "multiagent" else "")
    )
    assert read_runs([tmp_path]).runs[0].value(expected) == 60.0  # its last value


# ------------------------------------------------------------ a multi-agent benchmark


def _min_mean_max(key: str, values: tuple[float, float, float]) -> dict[str, float]:
    """BenchMARL's ``_log_min_mean_max``."""
    return {f"{key}_{r}": v for r, v in zip(("min", "mean", "max"), values, strict=True)}


def benchmarl_metrics(i: int, *, agents: int = 2, global_eval: bool = True) -> dict[str, float]:
    """What BenchMARL's MultiAgentLogger logs at iteration ``i`` for one group ``agents`` of
    ``agents`` agents (log_collection, log_training, log_evaluation, and the experiment's
    timers and counters), by wandb's names (``/`` kept); ``global_eval=False`` leaves out
    the evaluation's episode reward over all groups."""
    to_log: dict[str, float] = {}
    for a in range(agents):
        agent = f"collection/agents/reward/agent_{a}"
        to_log |= _min_mean_max(f"{agent}/reward", (0.0, 0.1 * i, 0.2 * i))
        to_log |= _min_mean_max(f"{agent}/episode_reward", (1.0, 5.0 * i + a, 9.0 * i))
    to_log |= _min_mean_max("collection/agents/reward/episode_reward", (1.0, 6.0 * i, 11.0 * i))
    to_log |= _min_mean_max("collection/reward/reward", (0.0, 0.1 * i, 0.2 * i))
    to_log |= _min_mean_max("collection/reward/episode_reward", (1.0, 6.0 * i, 11.0 * i))
    to_log["collection/agents/info/pos_rew"] = 0.3 * i  # a VMAS scenario's info
    to_log |= _min_mean_max("eval/agents/reward/episode_reward", (2.0, 7.0 * i, 12.0 * i))
    if global_eval:
        to_log |= _min_mean_max("eval/reward/episode_reward", (2.0, 7.0 * i, 12.0 * i))
    to_log["eval/reward/episode_len_mean"] = 100.0
    for key in (
        "loss_objective",
        "loss_critic",
        "loss_entropy",
        "entropy",
        "clip_fraction",
        "ESS",
        "grad_norm_loss_objective",
    ):
        to_log[f"train/agents/{key}"] = 1.0 / i
    for key in ("collection", "training", "iteration", "total", "evaluation"):
        to_log[f"timers/{key}_time"] = 0.5
    to_log |= {
        "counters/current_frames": 6000.0,
        "counters/total_frames": 6000.0 * i,
        "counters/iter": float(i),
    }
    return to_log


def write_benchmarl_job(job: Path, *, global_eval: bool = True) -> None:
    """BenchMARL's default csv logger (TorchRL's CSVLogger), written as MultiAgentLogger.log
    writes every logger but wandb: each name's ``/`` replaced by ``_``."""
    from torchrl.record.loggers import get_logger

    logger = get_logger("csv", str(job / "mappo_balance"), "mappo_balance_mlp__1a2b_26_12_01")
    assert logger is not None
    for i in (1, 2, 3):
        for key, value in benchmarl_metrics(i, global_eval=global_eval).items():
            logger.log_scalar(key.replace("/", "_"), value, step=i)


def test_a_multi_agent_benchmark_is_reported_on_its_global_evaluation_mean(
    tmp_path: Path,
) -> None:
    """BenchMARL's per-agent, per-group and global episode rewards, each as min, mean and
    max, during collection and evaluation (the maximum of a group's evaluation was chosen
    before: first in sorted order); without the global ones, the agents' evaluation mean.
    The end of the sweep names the metric, why and how many names there are besides, and
    lists every name once, in report.md."""
    for seed in range(2):
        write_benchmarl_job(app_job(tmp_path / "global", seed))
        write_benchmarl_job(app_job(tmp_path / "agents", seed), global_eval=False)
    logged = chosen(tmp_path / "global").logged
    assert set(logged) == {k.replace("/", "_") for k in benchmarl_metrics(1)}
    assert chosen(tmp_path / "global").name == "eval_reward_episode_reward_mean"
    assert chosen(tmp_path / "agents").name == "eval_agents_reward_episode_reward_mean"

    printed = io.StringIO()
    summarize(tmp_path / "global", stream=printed)
    line = next(x for x in printed.getvalue().splitlines() if x.startswith("Metric: "))
    others = f"{len(logged) - 1} other names the jobs returned or logged"
    assert line == (
        "Metric: eval_reward_episode_reward_mean, the last value of a series the jobs logged, "
        "ranked first by the default rule for a task that returns no number: a return or "
        f"reward, of an evaluation, of an episode, a mean, of all agents; {others}, listed in "
        "report.md"
    )
    summary = (tmp_path / "global" / "summary.md").read_text()
    report = (tmp_path / "global" / "report.md").read_text()
    assert f"{others}, listed in report.md" in summary
    assert f"{others}, listed under Metrics." in report
    assert f"## Metrics\n\nThe {len(logged)} names the completed jobs returned" in report
    assert f"- logged ({len(logged)}, a series: a job's value is its last): `" in report
    for name in logged:
        if name != "eval_reward_episode_reward_mean":  # the metric: named where it is used
            assert name not in printed.getvalue() and name not in summary
            assert report.count(name) == 1, name  # in Metrics, nowhere else


# ---------------------------------------------------------------- Stable-Baselines3


def train_sb3(job: Path, *, evaluate: bool) -> None:
    """A real Stable-Baselines3 PPO on CartPole, 64 steps: with an EvalCallback and its
    logger configured to CSV and TensorBoard, else its own ``tensorboard_log``."""
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import EvalCallback
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.monitor import Monitor

    settings: dict[str, Any] = {
        "n_steps": 32,
        "batch_size": 32,
        "n_epochs": 1,
        "seed": 0,
        "device": "cpu",
        "policy_kwargs": {"net_arch": [8]},
    }
    if not evaluate:
        PPO("MlpPolicy", "CartPole-v1", tensorboard_log=str(job / "tb"), **settings).learn(64)
        return
    model = PPO("MlpPolicy", "CartPole-v1", **settings)
    model.set_logger(configure(str(job / "sb3"), ["csv", "tensorboard"]))
    evaluation = Monitor(gym.make("CartPole-v1"))
    model.learn(64, callback=EvalCallback(evaluation, eval_freq=32, n_eval_episodes=1))


def test_stable_baselines3_is_reported_on_its_evaluation_mean_reward(tmp_path: Path) -> None:
    """``eval/mean_reward`` (its EvalCallback) over ``rollout/ep_rew_mean``, ``train/loss``,
    ``time/fps``...; without an evaluation, ``rollout/ep_rew_mean`` (its
    ``rollout/ep_len_mean`` was chosen before: no word ``reward`` in ``ep_rew``)."""
    train_sb3(app_job(tmp_path / "eval"), evaluate=True)
    train_sb3(app_job(tmp_path / "rollout"), evaluate=False)
    evaluated, rollout = chosen(tmp_path / "eval"), chosen(tmp_path / "rollout")
    assert {"rollout/ep_rew_mean", "train/loss", "time/fps", "eval/mean_ep_length"} <= set(
        evaluated.logged
    )
    assert evaluated.name == "eval/mean_reward"
    assert "rollout/ep_len_mean" in rollout.logged and "eval/mean_reward" not in rollout.logged
    assert rollout.name == "rollout/ep_rew_mean"
    assert rollout.reason.endswith(
        "a return or reward, no evaluation return or reward logged, of an episode, a mean"
    )


# ---------------------------------------------------------------------------- CleanRL


def write_cleanrl_job(job: Path, *, evaluate: bool) -> None:
    """torch's SummaryWriter in ``runs/<run_name>``, as cleanrl/ppo.py writes it; with
    ``evaluate``, the ``eval/episodic_return`` of cleanrl/dqn.py's evaluation after it."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(job / "runs" / "CartPole-v1__ppo__1__1764547200"))
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n|learning_rate|0.00025|")
    for i in (1, 2, 3):
        step = 512 * i
        writer.add_scalar("charts/episodic_return", 20.0 * i, step)
        writer.add_scalar("charts/episodic_length", 20.0 * i, step)
        writer.add_scalar("charts/learning_rate", 2.5e-4 / i, step)
        for name in (
            "value_loss",
            "policy_loss",
            "entropy",
            "old_approx_kl",
            "approx_kl",
            "clipfrac",
            "explained_variance",
        ):
            writer.add_scalar(f"losses/{name}", 1.0 / i, step)
        writer.add_scalar("charts/SPS", 900 + i, step)
    if evaluate:
        for idx, episodic_return in enumerate((30.0, 40.0)):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
    writer.close()


def test_cleanrl_is_reported_on_its_episodic_return(tmp_path: Path) -> None:
    """``charts/episodic_return`` over its length, SPS, losses and learning rate; the
    evaluation's ``eval/episodic_return`` when there is one."""
    write_cleanrl_job(app_job(tmp_path / "train"), evaluate=False)
    write_cleanrl_job(app_job(tmp_path / "eval"), evaluate=True)
    train = chosen(tmp_path / "train")
    assert len(train.logged) == 11 and "charts/SPS" in train.logged
    assert train.name == "charts/episodic_return"
    assert train.reason.endswith(
        "a return or reward, no evaluation return or reward logged, of an episode"
    )
    evaluated = chosen(tmp_path / "eval")
    assert evaluated.name == "eval/episodic_return"
    assert read_runs([tmp_path / "eval"]).runs[0].value(evaluated.name) == 40.0


# -------------------------------------------------------------------------- Lightning


@pytest.mark.parametrize("sep", ["_", "/"])
def test_lightning_is_reported_on_its_validation_reward(tmp_path: Path, sep: str) -> None:
    """Lightning's CSVLogger (``lightning_logs/version_0/metrics.csv``), with the names a
    LightningModule gives ``self.log``: ``val_reward`` (or ``val/reward``) over
    ``train_reward``, ``train_loss``, ``val_loss`` and ``epoch``."""
    from lightning.pytorch.loggers import CSVLogger

    logger = CSVLogger(str(app_job(tmp_path) / "logs"))
    for epoch in range(3):
        step = 10 * (epoch + 1)
        logger.log_metrics(
            {
                f"train{sep}loss": 1.0 / step,
                f"train{sep}reward": float(step),
                "epoch": float(epoch),
            },
            step=step,
        )
        logger.log_metrics(
            {f"val{sep}loss": 2.0 / step, f"val{sep}reward": 2.0 * step, "epoch": float(epoch)},
            step=step,
        )
    logger.save()
    metric = chosen(tmp_path)
    assert set(metric.logged) == {
        f"{p}{sep}{q}" for p in ("train", "val") for q in ("loss", "reward")
    } | {"epoch"}
    assert metric.name == f"val{sep}reward"


# ---------------------------------------------------------------------- the rule itself


def test_the_default_rule_ranks_names_of_other_loggers_and_spellings() -> None:
    """The rule on names alone: BenchMARL's wandb names (``/`` kept) and the per-agent
    names of a benchmark, Spinning Up's camelCase, Dreamer's per-step reward statistics
    beside its episode reward, a reward model's loss; ties in sorted order."""
    benchmarl = list(benchmarl_metrics(1))
    assert ranked_series(benchmarl)[:3] == [
        "eval/reward/episode_reward_mean",
        "eval/agents/reward/episode_reward_mean",
        "eval/reward/episode_reward_max",
    ]
    per_agent = [
        "eval/agent_0/reward/episode_reward_max",
        "eval/agents/reward/episode_reward_mean",
        "collection/agents/reward/episode_reward_mean",
        "eval/agent_0/reward/episode_reward_mean",
        "collection/reward/episode_reward_max",
    ]
    assert ranked_series(per_agent)[:2] == [
        "eval/agents/reward/episode_reward_mean",  # a group's over one agent's
        "eval/agent_0/reward/episode_reward_mean",  # a mean over a max
    ]
    spinning_up = ["AverageEpRet", "MaxEpRet", "StdTestEpRet", "AverageTestEpRet", "TestEpLen"]
    assert ranked_series(spinning_up)[0] == "AverageTestEpRet"
    dreamer = ["train/reward_mean", "train/reward_std", "train/episode_reward", "throughput/fps"]
    assert ranked_series(dreamer)[0] == "train/episode_reward"  # an episode's, not a step's
    assert ranked_series(["model/reward_loss", "train/loss", "charts/SPS"])[0] == "charts/SPS"
    assert not series_rank("eval/reward/episode_len_mean").reward  # a length
    assert series_rank("rollout/ep_rew_mean") == (True, False, True, 2, 2)
    assert ranked_series(["b", "a"]) == ["a", "b"]


def test_a_metric_named_on_the_command_line_rewrites_the_summary_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m rlsweep.report DIR --metric NAME`` rewrites summary.md (.csv, .json),
    report.md and report.html on NAME together (summary.md stayed on the sweep's end's
    metric before); a report of several sweeps, or written elsewhere, leaves each sweep's
    summary as it is."""
    import json

    sweep, other = tmp_path / "sweep", tmp_path / "other"
    for seed in range(2):
        write_cleanrl_job(app_job(sweep, seed), evaluate=True)
        write_cleanrl_job(app_job(other, seed), evaluate=False)
    summarize(sweep, echo=False)
    summarize(other, echo=False)
    assert json.loads((sweep / "summary.json").read_text())["metric"] == "eval/episodic_return"
    (sweep / ".rlsweep_summary.json").write_text("{}")  # an end of sweep's stamp

    assert main([str(sweep), "--metric", "charts/SPS"]) == 0
    assert f"Summary: {sweep / 'summary.md'}\n" in capsys.readouterr().out
    assert "Per group, `charts/SPS` over replicates (chosen with --metric; 11 other" in (
        (sweep / "summary.md").read_text()
    )
    assert json.loads((sweep / "summary.json").read_text())["metric"] == "charts/SPS"
    assert "Metric: `charts/SPS`, chosen with --metric;" in (sweep / "report.md").read_text()
    assert "<code>charts/SPS</code>, chosen with --metric;" in (sweep / "report.html").read_text()
    assert not (sweep / ".rlsweep_summary.json").exists()  # the next sweep's end writes both

    before = {d: (d / "summary.md").read_text() for d in (sweep, other)}
    assert main([str(sweep), "--metric", "losses/entropy", "--out", str(tmp_path / "out")]) == 0
    assert main([str(sweep), str(other), "--metric", "losses/entropy"]) == 0
    assert "Summary: " not in capsys.readouterr().out
    assert {d: (d / "summary.md").read_text() for d in (sweep, other)} == before
    assert main([str(sweep), "--metric", "losses/entropy", "--out", str(sweep)]) == 0
    assert "`losses/entropy` over replicates" in (sweep / "summary.md").read_text()
