"""REINFORCE on CartPole written with hydra-zen (a third-party app: nothing here knows
rlsweep). Its configs are built with ``builds`` and registered with ``store``; there is no
YAML. Its ``seed`` seeds torch and the envs' first resets; it logs evaluation returns with
torch's SummaryWriter (``runs/<date>_<host>/``) and returns the last evaluation's mean return.
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from hydra.conf import HydraConf, JobConf
from hydra.core.hydra_config import HydraConfig
from hydra_zen import builds, store, zen
from omegaconf import DictConfig
from torch import nn
from torch.utils.tensorboard import SummaryWriter

# ---- Test hooks: not in a published app. Two environment variables for rlsweep's tests.
# TEST_APP_FAIL="optim.lr=0.01,seed=2": raise after the first logged evaluation when
#   each listed item is one of the job's overrides as given (without '+'): a replicate
#   index as swept, not the seed the app may read there.
# TEST_APP_NONDETERMINISTIC=1: before the first episode, add noise drawn from fresh OS entropy
#   to the policy's first weights: the logs differ run to run from the first step on.


def _planned_failure(cfg: DictConfig) -> bool:
    wanted = os.environ.get("TEST_APP_FAIL")
    # The job's overrides as given (a replicate index, not the seed the app may read there).
    given = {str(o).lstrip("+") for o in HydraConfig.get().overrides.task}
    return wanted is not None and set(wanted.split(",")) <= given


def _fresh_entropy(module: nn.Module) -> None:
    if os.environ.get("TEST_APP_NONDETERMINISTIC") == "1":
        noise = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little"))
        weight = next(module.parameters())
        with torch.no_grad():
            weight.add_(1e-3 * torch.randn(weight.shape, generator=noise))


# ---- end of the test hooks.


def make_policy(obs_dim: int, n_actions: int, hidden: int = 32) -> nn.Module:
    return nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, n_actions))


def run_episode(env: gym.Env, policy: nn.Module, greedy: bool, seed: int | None = None) -> Any:
    """One episode: its return, and the log-probabilities and rewards of its steps."""
    obs, _ = env.reset(seed=seed)
    log_probs, rewards, done = [], [], False
    while not done:
        logits = policy(torch.as_tensor(obs, dtype=torch.float32))
        dist = torch.distributions.Categorical(logits=logits)
        action = logits.argmax() if greedy else dist.sample()
        log_probs.append(dist.log_prob(action))
        obs, reward, terminated, truncated, _ = env.step(int(action))
        rewards.append(float(reward))
        done = terminated or truncated
    return sum(rewards), log_probs, rewards


def evaluate(env: gym.Env, policy: nn.Module, episodes: int, seed: int | None) -> float:
    with torch.no_grad():
        returns = [
            run_episode(env, policy, True, seed if i == 0 else None)[0] for i in range(episodes)
        ]
    return float(np.mean(returns))


def reinforce_loss(
    log_probs: list[torch.Tensor], rewards: list[float], gamma: float
) -> torch.Tensor:
    returns, running = [], 0.0
    for reward in reversed(rewards):
        running = reward + gamma * running
        returns.append(running)
    target = torch.tensor(returns[::-1])
    target = (target - target.mean()) / (target.std() + 1e-8) if len(returns) > 1 else target
    return -(torch.stack(log_probs) * target).sum()


def train(
    seed: int,
    env_id: str,
    policy: partial[nn.Module],
    optim: partial[torch.optim.Optimizer],
    episodes: int = 40,
    eval_every: int = 10,
    eval_episodes: int = 3,
    gamma: float = 0.99,
    zen_cfg: DictConfig | None = None,
) -> float:
    torch.manual_seed(seed)
    env, eval_env = gym.make(env_id), gym.make(env_id)
    obs_space: Any = env.observation_space
    action_space: Any = env.action_space
    net = policy(obs_space.shape[0], action_space.n)
    optimizer = optim(net.parameters())
    _fresh_entropy(net)
    writer = SummaryWriter()
    steps, last = 0, float("nan")
    for episode in range(1, episodes + 1):
        ret, log_probs, rewards = run_episode(env, net, False, seed if episode == 1 else None)
        steps += len(rewards)
        loss = reinforce_loss(log_probs, rewards, gamma)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        writer.add_scalar("train/episode_return", ret, steps)
        writer.add_scalar("train/loss", loss.item(), steps)
        if episode % eval_every == 0:
            last = evaluate(
                eval_env, net, eval_episodes, seed + 1 if episode == eval_every else None
            )
            writer.add_scalar("eval/return", last, steps)
            writer.flush()
            if zen_cfg is not None and _planned_failure(zen_cfg):
                raise RuntimeError(f"TEST_APP_FAIL: planned failure at step {steps}")
    writer.close()
    return last


store(HydraConf(job=JobConf(chdir=True)))
store(
    train,
    seed=0,
    env_id="CartPole-v1",
    policy=builds(make_policy, hidden=32, zen_partial=True),
    optim=builds(torch.optim.Adam, lr=0.01, zen_partial=True),
    name="config",
    populate_full_signature=True,
    zen_exclude=["zen_cfg"],  # hydra-zen passes the config itself to a `zen_cfg` parameter
)

if __name__ == "__main__":
    store.add_to_hydra_store()
    zen(train).hydra_main(config_name="config", config_path=None, version_base="1.3")
