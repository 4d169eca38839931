"""How a search proposes trial ``k``: a pure function of the study's root seed, ``k``, the
space and the results it is given (those of trials ``0 .. k - in_flight``), so the same
command proposes the same trials on any launcher and after a resume.

- ``random``: independent draws, from a stream keyed by (root, "search", k, the space);
- ``tpe``: Optuna's TPE, given the known results as finished trials of a fresh in-memory
  study and a sampler seeded from the same key (random until ``startup_trials`` results
  are known). Works with Optuna 2.10 (which Hydra's Optuna sweeper pins) and 3.x/4.x.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlsweep.errors import ConfigError
from rlsweep.search.space import Dimension, Value
from rlsweep.seeding import leaf_seed, seed_sequence


@dataclass(frozen=True)
class Known:
    """A trial whose result a proposal may use: its values and objective."""

    params: dict[str, Value]
    value: float


def _key(dims: Sequence[Dimension], k: int) -> dict[str, Any]:
    return {"purpose": "search", "trial": k, "space": [d.describe() for d in dims]}


def propose_random(dims: Sequence[Dimension], root: int, k: int) -> dict[str, Value]:
    rng = np.random.default_rng(seed_sequence(root, _key(dims, k)))
    return {d.key: d.from_unit(float(rng.random())) for d in dims}


def propose(
    sampler: str,
    dims: Sequence[Dimension],
    root: int,
    k: int,
    known: Sequence[Known],
    *,
    maximize: bool,
    startup: int,
) -> dict[str, Value]:
    """Trial ``k``'s values (see the module docstring)."""
    if sampler == "random" or len(known) < startup:
        return propose_random(dims, root, k)
    return _propose_tpe(dims, leaf_seed(root, _key(dims, k)) % 2**32, known, maximize)


def import_optuna() -> Any:
    """Optuna, imported (a ConfigError saying how to install it if it is missing)."""
    try:
        import optuna
    except ImportError:
        raise ConfigError(
            "search.sampler=tpe needs Optuna: pip install 'rlsweep[optuna]' (or choose "
            "search.sampler=random)"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _distribution(optuna: Any, d: Dimension) -> Any:
    dist = optuna.distributions
    if d.categorical:
        return dist.CategoricalDistribution(list(d.choices))
    if hasattr(dist, "FloatDistribution"):  # Optuna >= 3
        if d.integer:
            return dist.IntDistribution(int(d.low), int(d.high), log=d.log)
        return dist.FloatDistribution(d.low, d.high, log=d.log)
    if d.integer:  # Optuna 2.x
        cls = dist.IntLogUniformDistribution if d.log else dist.IntUniformDistribution
        return cls(int(d.low), int(d.high))
    cls = dist.LogUniformDistribution if d.log else dist.UniformDistribution
    return cls(d.low, d.high)


def _propose_tpe(
    dims: Sequence[Dimension], seed: int, known: Sequence[Known], maximize: bool
) -> dict[str, Value]:
    optuna = import_optuna()
    distributions = {d.key: _distribution(optuna, d) for d in dims}
    with warnings.catch_warnings():  # add_trial / create_trial: "experimental" in 2.x
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study = optuna.create_study(
            direction="maximize" if maximize else "minimize",
            sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=0),
        )
        for t in known:
            study.add_trial(
                optuna.trial.create_trial(
                    params=dict(t.params), distributions=distributions, value=t.value
                )
            )
        trial = study.ask(distributions)
    return {d.key: _snap(d, trial.params[d.key]) for d in dims}


def _snap(d: Dimension, value: Any) -> Value:
    return str(value) if d.categorical else d.snap(float(value))
