"""A fault-injection environment for testing how sweeps survive failures.

``rlsweep/Fault-v0`` wraps a real env and, in the replicates listed, misbehaves at a
chosen step: ``raise`` an exception, ``hang`` forever, ``exit`` the process, or
``sigkill`` itself (as the OOM killer does). ``step_delay_s`` makes every step sleep, an
env whose simulator is slow (SLURM time-limit tests, the async vectorization benchmark).
Select it from YAML: ``env=fault``.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import gymnasium as gym

from rlsweep.errors import RLSweepError
from rlsweep.launch.exits import REAL_EXIT

FAULTS = ("none", "raise", "hang", "exit", "sigkill")
ENV_ID = "rlsweep/Fault-v0"


class InjectedFault(RLSweepError):
    """The exception ``fault=raise`` raises."""


class FaultEnv(gym.Wrapper[Any, Any, Any, Any]):
    def __init__(
        self,
        inner: str = "CartPole-v1",
        fault: str = "none",
        at_step: int = 100,
        replicate: int = 0,
        fault_replicates: tuple[int, ...] | list[int] = (0,),
        trigger_file: str | None = None,
        step_delay_s: float = 0.0,
        **inner_kwargs: Any,
    ) -> None:
        if fault not in FAULTS:
            raise ValueError(f"env.kwargs.fault must be one of {', '.join(FAULTS)}, got {fault!r}")
        super().__init__(gym.make(inner, **inner_kwargs))
        self.fault = fault
        self.at_step = at_step
        self.armed = fault != "none" and replicate in set(fault_replicates)
        # With a trigger file, the fault fires only while that file exists (so a test can
        # "fix" a failure without changing the job's identity, then resume).
        self.trigger_file = trigger_file
        if step_delay_s < 0:
            raise ValueError(f"env.kwargs.step_delay_s must be >= 0, got {step_delay_s}")
        self.step_delay_s = step_delay_s
        self.steps = 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.armed and self.steps == self.at_step and self._triggered():
            self._misbehave()
        if self.step_delay_s:
            time.sleep(self.step_delay_s)
        return self.env.step(action)

    def _triggered(self) -> bool:
        return self.trigger_file is None or os.path.exists(self.trigger_file)

    def _misbehave(self) -> None:
        if self.fault == "raise":
            raise InjectedFault(f"injected fault at step {self.steps}")
        if self.fault == "hang":
            while True:
                time.sleep(3600)
        if self.fault == "exit":  # the real os._exit: a job's own fails the job instead
            REAL_EXIT(3)
        if self.fault == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="rlsweep.faults:FaultEnv")
