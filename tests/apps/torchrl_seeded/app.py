"""Discrete SAC on CartPole, in the shape of TorchRL's sota-implementations/discrete_sac
(a third-party app: nothing here knows rlsweep). Its seed is ``env.seed``: it seeds torch,
numpy, the training env and the collector from it, as the published app does; it has its
own ``logger:`` section (TorchRL's CSVLogger by default) and returns nothing.

The helper functions are in the utils.py beside this script.
"""

from __future__ import annotations

import os
from typing import Any

import hydra
import numpy as np
import torch
import tqdm
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from torchrl._utils import timeit
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.objectives import group_optimizers
from torchrl.record.loggers import generate_exp_name, get_logger
from utils import (
    log_metrics,
    make_collector,
    make_environment,
    make_loss_module,
    make_optimizer,
    make_replay_buffer,
    make_sac_agent,
)

# ---- Test hooks: not in the published app. Two environment variables for rlsweep's tests.
# TEST_APP_FAIL="optim.lr=0.001,env.seed=2": raise after the first logged evaluation when
#   each listed item is one of the job's overrides as given (without '+'): a replicate
#   index as swept, not the seed the app may read there.
# TEST_APP_NONDETERMINISTIC=1: at the first optimisation step, add noise drawn from fresh OS
#   entropy to the critic's first weights: the logs differ run to run from that step on.


def _planned_failure(cfg: DictConfig) -> bool:
    wanted = os.environ.get("TEST_APP_FAIL")
    # The job's overrides as given (a replicate index, not the seed the app may read there).
    given = {str(o).lstrip("+") for o in HydraConfig.get().overrides.task}
    return wanted is not None and set(wanted.split(",")) <= given


def _fresh_entropy(module: torch.nn.Module) -> None:
    if os.environ.get("TEST_APP_NONDETERMINISTIC") == "1":
        noise = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little"))
        weight = next(module.parameters())
        with torch.no_grad():
            weight.add_(1e-3 * torch.randn(weight.shape, generator=noise))


# ---- end of the test hooks.


@hydra.main(version_base="1.3", config_path="", config_name="config")
def main(cfg: DictConfig) -> None:
    # Create logger
    exp_name = generate_exp_name("DiscreteSAC", cfg.logger.exp_name)
    logger = None
    if cfg.logger.backend:
        logger = get_logger(
            logger_type=cfg.logger.backend,
            logger_name="DiscreteSAC_logging",
            experiment_name=exp_name,
            wandb_kwargs={
                "mode": cfg.logger.mode,
                "config": dict(cfg),
                "project": cfg.logger.project_name,
                "group": cfg.logger.group_name,
            },
        )

    # Set seeds
    torch.manual_seed(cfg.env.seed)
    np.random.seed(cfg.env.seed)

    # Create environments, agent, loss, replay buffer, optimizers
    train_env, eval_env = make_environment(cfg)
    model = make_sac_agent(cfg, train_env, eval_env)
    loss_module, target_net_updater = make_loss_module(cfg, model)
    replay_buffer = make_replay_buffer(cfg.optim.batch_size, cfg.replay_buffer.size)
    optimizer = group_optimizers(*make_optimizer(cfg, loss_module))

    def update(sampled_tensordict: Any) -> Any:
        optimizer.zero_grad(set_to_none=True)
        loss_out = loss_module(sampled_tensordict)
        actor_loss, q_loss, alpha_loss = (
            loss_out["loss_actor"],
            loss_out["loss_qvalue"],
            loss_out["loss_alpha"],
        )
        (q_loss + actor_loss + alpha_loss).backward()
        optimizer.step()
        target_net_updater.step()
        return loss_out.detach()

    # Create off-policy collector
    collector = make_collector(cfg, train_env, model[0])

    # Main loop
    collected_frames = 0
    pbar = tqdm.tqdm(total=cfg.collector.total_frames)
    init_random_frames = cfg.collector.init_random_frames
    num_updates = int(cfg.collector.frames_per_batch * cfg.optim.utd_ratio)
    eval_rollout_steps = cfg.env.max_episode_steps
    eval_iter = cfg.logger.eval_iter
    frames_per_batch = cfg.collector.frames_per_batch
    first_update = True

    c_iter = iter(collector)
    total_iter = len(collector)
    for i in range(total_iter):
        timeit.printevery(1000, total_iter, erase=True)
        with timeit("collecting"):
            collected_data = next(c_iter)

        # Update weights of the inference policy
        collector.update_policy_weights_()
        current_frames = collected_data.numel()
        pbar.update(current_frames)
        collected_data = collected_data.reshape(-1)
        with timeit("rb - extend"):
            replay_buffer.extend(collected_data)
        collected_frames += current_frames

        # Optimization steps
        if collected_frames >= init_random_frames:
            if first_update:
                _fresh_entropy(loss_module.qvalue_network_params)
                first_update = False
            tds: list[Any] = []
            for _ in range(num_updates):
                with timeit("rb - sample"):
                    sampled_tensordict = replay_buffer.sample()
                with timeit("update"):
                    loss_out = update(sampled_tensordict).clone()
                tds.append(loss_out)
            losses: Any = torch.stack(tds).mean()

        # Logging
        episode_end = (
            collected_data["next", "done"]
            if collected_data["next", "done"].any()
            else collected_data["next", "truncated"]
        )
        episode_rewards = collected_data["next", "episode_reward"][episode_end]

        metrics_to_log: dict[str, Any] = {}
        if len(episode_rewards) > 0:
            episode_length = collected_data["next", "step_count"][episode_end]
            metrics_to_log["train/reward"] = episode_rewards.mean().item()
            metrics_to_log["train/episode_length"] = episode_length.sum().item() / len(
                episode_length
            )
        if collected_frames >= init_random_frames:
            metrics_to_log["train/q_loss"] = losses["loss_qvalue"]
            metrics_to_log["train/a_loss"] = losses["loss_actor"]
            metrics_to_log["train/alpha_loss"] = losses["loss_alpha"]

        # Evaluation
        prev_test_frame = ((i - 1) * frames_per_batch) // eval_iter
        cur_test_frame = (i * frames_per_batch) // eval_iter
        final = current_frames >= collector.total_frames
        if (i >= 1 and (prev_test_frame < cur_test_frame)) or final:
            with (
                set_exploration_type(ExplorationType.DETERMINISTIC),
                torch.no_grad(),
                timeit("eval"),
            ):
                eval_rollout = eval_env.rollout(
                    eval_rollout_steps,
                    model[0],
                    auto_cast_to_device=True,
                    break_when_any_done=True,
                )
                eval_reward = eval_rollout["next", "reward"].sum(-2).mean().item()
                metrics_to_log["eval/reward"] = eval_reward
        if logger is not None:
            metrics_to_log.update(timeit.todict(prefix="time"))
            # tqdm has no rate before its first 0.1 s (a short first batch): TorchRL's own app
            # would hand None to its CSV logger there.
            if pbar.format_dict["rate"] is not None:
                metrics_to_log["time/speed"] = pbar.format_dict["rate"]
            log_metrics(logger, metrics_to_log, collected_frames)
        if "eval/reward" in metrics_to_log and _planned_failure(cfg):
            raise RuntimeError(f"TEST_APP_FAIL: planned failure at frame {collected_frames}")

    collector.shutdown()
    if not eval_env.is_closed:
        eval_env.close()
    if not train_env.is_closed:
        train_env.close()


if __name__ == "__main__":
    main()
