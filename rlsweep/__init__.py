"""rlsweep: declarative reinforcement-learning sweeps for Hydra.

Module map (each file has one job):

- ``seeding``: derive every random seed a job uses from (root, replicate, identity, purpose).
- ``config``: typed job configuration and up-front validation with clear messages.
- ``envs``: build seeded training and evaluation vector environments.
- ``agents``: the algorithms (``agents.ppo``, ``agents.a2c``) on shared rollout code.
- ``job``: one job end to end: seed, train, evaluate, write results.
- ``store``: the result store: job directories, atomic files, reading a sweep back.
- ``stats``: pure-numpy statistics (IQM, bootstrap confidence intervals).
- ``summary``: the end-of-sweep table and learning-curve plot.
- ``progress``: the live progress line.
- ``app``: the Hydra entry point behind ``python -m rlsweep``.

The Hydra launcher and sweeper plugins live in ``hydra_plugins/rlsweep_launcher``.
"""

__version__ = "0.1.0"
