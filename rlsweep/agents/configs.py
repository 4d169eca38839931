"""The built-in agents' settings: each algorithm's ``Config`` and the action spaces it
supports, free of torch.

The sweep's process validates every job before any starts (rlsweep.config); importing the
algorithms themselves would cost it torch's import (seconds) for nothing. Each algorithm
module re-exports its ``Config`` and ``ACTION_SPACES`` from here, so it offers what the
agent contract (rlsweep/agents/base.py) asks of it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rlsweep.agents.base import (
    AT_LEAST_ONE,
    NON_NEGATIVE,
    POSITIVE,
    UNIT,
    AgentConfig,
    Bound,
)

SCHEDULES = ("constant", "linear")

# The action-space kinds each algorithm supports.
ON_POLICY_SPACES = frozenset({"discrete", "continuous"})
DQN_SPACES = frozenset({"discrete"})
ES_SPACES = frozenset({"discrete", "continuous"})


def check_schedule(schedule: str) -> None:
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")


@dataclass
class OnPolicyConfig(AgentConfig):
    """Fields of every on-policy actor-critic agent (defaults: Stable-Baselines3 A2C)."""

    # gSDE's options, at the values that keep the plain Gaussian policy (see AgentConfig).
    ADDED_LATER: ClassVar[dict[str, Any]] = {
        "log_std_init": 0.0,
        "use_sde": False,
        "sde_sample_freq": -1,
    }
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "n_steps": AT_LEAST_ONE,
        "gamma": UNIT,
        "gae_lambda": UNIT,
        "learning_rate": POSITIVE,
        "ent_coef": NON_NEGATIVE,
        "vf_coef": NON_NEGATIVE,
        "max_grad_norm": POSITIVE,
    }

    # Vector steps per rollout; a rollout holds n_steps * n_envs transitions.
    n_steps: int = 5
    # Discount factor, in [0, 1].
    gamma: float = 0.99
    # GAE lambda, in [0, 1]: 1 is the Monte-Carlo return, 0 the one-step TD error.
    gae_lambda: float = 1.0
    # Optimiser learning rate (its initial value under a linear schedule), > 0.
    learning_rate: float = 7e-4
    # Schedule of the learning rate (and of PPO's clip range): constant or linear (decays to 0).
    schedule: str = "constant"
    # Weight of the entropy bonus in the loss, >= 0.
    ent_coef: float = 0.0
    # Weight of the value loss in the loss, >= 0.
    vf_coef: float = 0.5
    # Global gradient-norm clipping threshold, > 0.
    max_grad_norm: float = 0.5
    # Standardise advantages (per minibatch) before the policy loss.
    normalize_advantage: bool = False
    # Normalise observations by running mean/std (clipped to +-10), as SB3 VecNormalize.
    normalize_obs: bool = False
    # Scale rewards by the running std of the discounted return (clipped to +-10).
    normalize_reward: bool = False
    # Initial log std of the Gaussian policy (of every gSDE noise-matrix entry with use_sde).
    log_std_init: float = 0.0
    # Explore with generalised State-Dependent Exploration (gSDE; continuous actions only).
    use_sde: bool = False
    # With use_sde: resample the noise matrices every N vector steps (-1: once per rollout).
    sde_sample_freq: int = -1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_schedule(self.schedule)
        if not math.isfinite(self.log_std_init):
            raise ValueError(f"log_std_init must be finite, got {self.log_std_init}")
        if self.sde_sample_freq != -1 and self.sde_sample_freq < 1:
            raise ValueError(
                "sde_sample_freq must be -1 (resample once per rollout) or >= 1, "
                f"got {self.sde_sample_freq}"
            )


@dataclass
class PPOConfig(OnPolicyConfig):
    """PPO hyperparameters (defaults: rl-baselines3-zoo CartPole-v1)."""

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "batch_size": AT_LEAST_ONE,
        "n_epochs": AT_LEAST_ONE,
        "clip_range": POSITIVE,
        "clip_range_vf": POSITIVE,
        "target_kl": POSITIVE,
    }

    # Registry name of the algorithm.
    name: str = "ppo"
    # Vector steps per rollout; a rollout holds n_steps * n_envs transitions.
    n_steps: int = 32
    # Discount factor, in [0, 1].
    gamma: float = 0.98
    # GAE lambda, in [0, 1]: 1 is the Monte-Carlo return, 0 the one-step TD error.
    gae_lambda: float = 0.8
    # Adam learning rate (its initial value under a linear schedule), > 0.
    learning_rate: float = 1e-3
    # Schedule of the learning rate and the clip range: constant or linear (decays to 0).
    schedule: str = "linear"
    # Standardise advantages per minibatch before the policy loss.
    normalize_advantage: bool = True
    # Transitions per minibatch, >= 1 (the rollout is split into round(valid / batch_size) parts).
    batch_size: int = 256
    # Passes over each rollout, >= 1.
    n_epochs: int = 20
    # PPO clip range of the probability ratio (initial value under a linear schedule), > 0.
    clip_range: float = 0.2
    # Clip range of the value prediction around its old value (> 0), or None for no clipping.
    clip_range_vf: float | None = None
    # Stop the update epochs early once the approximate KL exceeds 1.5 * target_kl (> 0), or None.
    target_kl: float | None = None


@dataclass
class A2CConfig(OnPolicyConfig):
    """A2C hyperparameters (defaults: Stable-Baselines3 A2C, with 8 sub-envs)."""

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "rms_prop_alpha": Bound(0.0, 1.0, high_open=True),
        "rms_prop_eps": POSITIVE,
    }

    # Registry name of the algorithm.
    name: str = "a2c"
    # RMSprop smoothing constant alpha, in [0, 1).
    rms_prop_alpha: float = 0.99
    # RMSprop epsilon, > 0.
    rms_prop_eps: float = 1e-5


@dataclass
class DQNConfig(AgentConfig):
    """DQN hyperparameters (defaults: rl-baselines3-zoo CartPole-v1)."""

    ADDED_LATER: ClassVar[dict[str, Any]] = {"adam_eps": 1e-8, "dueling": False, "n_step": 1}
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "learning_rate": POSITIVE,
        "buffer_size": AT_LEAST_ONE,
        "learning_starts": NON_NEGATIVE,
        "batch_size": AT_LEAST_ONE,
        "tau": Bound(0.0, 1.0, low_open=True),
        "gamma": UNIT,
        "gradient_steps": NON_NEGATIVE,
        "target_update_interval": AT_LEAST_ONE,
        "exploration_fraction": Bound(0.0, 1.0, low_open=True),
        "exploration_initial_eps": UNIT,
        "exploration_final_eps": UNIT,
        "max_grad_norm": POSITIVE,
        "adam_eps": POSITIVE,
        "n_step": AT_LEAST_ONE,
    }

    # Registry name of the algorithm.
    name: str = "dqn"
    # Sub-environments in the training vector env (each with its own derived seed).
    n_envs: int = 1
    # Adam learning rate (its initial value under a linear schedule), > 0.
    learning_rate: float = 2.3e-3
    # Schedule of the learning rate: constant or linear (decays to 0 over the budget).
    schedule: str = "constant"
    # Replay buffer capacity in transitions, >= 1.
    buffer_size: int = 100_000
    # Env steps of uniform-random actions before the first gradient step, >= 0.
    learning_starts: int = 1000
    # Transitions per minibatch, >= 1.
    batch_size: int = 64
    # Target network update coefficient in (0, 1]: 1 copies the online network (hard update).
    tau: float = 1.0
    # Discount factor, in [0, 1].
    gamma: float = 0.99
    # Env steps (summed over sub-envs) collected per iteration; a multiple of n_envs.
    train_freq: int = 256
    # Gradient steps after each collection phase, >= 0.
    gradient_steps: int = 128
    # Env steps between target network updates, >= 1.
    target_update_interval: int = 10
    # Fraction of the training budget over which epsilon decays linearly, in (0, 1].
    exploration_fraction: float = 0.16
    # Epsilon at the start of training, in [0, 1].
    exploration_initial_eps: float = 1.0
    # Epsilon at the end of the decay and after it, in [0, 1].
    exploration_final_eps: float = 0.04
    # Global gradient-norm clipping threshold, > 0.
    max_grad_norm: float = 10.0
    # Hidden layer widths of the Q-network (ReLU).
    net_arch: list[int] = field(default_factory=lambda: [256, 256])
    # Double DQN: the online network picks the next action, the target network values it.
    double_q: bool = False
    # Adam's epsilon, > 0. Larger values (Dopamine's DQN: 0.01 / 32) damp the steps
    # that small gradients make late in training (torch's default: 1e-8).
    adam_eps: float = 1e-8
    # Dueling head (Wang et al. 2016): Q = V + A - mean(A) over one shared MLP.
    dueling: bool = False
    # Rewards summed into each TD target before bootstrapping (n-step returns), >= 1.
    n_step: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_schedule(self.schedule)
        if self.train_freq < 1 or self.train_freq % self.n_envs:
            raise ValueError(
                f"train_freq must be a positive multiple of n_envs ({self.n_envs}), "
                f"got {self.train_freq}"
            )
        if not self.net_arch or any(int(w) < 1 for w in self.net_arch):
            raise ValueError(
                f"net_arch must be a non-empty list of widths >= 1, got {self.net_arch}"
            )


@dataclass
class ESConfig(AgentConfig):
    """Evolution-strategy hyperparameters (OpenAI-ES; defaults for MountainCarContinuous-v0)."""

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "sigma": POSITIVE,
        "learning_rate": POSITIVE,
        "weight_decay": NON_NEGATIVE,
        "output_gain": NON_NEGATIVE,
    }

    # Registry name of the algorithm.
    name: str = "es"
    # Population size: one member per sub-env, antithetic pairs, so even and >= 2.
    n_envs: int = 32
    # Standard deviation of the parameter perturbations, > 0.
    sigma: float = 0.1
    # Adam step size on the mean parameters, > 0.
    learning_rate: float = 0.03
    # L2 penalty coefficient on the mean parameters (added to the gradient), >= 0.
    weight_decay: float = 0.005
    # Hidden layer widths of the policy (tanh).
    net_arch: list[int] = field(default_factory=lambda: [32, 32])
    # Orthogonal-init gain of the policy's output layer, >= 0.
    output_gain: float = 5.0
    # Standardise observations with running statistics (fixed within a generation).
    normalize_obs: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_envs < 2 or self.n_envs % 2:
            raise ValueError(f"n_envs (the population) must be even and >= 2, got {self.n_envs}")
        if any(int(w) < 1 for w in self.net_arch):
            raise ValueError(f"net_arch widths must be >= 1, got {self.net_arch}")


# The built-in agents' networks (their scope: see rlsweep/agents/__init__.py), by name.
NETWORKS = {
    "ppo": "a tanh MLP of (64, 64) for the policy and one for the value",
    "a2c": "a tanh MLP of (64, 64) for the policy and one for the value",
    "dqn": "a ReLU MLP of Q-values, its hidden widths agent.net_arch",
    "es": "a tanh MLP, its hidden widths agent.net_arch",
}
# Keys that describe a network in other libraries (Stable-Baselines3's policy and
# policy_kwargs, their activation, features extractor, recurrent sizes) and net_arch,
# which PPO and A2C do not have: refused by name, with what the agents do support.
NETWORK_KEYS = (
    "policy",
    "policy_kwargs",
    "net_arch",
    "activation",
    "activation_fn",
    "features_extractor_class",
    "features_extractor_kwargs",
    "lstm_hidden_size",
    "n_lstm_layers",
)
OTHER_NETWORKS = (
    "For another network (a CNN on images, MultiInputPolicy on dict observations, a "
    "recurrent policy, another activation) use the Stable-Baselines3 adapter "
    "(agent=sb3_ppo, sb3_a2c or sb3_dqn, agent.policy=CnnPolicy or MultiInputPolicy or a "
    "dotted class, agent.hyperparameters.policy_kwargs) or your own agent or app "
    "(docs/apps.md)."
)


def network_key_problem(name: str, node: dict[str, Any]) -> str | None:
    """Why the settings ``node`` of the built-in agent ``name`` ask for a network it does
    not have (a key of :data:`NETWORK_KEYS` outside its Config), or None."""
    if name not in NETWORKS:
        return None
    fields = {f.name for f in dataclasses.fields(BUILTIN_SETTINGS[name][0])}
    asked = [str(key) for key in node if key in NETWORK_KEYS and key not in fields]
    if not asked:
        return None
    return (
        f"Unsupported config key 'agent.{asked[0]}' for agent.name={name!r}: the built-in "
        f"{name}'s network is {NETWORKS[name]}, on vector observations, and has no "
        f"{asked[0]} setting. {OTHER_NETWORKS}"
    )


def observation_problem(name: str, space: Any) -> str | None:
    """Why the built-in agent ``name`` cannot read observations from ``space`` (a
    gymnasium space), or None. Its MLP reads vector observations: a Box, flattened, that
    is not an image (a Box of three or more dimensions, or of two in uint8 pixels)."""
    import gymnasium as gym
    import numpy as np

    if name not in NETWORKS:
        return None
    if not isinstance(space, gym.spaces.Box):
        why = f"a {type(space).__name__} observation space, not a Box"
    elif len(space.shape) >= 3 or (len(space.shape) == 2 and space.dtype == np.uint8):
        why = f"image observations ({space})"
    else:
        return None
    return (
        f"agent {name!r} needs a Box observation space of vector observations (its "
        f"network is {NETWORKS[name]}, on the flattened observation), got {why}. "
        f"{OTHER_NETWORKS}"
    )


# Each built-in agent's (Config, ACTION_SPACES), by registry name.
BUILTIN_SETTINGS: dict[str, tuple[type[AgentConfig], frozenset[str]]] = {
    "ppo": (PPOConfig, ON_POLICY_SPACES),
    "a2c": (A2CConfig, ON_POLICY_SPACES),
    "dqn": (DQNConfig, DQN_SPACES),
    "es": (ESConfig, ES_SPACES),
}
