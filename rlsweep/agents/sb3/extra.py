"""Stable-Baselines3 itself, imported once for the adapter (the ``sb3`` extra).

Importing the adapter without SB3 installed raises :class:`MissingExtraError`, which
the config check reports as it does any invalid agent.
"""

from __future__ import annotations

from rlsweep.errors import RLSweepError


class MissingExtraError(RLSweepError, ImportError, ValueError):
    """Stable-Baselines3 is not installed (a ValueError too: the config check reports it)."""


try:
    import stable_baselines3
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.noise import NormalActionNoise
    from stable_baselines3.common.vec_env import VecEnv
    from stable_baselines3.common.vec_env.base_vec_env import (
        VecEnvIndices,
        VecEnvObs,
        VecEnvStepReturn,
    )
except ImportError as _exc:
    raise MissingExtraError(
        "agent sb3 (agent=sb3_*) needs Stable-Baselines3, which is not "
        "installed: pip install 'rlsweep[sb3]'"
    ) from _exc

__all__ = [
    "BaseAlgorithm",
    "BaseCallback",
    "Logger",
    "MissingExtraError",
    "NormalActionNoise",
    "VecEnv",
    "VecEnvIndices",
    "VecEnvObs",
    "VecEnvStepReturn",
    "stable_baselines3",
]
