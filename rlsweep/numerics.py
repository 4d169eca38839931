"""Which floating-point kernels a job's numbers come from, and pinning them.

numpy, its OpenBLAS, torch and torch's MKL each pick their kernels by the CPU they run on
(AVX-512 or AVX2, Intel or AMD), and kernels of different widths round differently: the same
job gives other numbers on another machine. ``numerics`` is a job's setting:

- ``native``: each library picks the fastest kernels of the machine (and any of the
  variables below already in the environment are left as they are);
- ``portable``: every job process starts with the variables of :data:`PORTABLE_ENV`, which
  pin the AVX2 kernels every x86-64 CPU with AVX2 runs (Intel or AMD, with or without
  AVX-512): the same job gives the same bits on each.

The variables reach a library only as it loads, so they are set when a job's process
starts (worker processes, submitit jobs); a process that loaded numpy without them cannot
run a portable job (:func:`unpinned_because`).

Whatever the setting, a job records its :func:`fingerprint` (CPU, libraries, the kernels
they use) in ``result.json``: a group of jobs with two fingerprints under ``native`` may
hold numbers computed with different roundings.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib
import json
import logging
import os
import platform
import sys
from pathlib import Path
from typing import Any

from rlsweep.errors import ConfigError

log = logging.getLogger(__name__)

SETTINGS = ("native", "portable")

# What numerics=portable sets in every job process before anything is imported there.
PORTABLE_ENV = {
    # numpy's (and scipy's) OpenBLAS: its AVX2 kernels; OpenBLAS picks SkylakeX ones (its
    # AVX-512 kernels) on AVX-512 CPUs, whose products round differently.
    "OPENBLAS_CORETYPE": "Haswell",
    # numpy's SIMD dispatch: nothing wider than AVX2 (X86_V3 since numpy 2.4, the feature
    # names before it); its AVX-512 loops (exp, log, power... in float64) round differently.
    "NPY_ENABLE_CPU_FEATURES": "X86_V3 SSE SSE2 SSE3 SSSE3 SSE41 POPCNT SSE42 AVX F16C FMA3 AVX2",
    # numpy refuses both variables at once; empty counts as unset.
    "NPY_DISABLE_CPU_FEATURES": "",
    # torch's own kernels: AVX2 (its default on AVX-512 CPUs is AVX512).
    "ATEN_CPU_CAPABILITY": "avx2",
    # torch's MKL (its BLAS and LAPACK): MKL's one code path that Intel and AMD CPUs share
    # (its AVX2 branch is Intel's only: AMD CPUs run another).
    "MKL_CBWR": "COMPATIBLE",
    # torch's oneDNN (convolutions): AVX2 at most.
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}
# The OpenBLAS kernel that numerics=portable pins (as threadpoolctl names it).
PORTABLE_KERNEL = "Haswell"
# numpy's dispatch targets of x86-64-v3 (AVX2) and below, by both naming schemes.
_PORTABLE_SIMD = frozenset(PORTABLE_ENV["NPY_ENABLE_CPU_FEATURES"].split())
# The CPU flags of each x86-64 level (/proc/cpuinfo names), the highest first.
_ISA_LEVELS = (
    ("x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
    ("x86-64-v3", ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")),
    ("x86-64-v2", ("cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3")),
)
_V3_AND_UP = ("x86-64-v3", "x86-64-v4")


def check_setting(value: object, key: str = "hydra.launcher.numerics") -> str:
    """``value`` if it is a setting (None: native), else a ConfigError naming ``key`` and
    what is allowed."""
    if value is None:
        return "native"
    if value not in SETTINGS:
        raise ConfigError(
            f"{key}={value!r} is not allowed; choose native (each machine's fastest kernels: "
            "numbers may differ between machines) or portable (the AVX2 kernels every x86-64 "
            "CPU with AVX2 runs: the same bits on each)."
        )
    return str(value)


@functools.cache
def cpu() -> dict[str, str]:
    """This machine's CPU: model, vendor and x86-64 level (``x86-64-v4`` has AVX-512)."""
    info: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux
        text = ""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        name = name.strip()
        if name in ("model name", "vendor_id", "flags") and name not in info:
            info[name] = value.strip()
    flags = set(info.get("flags", "").split())
    levels = [level for level, needs in _ISA_LEVELS if flags.issuperset(needs)]
    return {
        "model": info.get("model name") or platform.processor() or "?",
        "vendor": info.get("vendor_id", "?"),
        "isa": levels[0] if levels else platform.machine() or "?",
    }


def worker_env(setting: str) -> dict[str, str]:
    """The variables a job process of ``setting`` starts with (none for native)."""
    return dict(PORTABLE_ENV) if setting == "portable" else {}


def check_machine(setting: str) -> None:
    """Refuse numerics=portable on a CPU without AVX2 (its kernels would not run there)."""
    if setting == "portable" and cpu()["isa"] not in _V3_AND_UP:
        raise ConfigError(
            f"numerics=portable runs AVX2 kernels, and this machine's CPU ({cpu()['model']}, "
            f"{cpu()['isa']}) shows no AVX2 in /proc/cpuinfo: use numerics=native here."
        )


def shell_lines(setting: str) -> list[str]:
    """Lines of a job's shell script (SLURM) that start its Python with ``setting``: on a
    node without AVX2, the job stops with a message instead of crashing in OpenBLAS."""
    if setting != "portable":
        return []
    stop = (
        'grep -qw avx2 /proc/cpuinfo || { echo "rlsweep: numerics=portable needs AVX2; '
        'node $(hostname) has none" >&2; exit 1; }'
    )
    return [stop] + [f"export {k}='{v}'" for k, v in PORTABLE_ENV.items()]


def _start_environment() -> dict[str, str]:
    """The environment this process started with (what its libraries read as they loaded)."""
    try:
        raw = Path(f"/proc/{os.getpid()}/environ").read_bytes()
    except OSError:  # not Linux: the environment as it is now
        return dict(os.environ)
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {os.fsdecode(k): os.fsdecode(v) for k, _, v in pairs}


def _loaded() -> list[str]:
    return [name for name in ("numpy", "torch") if name in sys.modules]


def unpinned_because(setting: str) -> str | None:
    """Why a job of ``setting`` cannot run in this process (None: it can). A portable job
    can if the process started with :data:`PORTABLE_ENV`, or has loaded neither numpy nor
    torch yet (:func:`pin` sets the variables then), and its loaded kernels are the pinned
    ones."""
    if setting != "portable":
        return None
    started = _start_environment()
    missing = [k for k, v in PORTABLE_ENV.items() if started.get(k, "") != v]
    if missing and _loaded():
        return (
            f"this process loaded {' and '.join(_loaded())} without the variables that pin "
            f"the kernels ({', '.join(missing)} not set when it started)"
        )
    wrong = _unpinned_kernels()
    return f"its libraries run other kernels: {'; '.join(wrong)}" if wrong else None


def _unpinned_kernels() -> list[str]:
    """The loaded libraries whose kernels are not the ones numerics=portable pins."""
    wrong = []
    simd = _numpy_simd()
    if simd is not None and not set(simd) <= _PORTABLE_SIMD:
        wrong.append(f"numpy dispatches to {' '.join(simd)}")
    for lib in _blas():
        if lib["internal_api"] == "openblas" and lib.get("architecture") != PORTABLE_KERNEL:
            wrong.append(f"OpenBLAS runs its {lib.get('architecture')} kernels")
        elif lib["internal_api"] not in ("openblas", "mkl"):
            wrong.append(f"{lib['internal_api']} (BLAS) cannot be pinned")
    torch = sys.modules.get("torch")
    if torch is not None and _torch_capability(torch) not in ("AVX2", "?"):
        wrong.append(f"torch runs its {_torch_capability(torch)} kernels")
    return wrong


def pin(setting: str) -> None:
    """Make this process run a job of ``setting``: set the variables for the libraries it
    has not loaded yet, or raise ConfigError saying why it cannot (see
    :func:`unpinned_because`)."""
    if setting != "portable":
        return
    check_machine(setting)
    why = unpinned_because(setting)
    if why is not None:
        variables = " ".join(f"{k}='{v}'" for k, v in PORTABLE_ENV.items())
        raise ConfigError(
            f"numerics=portable: {why}. Run it as a sweep (-m: rlsweep starts its workers "
            f"with them), or start this command with env {variables}"
        )
    os.environ.update(PORTABLE_ENV)


def _numpy_simd() -> list[str] | None:
    """numpy's SIMD dispatch targets in use (None: numpy is not loaded)."""
    if "numpy" not in sys.modules:
        return None
    try:
        umath = importlib.import_module("numpy._core._multiarray_umath")  # numpy >= 2
    except ImportError:
        umath = importlib.import_module("numpy.core._multiarray_umath")
    features: dict[str, bool] = umath.__cpu_features__
    return [t for t in umath.__cpu_dispatch__ if features.get(t)]


def _blas() -> list[dict[str, Any]]:
    """The BLAS libraries this process has loaded, as threadpoolctl describes them."""
    import threadpoolctl

    return [i for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]


def _torch_capability(torch: Any) -> str:
    backends = getattr(torch, "backends", None)
    cpu_backend = getattr(backends, "cpu", None)
    get = getattr(cpu_backend, "get_cpu_capability", None)
    return str(get()) if callable(get) else "?"


# The last fingerprint taken, by (setting, the number of Python modules loaded then): taken
# again only after an import (a checkpoint every iteration takes one each time).
_last: tuple[tuple[str, int], dict[str, Any]] | None = None


def fingerprint(setting: str) -> dict[str, Any]:
    """What this process's numbers depend on besides the job: the setting, the CPU, and each
    loaded library's version with the kernels it runs; ``digest`` hashes the kernels (and,
    under native, the CPU, by which unpinned libraries choose theirs)."""
    global _last
    key = (setting, len(sys.modules))
    if _last is None or _last[0] != key:
        _last = (key, _fingerprint(setting))
    return copy.deepcopy(_last[1])


def _fingerprint(setting: str) -> dict[str, Any]:
    kernels = {
        "python": platform.python_version(),
        "libc": " ".join(platform.libc_ver()).strip() or "?",
    }
    simd = _numpy_simd()
    if simd is not None:
        kernels["numpy"] = f"{sys.modules['numpy'].__version__} {' '.join(simd) or 'baseline'}"
    blas = [
        f"{i['internal_api']} {i.get('version')} {i.get('architecture') or ''}".strip()
        for i in _blas()
    ]
    if blas:
        kernels["blas"] = "; ".join(sorted(blas))
    torch = sys.modules.get("torch")
    if torch is not None:
        mkl = os.environ.get("MKL_CBWR") or "unset"
        kernels["torch"] = f"{torch.__version__} {_torch_capability(torch)} MKL_CBWR={mkl}"
    hashed: dict[str, Any] = dict(kernels)
    if setting != "portable":
        hashed["cpu"] = {k: cpu()[k] for k in ("model", "isa")}
    text = json.dumps(hashed, sort_keys=True, separators=(",", ":"))
    return {
        "setting": setting,
        "cpu": cpu(),
        "kernels": kernels,
        "digest": hashlib.sha256(text.encode()).hexdigest()[:16],
    }


def differences(then: Any, now: dict[str, Any]) -> str | None:
    """What differs between two fingerprints (``then`` as a checkpoint kept it, maybe none):
    ``blas: 'openblas 0.3.31 SkylakeX' then, 'openblas 0.3.31 Haswell' now``, or None."""
    if not isinstance(then, dict) or then.get("digest") == now.get("digest"):
        return None
    parts = []
    for section in ("cpu", "kernels"):
        old, new = then.get(section) or {}, now.get(section) or {}
        for key in sorted(old.keys() | new.keys()):
            if old.get(key) != new.get(key):
                parts.append(f"{key}: {old.get(key, 'none')!r} then, {new.get(key, 'none')!r} now")
    return "; ".join(parts) or "the setting"


def say_resumed(then: Any, setting: str) -> None:
    """Log it when a job of ``setting`` resumes from a checkpoint written under another
    fingerprint (``then``, as the checkpoint kept it): on another machine or libraries."""
    what = differences(then, fingerprint(setting))
    if what is None:
        return
    if setting == "portable":
        log.info(f"resumed under another numerics fingerprint ({what}); its kernels are pinned")
        return
    log.warning(
        f"resumed under another numerics fingerprint ({what}): under numerics=native the "
        "rest of the job may round differently than where it started, so its numbers may "
        "differ from an uninterrupted run's (numerics=portable pins the kernels)"
    )
