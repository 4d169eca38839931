"""Any Stable-Baselines3 algorithm as an rlsweep agent (the ``sb3`` extra).

Select it with ``agent=sb3_ppo`` (or ``sb3_a2c``, ``sb3_dqn``): ``conf/agent/sb3_*.yaml``
name this module and pick the algorithm with ``algo``, which may be any SB3 algorithm class
(``PPO``, ``A2C``, ``DQN``, ``SAC``, ``TD3``, ``DDPG``) or a dotted path to one of another
package (``sb3_contrib.TQC``).

What rlsweep guarantees for its own agents holds here too:

- *Seeds.* SB3 is given ``seed=None``, so it never calls ``set_random_seed``, and never
  reseeds sub-env ``i`` with ``seed + i`` (which would make replicate 0's sub-env 1 the same
  stream as replicate 1's sub-env 0). The model steps the job's own training vector env,
  already reset with one derived seed per sub-env, through :class:`RlsweepVecEnv`.
- *The agent's own randomness.* SB3 draws from numpy's and torch's global generators
  (action sampling, minibatch order, replay sampling, epsilon-greedy, network
  initialisation) and from its action space's generator (warm-up actions). The agent keeps
  private states of the two global generators, seeded from ``context.rng``, and swaps them
  in around every SB3 call (:meth:`SB3Agent._own_rngs`); its action space is a copy seeded
  from ``context.rng``. Nothing it does depends on, or disturbs, the process-global states.
- *Resume.* ``state_dict`` holds everything ``learn`` carries from one call to the next
  (see :meth:`SB3Agent.state_dict`); a restored agent continues bit for bit, and so does a
  job resumed from its checkpoint (the job saves the envs through its Snapshot wrapper).

Schedules (``"lin_<x>"`` values, DQN's exploration) run over the job's whole budget
(``train.total_steps``), as in rl-baselines3-zoo, not over one ``learn`` call. Bitwise
results are for the CPU (the default ``device``); the CUDA generator is not managed.

Modules: ``extra`` (SB3 itself, or :class:`MissingExtraError`), ``settings`` (``Config``
and the classes and arguments it names), ``vecenv`` (:class:`RlsweepVecEnv`), ``state``
(the model's training state), ``agent`` (:class:`SB3Agent`).
"""

from __future__ import annotations

from rlsweep.agents.sb3.agent import SB3Agent, build
from rlsweep.agents.sb3.extra import MissingExtraError
from rlsweep.agents.sb3.settings import ACTION_SPACES, Config, algorithm_class
from rlsweep.agents.sb3.vecenv import RlsweepVecEnv

__all__ = [
    "ACTION_SPACES",
    "Config",
    "MissingExtraError",
    "RlsweepVecEnv",
    "SB3Agent",
    "algorithm_class",
    "build",
]
