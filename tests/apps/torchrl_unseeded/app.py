"""DQN on CartPole, in the shape of TorchRL's sota-implementations/dqn/dqn_cartpole.py (a
third-party app: nothing here knows rlsweep). It has no seed key and seeds nothing (its
envs reset from fresh OS entropy, its networks start from torch's default generator), has
its own ``logger:`` section (TorchRL's TensorboardLogger by default) and returns nothing.
"""

from __future__ import annotations

import os
from typing import Any

import hydra
import torch.nn
import torch.optim
import tqdm
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from tensordict.nn import TensorDictSequential
from torchrl._utils import timeit
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.envs import ExplorationType, set_exploration_type
from torchrl.modules import EGreedyModule
from torchrl.objectives import DQNLoss, HardUpdate
from torchrl.record.loggers import generate_exp_name, get_logger
from utils_cartpole import eval_model, make_dqn_model, make_env

torch.set_float32_matmul_precision("high")

# ---- Test hooks: not in the published app. Two environment variables for rlsweep's tests.
# TEST_APP_FAIL="optim.lr=0.001,seed=2": raise after the first logged evaluation when
#   each listed item is one of the job's overrides as given (without '+'): a replicate
#   index as swept, not the seed the app may read there.
# TEST_APP_NONDETERMINISTIC=1: at the first optimisation step, add noise drawn from fresh OS
#   entropy to the Q network's first weights: the logs differ run to run from that step on.


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


@hydra.main(config_path="", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    device = torch.device(cfg.device)

    # Make the components
    model = make_dqn_model(cfg.env.env_name, device=device)
    greedy_module = EGreedyModule(
        annealing_num_steps=cfg.collector.annealing_frames,
        eps_init=cfg.collector.eps_start,
        eps_end=cfg.collector.eps_end,
        spec=model.spec,
        device=device,
    )
    model_explore = TensorDictSequential(model, greedy_module)

    # Create the replay buffer
    replay_buffer = TensorDictReplayBuffer(
        pin_memory=False,
        storage=LazyTensorStorage(max_size=cfg.buffer.buffer_size, device=device),
        batch_size=cfg.buffer.batch_size,
    )

    # Create the loss module
    loss_module = DQNLoss(value_network=model, loss_function="l2", delay_value=True)
    loss_module.make_value_estimator(gamma=cfg.loss.gamma, device=device)
    loss_module = loss_module.to(device)
    target_net_updater = HardUpdate(
        loss_module, value_network_update_interval=cfg.loss.hard_update_freq
    )

    # Create the optimizer
    optimizer = torch.optim.Adam(loss_module.parameters(), lr=cfg.optim.lr)

    # Create the logger
    logger = None
    if cfg.logger.backend:
        exp_name = generate_exp_name("DQN", f"CartPole_{cfg.env.env_name}")
        logger = get_logger(
            cfg.logger.backend,
            logger_name="dqn",
            experiment_name=exp_name,
            wandb_kwargs={
                "config": dict(cfg),
                "project": cfg.logger.project_name,
                "group": cfg.logger.group_name,
            },
        )

    # Create the test environment
    test_env = make_env(cfg.env.env_name, "cpu")

    def update(sampled_tensordict: Any) -> torch.Tensor:
        loss_td = loss_module(sampled_tensordict)
        q_loss = loss_td["loss"]
        optimizer.zero_grad()
        q_loss.backward()
        optimizer.step()
        target_net_updater.step()
        return q_loss.detach()

    # Create the collector
    collector = Collector(
        create_env_fn=make_env(cfg.env.env_name, "cpu"),
        policy=model_explore,
        frames_per_batch=cfg.collector.frames_per_batch,
        total_frames=cfg.collector.total_frames,
        device="cpu",
        storing_device="cpu",
        max_frames_per_traj=-1,
        init_random_frames=cfg.collector.init_random_frames,
    )

    # Main loop
    collected_frames = 0
    num_updates = cfg.loss.num_updates
    batch_size = cfg.buffer.batch_size
    test_interval = cfg.logger.test_interval
    num_test_episodes = cfg.logger.num_test_episodes
    frames_per_batch = cfg.collector.frames_per_batch
    pbar = tqdm.tqdm(total=cfg.collector.total_frames)
    init_random_frames = cfg.collector.init_random_frames
    q_losses = torch.zeros(num_updates, device=device)
    first_update = True

    c_iter = iter(collector)
    total_iter = len(collector)
    for i in range(total_iter):
        timeit.printevery(1000, total_iter, erase=True)
        with timeit("collecting"):
            data = next(c_iter)

        metrics_to_log: dict[str, Any] = {}
        pbar.update(data.numel())
        data = data.reshape(-1)
        current_frames = data.numel()

        with timeit("rb - extend"):
            replay_buffer.extend(data)
        collected_frames += current_frames
        greedy_module.step(current_frames)

        # Get and log training rewards and episode lengths
        episode_rewards = data["next", "episode_reward"][data["next", "done"]]
        if len(episode_rewards) > 0:
            episode_reward_mean = episode_rewards.mean().item()
            episode_length = data["next", "step_count"][data["next", "done"]]
            episode_length_mean = episode_length.sum().item() / len(episode_length)
            metrics_to_log.update(
                {
                    "train/episode_reward": episode_reward_mean,
                    "train/episode_length": episode_length_mean,
                }
            )

        if collected_frames < init_random_frames:
            if logger:
                logger.log_metrics(metrics_to_log, step=collected_frames)
            continue

        # optimization steps
        if first_update:
            _fresh_entropy(model)
            first_update = False
        for j in range(num_updates):
            with timeit("rb - sample"):
                sampled_tensordict = replay_buffer.sample(batch_size)
                sampled_tensordict = sampled_tensordict.to(device)
            with timeit("update"):
                q_loss = update(sampled_tensordict)
            q_losses[j].copy_(q_loss)

        # Get and log q-values, loss, epsilon, sampling time and training time
        metrics_to_log.update(
            {
                "train/q_values": (data["action_value"] * data["action"]).sum().item()
                / frames_per_batch,
                "train/q_loss": q_losses.mean().item(),
                "train/epsilon": greedy_module.eps,
            }
        )

        # Get and log evaluation rewards and eval time
        with (
            torch.no_grad(),
            set_exploration_type(ExplorationType.DETERMINISTIC),
            timeit("eval"),
        ):
            prev_test_frame = ((i - 1) * frames_per_batch) // test_interval
            cur_test_frame = (i * frames_per_batch) // test_interval
            final = current_frames >= collector.total_frames
            if (i >= 1 and (prev_test_frame < cur_test_frame)) or final:
                model.eval()
                test_rewards = eval_model(model, test_env, num_test_episodes)
                model.train()
                metrics_to_log.update({"eval/reward": test_rewards})

        # Log all the information
        if logger:
            metrics_to_log.update(timeit.todict(prefix="time"))
            # tqdm has no rate before its first 0.1 s (a short first batch): TorchRL's own app
            # would hand None to its CSV logger there.
            if pbar.format_dict["rate"] is not None:
                metrics_to_log["time/speed"] = pbar.format_dict["rate"]
            logger.log_metrics(metrics_to_log, step=collected_frames)
        if "eval/reward" in metrics_to_log and _planned_failure(cfg):
            raise RuntimeError(f"TEST_APP_FAIL: planned failure at frame {collected_frames}")

        # update weights of the inference policy
        collector.update_policy_weights_()

    collector.shutdown()
    if not test_env.is_closed:
        test_env.close()


if __name__ == "__main__":
    main()
