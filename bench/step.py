"""Training step: one PPO gradient step and one A2C update, rlsweep against plain torch.

    nice -n 19 python bench/step.py        # --updates N (per cell), writes Markdown to stdout

Times the agents' own update functions (``ppo_update``, ``a2c_update``) on the preset
settings, one torch thread, against the same step written plainly in torch the way
Stable-Baselines3 writes it (``nn.Sequential`` actor and critic, ``torch.optim``,
``torch.distributions.Categorical``, ``zero_grad`` / ``backward`` / ``clip_grad_norm_``
/ ``step``): the anchor.

- PPO (rl-baselines3-zoo CartPole-v1): a 256-sample batch from a real rollout of the
  preset (8 envs x 32 steps, so one minibatch of 256), separate 64-64 tanh actor and
  critic, Adam (eps 1e-5), max grad norm 0.5, clip range 0.2, advantages standardised.
  One timed update is ``n_epochs`` (20) gradient steps on it, as a job's update runs
  them, including the update's diagnostics; the cell is the median update / 20.
- A2C (SB3 defaults, 8 envs x 5 steps): one update = one RMSprop step on the 40
  transitions of a rollout, with its loss statistics.

Updates of the two implementations alternate (rlsweep, anchor, rlsweep, ...), each
starting from the same parameters and optimiser state, so a change of machine load hits
both; the ratio anchor / rlsweep is the figure to read.
"""

from __future__ import annotations

import argparse
import copy
import platform
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import figures  # bench/figures.py
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rlsweep.agents import a2c, ppo
from rlsweep.agents.base import AgentContext
from rlsweep.agents.networks import Layer
from rlsweep.agents.onpolicy import OnPolicyAgent, OnPolicyConfig
from rlsweep.agents.rollout import RolloutBatch
from rlsweep.config import EnvConfig
from rlsweep.envs import make_vector_env, seed_vector_env
from rlsweep.numerics import cpu
from rlsweep.threads import limit_blas

Update = Callable[[], None]
# (one update, a function that puts the parameters and optimiser state back as they were)
Plain = tuple[Update, Callable[[], None]]


def preset_agent(module: object, config: OnPolicyConfig) -> OnPolicyAgent[OnPolicyConfig]:
    """An rlsweep agent on CartPole-v1 after two rollouts (a realistic network and batch)."""
    envs = make_vector_env(EnvConfig(id="CartPole-v1"), config.n_envs, snapshots=False)
    obs = seed_vector_env(envs, list(range(config.n_envs)), None)
    build = module.build  # type: ignore[attr-defined]
    agent: OnPolicyAgent[OnPolicyConfig] = build(
        config, AgentContext(envs, obs, 100_000, np.random.default_rng(0))
    )
    agent.train_iteration()
    agent.collector.collect()
    return agent


def full_batch(agent: OnPolicyAgent[OnPolicyConfig], size: int) -> RolloutBatch:
    """The last rollout's batch, cycled to exactly ``size`` transitions (autoreset slots
    are left out of a batch, so a rollout holds a few fewer than n_steps * n_envs)."""
    batch = agent.collector.buffer.batch(agent.config.gamma, agent.config.gae_lambda)
    index = np.arange(size) % batch.obs.shape[0]
    return RolloutBatch(*(x[index] for x in batch))


class Tensors(NamedTuple):
    """A rollout batch as torch tensors (the same memory), for the plain torch steps."""

    obs: Tensor
    actions: Tensor
    log_probs: Tensor
    values: Tensor
    advantages: Tensor
    returns: Tensor


def as_tensors(batch: RolloutBatch) -> Tensors:
    return Tensors(*(torch.from_numpy(x) for x in batch))


class PlainActorCritic(nn.Module):
    """Stable-Baselines3's MlpPolicy for discrete actions, written plainly."""

    def __init__(self, agent: OnPolicyAgent[OnPolicyConfig]) -> None:
        super().__init__()

        def linear(source: Layer) -> nn.Linear:
            layer = nn.Linear(source.weight.shape[1], source.weight.shape[0])
            with torch.no_grad():
                layer.weight.copy_(torch.from_numpy(source.weight))
                layer.bias.copy_(torch.from_numpy(source.bias))
            return layer

        def mlp(source: list[Layer]) -> nn.Sequential:
            layers = [linear(layer) for layer in source]
            return nn.Sequential(layers[0], nn.Tanh(), layers[1], nn.Tanh(), layers[2])

        self.actor = mlp(agent.model.actor)
        self.critic = mlp(agent.model.critic)

    def evaluate_actions(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        dist = torch.distributions.Categorical(logits=self.actor(obs))
        return self.critic(obs).flatten(), dist.log_prob(actions), dist.entropy()


def plain_ppo(agent: OnPolicyAgent[OnPolicyConfig], batch: RolloutBatch) -> Plain:
    """SB3's PPO train loop body (one minibatch per epoch), without its logging."""
    config = agent.config
    policy = PlainActorCritic(agent)
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate, eps=1e-5)
    clip = 0.2
    tensors = as_tensors(batch)

    def update() -> None:
        for _epoch in range(config.n_epochs):  # type: ignore[attr-defined]
            values, log_prob, entropy = policy.evaluate_actions(tensors.obs, tensors.actions)
            advantages = tensors.advantages
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            ratio = torch.exp(log_prob - tensors.log_probs)
            loss_1 = advantages * ratio
            loss_2 = advantages * torch.clamp(ratio, 1 - clip, 1 + clip)
            policy_loss = -torch.min(loss_1, loss_2).mean()
            value_loss = F.mse_loss(tensors.returns, values)
            loss = policy_loss + config.ent_coef * -torch.mean(entropy)
            loss = loss + config.vf_coef * value_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
            optimizer.step()

    return update, restorer(policy, optimizer)


def plain_a2c(agent: OnPolicyAgent[OnPolicyConfig], batch: RolloutBatch) -> Plain:
    """SB3's A2C train step, without its logging."""
    config = agent.config
    policy = PlainActorCritic(agent)
    optimizer = torch.optim.RMSprop(
        policy.parameters(), lr=config.learning_rate, alpha=0.99, eps=1e-5
    )
    tensors = as_tensors(batch)

    def update() -> None:
        values, log_prob, entropy = policy.evaluate_actions(tensors.obs, tensors.actions)
        policy_loss = -(tensors.advantages * log_prob).mean()
        value_loss = F.mse_loss(tensors.returns, values)
        loss = policy_loss + config.ent_coef * -torch.mean(entropy) + config.vf_coef * value_loss
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
        optimizer.step()
        torch.stack([policy_loss, value_loss, entropy.mean()]).tolist()

    return update, restorer(policy, optimizer)


def ours(agent: OnPolicyAgent[OnPolicyConfig], batch: RolloutBatch) -> Update:
    """The agent's own update function on ``batch``."""
    rng = np.random.default_rng(0)

    def update() -> None:
        agent.update(agent.network, agent.optimizer, batch, agent.config, 1.0, rng)

    return update


def restorer(*objects: object) -> Callable[[], None]:
    """Puts each object's state (a module's or an optimiser's) back as it is now."""
    states = [copy.deepcopy(o.state_dict()) for o in objects]  # type: ignore[attr-defined]

    def restore() -> None:
        for o, state in zip(objects, states, strict=True):
            o.load_state_dict(copy.deepcopy(state))  # type: ignore[attr-defined]

    return restore


def time_pair(pair: dict[str, tuple[Update, Callable[[], None]]], updates: int) -> dict[str, float]:
    """Median seconds per update of each implementation, alternating, each timed
    update from the same starting state."""
    times: dict[str, list[float]] = {name: [] for name in pair}
    for _ in range(updates):
        for name, (update, restore) in pair.items():
            restore()
            start = time.perf_counter()
            update()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def cases(updates: int) -> list[tuple[str, int, dict[str, float]]]:
    """``(label, gradient steps per update, median seconds per update by implementation)``."""
    rows = []
    for label, module, size, plain in (
        ("PPO step (batch 256, Adam)", ppo, 256, plain_ppo),
        ("A2C update (batch 40, RMSprop)", a2c, 40, plain_a2c),
    ):
        agent = preset_agent(module, module.Config(n_envs=8))
        batch = full_batch(agent, size)
        steps = getattr(agent.config, "n_epochs", 1)
        pair = {
            "rlsweep": (ours(agent, batch), restorer(agent.model, agent.optimizer)),
            "plain torch": plain(agent, batch),
        }
        time_pair(pair, max(3, updates // 20))  # warm-up
        rows.append((label, steps, time_pair(pair, updates)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--updates", type=int, default=300, help="timed updates per cell")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    limit_blas(1)  # numpy's products on one thread, as in a job
    rows = cases(args.updates)
    print(f"- Machine: {cpu()['model']}, {platform.system()} {platform.release()}, 1 torch thread")
    print(
        f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; python {platform.python_version()}, "
        f"torch {torch.__version__}; median of {args.updates} updates per cell"
    )
    print()
    print("| step | rlsweep ms/step | plain torch ms/step | rlsweep / plain torch |")
    print("| --- | ---: | ---: | ---: |")
    for label, steps, medians in rows:
        mine, plain = medians["rlsweep"] / steps * 1e3, medians["plain torch"] / steps * 1e3
        print(f"| {label} | {mine:.3f} | {plain:.3f} | {mine / plain:.2f}x |")
    figures.write(args.json, [figure(*row) for row in rows])


# Goal 1 (issue 19): PPO's step at most 0.5 ms; A2C's update 3x faster than before, when it
# took 0.48x plain torch's time (2026-11-23): so at most 0.16x, a ratio that holds across
# machines as an absolute time does not.
PPO_GOAL_MS = 0.5
A2C_GOAL_RATIO = 0.16


def figure(label: str, steps: int, medians: dict[str, float]) -> figures.Figure:
    """One row as a figure for ``bench/all.py``."""
    mine, plain = medians["rlsweep"] / steps * 1e3, medians["plain torch"] / steps * 1e3
    ppo = label.startswith("PPO")
    return figures.Figure(
        bench="step",
        figure=f"{label} (ms)",
        rlsweep=mine,
        anchor=plain,
        anchor_name="plain torch",
        lower_is_better=True,
        goal=f"<= {PPO_GOAL_MS} ms" if ppo else f"ratio <= {A2C_GOAL_RATIO}",
        met=mine <= PPO_GOAL_MS if ppo else mine / plain <= A2C_GOAL_RATIO,
    )


if __name__ == "__main__":
    main()
