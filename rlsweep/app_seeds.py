"""What rlsweep seeds for an app that seeds itself from its config: the value it reads at
its replicate key, and the job's ``seeds.json``.

An app that calls ``torch.manual_seed(cfg.env.seed)`` feeds the replicate index straight into
its RNGs: replicate 0 of one sweep is replicate 0 of every other, and an app's own
``seed + i`` for sub-environments makes replicate 0's second env replicate 1's first. With
``replicate_value=derived`` (the default of ``rlsweep.Keys``) the app reads the job's own
seed there instead: 31 bits from the job's identity (the root, the replicate, the job's
config values), while the job is still named and grouped by its index.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from rlsweep.identity import Identity, Keys
from rlsweep.seeding import Seeds
from rlsweep.store import SEEDS_FILE, atomic_write_json
from rlsweep.unseeded import Streams

log = logging.getLogger(__name__)


def replicate_seed(cfg: DictConfig, keys: Keys, identity: Identity, seeds: Seeds) -> int | None:
    """With ``replicate_value=derived``, put the job's own seed at the replicate key of the
    config the task reads, and return it. None: nothing was put (no replicate index there,
    or ``replicate_value=index``)."""
    if keys.replicate is None or keys.replicate_value != "derived":
        return None
    found, value = lookup_cfg(cfg, keys.replicate)
    if not found or isinstance(value, bool) or value != identity.replicate:
        return None
    seed = seeds.seed("replicate_seed", shared=True, bits=31)
    with read_write(cfg), open_dict(cfg):
        OmegaConf.update(cfg, keys.replicate, seed, merge=False)
    log.info(
        f"replicate {identity.replicate} ({keys.replicate}={value}): the task reads "
        f"{keys.replicate}={seed}, the job's own seed (replicate_value=derived)"
    )
    return seed


def lookup_cfg(cfg: DictConfig, path: str) -> tuple[bool, Any]:
    """``(True, value)`` at a dotted path of a config, else ``(False, None)``."""
    missing = object()
    value = OmegaConf.select(cfg, path, default=missing, throw_on_resolution_failure=False)
    return (False, None) if value is missing else (True, value)


def write_seeds(
    directory: Path,
    keys: Keys,
    identity: Identity,
    seeds: Seeds,
    feed: int | None,
    streams: Streams,
) -> None:
    """The job's seeds.json: the seeds rlsweep gave the app (its global RNGs', the value at
    its replicate key) and how many unseeded requests it answered (rlsweep.unseeded)."""
    record = {
        "replicate": identity.replicate,
        "replicate_key": keys.replicate,
        "root": identity.root,
        "seeds": {
            "python": seeds.seed("python"),
            "numpy_global": seeds.seed("numpy_global"),
            "torch": seeds.seed("torch", bits=32),
            **({"replicate_seed": feed} if feed is not None else {}),
        },
        "unseeded": streams.record(),
    }
    atomic_write_json(directory / SEEDS_FILE, record)
