"""PPO on a discrete-action gymnasium env, CleanRL style, under rlsweep.

One file, readable top to bottom, as CleanRL's ``ppo.py``; what rlsweep adds is a dozen
lines: seeds from the job's identity (``job.seeds``), metrics (``job.log``), a checkpoint
it resumes from bit for bit (``job.checkpoint`` / ``job.restore``), and the result it
returns. Run a grid:

    python examples/cleanrl_ppo/ppo.py -m learning_rate=2.5e-4,1e-3 'seed=range(8)'
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import hydra
import numpy as np
import torch
from omegaconf import DictConfig
from torch import nn
from torch.distributions import Categorical

import rlsweep


def layer(i: int, o: int, std: float = float(np.sqrt(2))) -> nn.Linear:
    linear = nn.Linear(i, o)
    nn.init.orthogonal_(linear.weight, std)
    nn.init.constant_(linear.bias, 0.0)
    return linear


class Agent(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, 1.0)
        )
        self.actor = nn.Sequential(
            layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, n_actions, 0.01)
        )

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def policy(self, x: torch.Tensor) -> Categorical:
        return Categorical(logits=self.actor(x))


def evaluate(agent: Agent, cfg: DictConfig, seeds: list[int]) -> float:
    """Mean return of the greedy policy, one episode per seed."""
    returns = []
    env = gym.make(cfg.env_id)
    for s in seeds:
        obs, _ = env.reset(seed=s)
        done, total = False, 0.0
        while not done:
            with torch.no_grad():
                action = agent.actor(torch.as_tensor(obs, dtype=torch.float32)).argmax()
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def fresh_state(cfg: DictConfig, job: rlsweep.Job) -> dict[str, Any]:
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(cfg.env_id) for _ in range(cfg.num_envs)])
    # One seed per sub-env, shared across learning rates at a replicate (common random
    # numbers); never seed + i.
    obs, _ = envs.reset(seed=job.seeds.seeds("env", cfg.num_envs, shared=True))
    envs.action_space.seed(job.seeds.seed("action_space"))
    agent = Agent(int(np.prod(envs.single_observation_space.shape)), envs.single_action_space.n)
    return {
        "iteration": 0,
        "envs": envs,
        "obs": torch.as_tensor(obs, dtype=torch.float32),
        "done": torch.zeros(cfg.num_envs),
        "episode_return": np.zeros(cfg.num_envs),  # of the episodes under way
        "agent": agent,
        "optimizer": torch.optim.Adam(agent.parameters(), lr=cfg.learning_rate, eps=1e-5),
    }


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
@rlsweep.task
def main(cfg: DictConfig) -> dict[str, float]:
    job = rlsweep.current()  # torch's and numpy's global RNGs are already seeded from it
    state = job.restore() or fresh_state(cfg, job)
    envs, agent, optimizer = state["envs"], state["agent"], state["optimizer"]
    n, e = cfg.num_steps, cfg.num_envs
    batch_size = n * e
    minibatch = batch_size // cfg.num_minibatches
    iterations = cfg.total_timesteps // batch_size
    obs_shape = envs.single_observation_space.shape
    observations = torch.zeros((n, e, *obs_shape))
    actions, logprobs, rewards = torch.zeros((n, e)), torch.zeros((n, e)), torch.zeros((n, e))
    dones, values = torch.zeros((n, e)), torch.zeros((n, e))
    episode_return, finished = state["episode_return"], []

    while state["iteration"] < iterations:
        if cfg.anneal_lr:
            optimizer.param_groups[0]["lr"] = cfg.learning_rate * (
                1.0 - state["iteration"] / iterations
            )
        # Collect a rollout (gymnasium 1.x autoresets a sub-env on the step after its end).
        for t in range(n):
            observations[t], dones[t] = state["obs"], state["done"]
            with torch.no_grad():
                dist = agent.policy(state["obs"])
                action = dist.sample()
                logprobs[t], values[t] = dist.log_prob(action), agent.value(state["obs"])
            actions[t] = action
            obs, reward, terminated, truncated, _ = envs.step(action.numpy())
            end = np.logical_or(terminated, truncated)
            rewards[t] = torch.as_tensor(reward, dtype=torch.float32) * torch.as_tensor(
                ~state["done"].bool()
            )
            episode_return += np.where(state["done"].numpy() > 0, 0.0, reward)
            for i in np.flatnonzero(end & (state["done"].numpy() == 0)):
                finished.append(float(episode_return[i]))
                episode_return[i] = 0.0
            state["obs"] = torch.as_tensor(obs, dtype=torch.float32)
            state["done"] = torch.as_tensor(end, dtype=torch.float32)

        # Generalised advantage estimation (a reset step, done[t], carries no reward).
        with torch.no_grad():
            next_value = agent.value(state["obs"])
            advantages, last = torch.zeros((n, e)), torch.zeros(e)
            for t in reversed(range(n)):
                nonterminal = 1.0 - (state["done"] if t == n - 1 else dones[t + 1])
                following = next_value if t == n - 1 else values[t + 1]
                delta = rewards[t] + cfg.gamma * following * nonterminal - values[t]
                last = delta + cfg.gamma * cfg.gae_lambda * nonterminal * last
                advantages[t] = last
            returns = advantages + values

        # Clipped-surrogate updates over shuffled minibatches (the job's own Generator).
        flat = {
            "obs": observations.reshape(batch_size, *obs_shape),
            "act": actions.reshape(-1),
            "logp": logprobs.reshape(-1),
            "adv": advantages.reshape(-1),
            "ret": returns.reshape(-1),
        }
        order_rng = job.seeds.generator("minibatches", state["iteration"])
        for _ in range(cfg.update_epochs):
            order = torch.as_tensor(order_rng.permutation(batch_size))
            for start in range(0, batch_size, minibatch):
                idx = order[start : start + minibatch]
                dist = agent.policy(flat["obs"][idx])
                ratio = (dist.log_prob(flat["act"][idx]) - flat["logp"][idx]).exp()
                adv = flat["adv"][idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(
                    -adv * ratio, -adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)
                ).mean()
                v_loss = 0.5 * ((agent.value(flat["obs"][idx]) - flat["ret"][idx]) ** 2).mean()
                loss = pg_loss - cfg.ent_coef * dist.entropy().mean() + cfg.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), cfg.max_grad_norm)
                optimizer.step()

        state["iteration"] += 1
        step = state["iteration"] * batch_size
        job.log(step, episodic_return=float(np.mean(finished)) if finished else float("nan"))
        finished = []
        job.checkpoint(state, every_s=cfg.checkpoint_every_s)

    envs.close()
    final = evaluate(agent, cfg, job.seeds.seeds("eval_episode", cfg.eval_episodes, shared=True))
    return {"return": final}


if __name__ == "__main__":
    main()
