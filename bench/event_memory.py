"""The report of a sweep whose job logged a 500 MB TensorBoard event file: its peak memory
and wall time, rlsweep's event reader against the anchor (the reader of the commit checked
out, ``HEAD``).

    python bench/event_memory.py                  # 10.5 M scalars (about 500 MB), and HEAD's
    python bench/event_memory.py --no-anchor      # the working tree's reader alone
    python bench/event_memory.py --rounds 250000  # a smaller file (4 scalars a round)

The event file is written as torch's ``SummaryWriter.add_scalar`` writes it (one event per
scalar: wall time, step, a summary of one ``simple_value``; the writer's file-version event
first), four tags a round, built with numpy and the reader's own CRC-32C rather than ten
million ``add_scalar`` calls. A sample of rounds around each step-varint width is first
written both ways (``SummaryWriter`` with the same wall times, and here): the records must
be the same bytes, and read the same by tensorboard's own ``EventAccumulator`` and by
rlsweep's reader.

The file goes into the job directory of a real one-job sweep of ``tests/apps/plain``, and
``python -m rlsweep.report SWEEP`` runs under ``/usr/bin/time -v`` (its peak resident memory:
the whole process, Python, numpy, matplotlib and pyarrow included), once with the working
tree's ``rlsweep`` and once with ``git archive HEAD``'s, unpacked into a temporary directory
and put first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rlsweep.series import job_series
from rlsweep.series.tfrecord import masked_crc32c

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "apps" / "plain" / "app.py"
TAGS = ("loss", "reward", "entropy", "grad_norm")  # 6.5 bytes a tag: 47 bytes a record
ROUNDS = 2_625_000  # 10.5 M scalars
BLOCK = 131_072  # rounds built at once
WALL0 = 1_764_633_600.0  # 2025-12-02 00:00 UTC
# SummaryWriter's first event: its wall time, file_version "brain.Event:2" (field 3) and
# source_metadata (field 10) naming tensorboard's writer.
_WRITER = b"tensorboard.summary.writer.event_file_writer"
_VERSION = b"\x1a\x0dbrain.Event:2\x52" + bytes([len(_WRITER) + 2, 0x0A, len(_WRITER)]) + _WRITER


def _u32_bytes(x: np.ndarray) -> np.ndarray:
    """Each uint32 of ``x`` as its 4 little-endian bytes, ``(n, 4)``."""
    return x.astype("<u4").view(np.uint8).reshape(-1, 4)


def _records(datas: np.ndarray) -> np.ndarray:
    """TFRecord records of the ``(n, length)`` uint8 rows ``datas``, ``(n, length + 16)``."""
    n, length = datas.shape
    header = np.frombuffer(np.uint64(length).astype("<u8").tobytes(), dtype=np.uint8)
    out = np.empty((n, length + 16), dtype=np.uint8)
    out[:, :8] = header
    out[:, 8:12] = _u32_bytes(masked_crc32c(header[None, :]))
    out[:, 12 : 12 + length] = datas
    out[:, 12 + length :] = _u32_bytes(masked_crc32c(datas))
    return out


def _varints(steps: np.ndarray, width: int) -> np.ndarray:
    """Each step's varint of ``width`` bytes, ``(n, width)``."""
    shifts = 7 * np.arange(width, dtype=np.uint64)
    out = ((steps.astype(np.uint64)[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    out[:, :-1] |= 0x80
    return out


def _scalar_events(
    tag: bytes, steps: np.ndarray, width: int, values: np.ndarray, walls: np.ndarray
) -> np.ndarray:
    """``add_scalar``'s events of one tag at ``steps`` (their varints ``width`` bytes; 0: the
    step is 0, not written), as ``(n, length)`` rows."""
    n = steps.size
    parts = [np.full((n, 1), 0x09, np.uint8), walls.astype("<f8").view(np.uint8).reshape(n, 8)]
    if width:
        parts += [np.full((n, 1), 0x10, np.uint8), _varints(steps, width)]
    summary = bytes([0x2A, len(tag) + 9, 0x0A, len(tag) + 7, 0x0A, len(tag)]) + tag + b"\x15"
    parts.append(np.broadcast_to(np.frombuffer(summary, np.uint8), (n, len(summary))))
    parts.append(values.astype("<f4").view(np.uint8).reshape(n, 4))
    return np.hstack(parts)


def scalar_records(steps: np.ndarray, walls: np.ndarray, values: np.ndarray) -> bytes:
    """The records of rounds at ``steps`` (>= 0, < 2**63): at each, one event per tag of
    ``TAGS`` in order, ``walls[i, t]`` its wall time, ``values[i, t]`` its value (float32)."""
    widths = np.zeros(steps.size, dtype=np.int64)
    for width in range(1, 10):
        widths[steps >= 1 << (7 * (width - 1))] = width
    widths[steps == 0] = 0
    cuts = [0, *(np.flatnonzero(np.diff(widths)) + 1).tolist(), steps.size]
    out = []
    for lo, hi in itertools.pairwise(cuts):
        rows = [
            _records(
                _scalar_events(
                    tag.encode(), steps[lo:hi], int(widths[lo]), values[lo:hi, t], walls[lo:hi, t]
                )
            )
            for t, tag in enumerate(TAGS)
        ]
        out.append(np.hstack(rows).tobytes())
    return b"".join(out)


def first_record(wall: float) -> bytes:
    """SummaryWriter's first record: the file-version event."""
    data = np.frombuffer(b"\x09" + np.float64(wall).tobytes() + _VERSION, dtype=np.uint8)
    return _records(data[None, :]).tobytes()


def round_values(rounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The wall times and values of ``rounds`` (float32-exact values, a different curve per
    tag), each ``(n, len(TAGS))``."""
    at = rounds[:, None] * len(TAGS) + np.arange(len(TAGS))
    walls = WALL0 + at * 1e-3
    values = (np.sin(rounds[:, None] * 1e-5 + np.arange(len(TAGS))) * 100).astype(np.float32)
    return walls, values


def write_event_file(path: Path, rounds: int) -> int:
    """An event file of ``rounds`` rounds at steps 0, 1, ...; its size."""
    with path.open("wb") as f:
        f.write(first_record(WALL0 - 1.0))
        for start in range(0, rounds, BLOCK):
            at = np.arange(start, min(rounds, start + BLOCK), dtype=np.int64)
            f.write(scalar_records(at, *round_values(at)))
    return path.stat().st_size


# Steps around each varint width (and none: step 0 is not written).
SAMPLE_STEPS = (0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**28, 2**35, 2**62)


def check_sample(tmp: Path) -> None:
    """Rounds at ``SAMPLE_STEPS`` written by ``SummaryWriter`` and here: the same records
    (but the file-version event's wall time), read the same by tensorboard's reader (if
    installed) and rlsweep's."""
    from torch.utils.tensorboard import SummaryWriter

    steps = np.asarray(SAMPLE_STEPS, dtype=np.int64)
    walls, values = round_values(np.arange(steps.size))
    writer = SummaryWriter(str(tmp / "torch"))
    for i, step in enumerate(steps.tolist()):
        for t, tag in enumerate(TAGS):
            writer.add_scalar(tag, float(values[i, t]), step, walltime=float(walls[i, t]))
    writer.close()
    (theirs,) = (tmp / "torch").glob("events.out.tfevents.*")
    ours = tmp / "ours" / "events.out.tfevents.sample"
    ours.parent.mkdir()
    ours.write_bytes(first_record(WALL0) + scalar_records(steps, walls, values))
    data, mine = theirs.read_bytes(), ours.read_bytes()
    first = 16 + int.from_bytes(data[:8], "little")
    assert data[first:] == mine[first:], "the records differ from SummaryWriter's"
    assert data[21 : first - 4] == mine[21 : first - 4], "the file-version event differs"
    want = {
        tag: (steps.astype(float).tolist(), values[:, t].tolist()) for t, tag in enumerate(TAGS)
    }
    for run in (tmp / "torch", tmp / "ours"):
        got = job_series(run)
        assert {k: (s.steps.tolist(), s.values.tolist()) for k, s in got.items()} == want, run
        for tag, pairs in _tensorboard_scalars(run).items():
            assert pairs == list(zip(*want[tag], strict=True)), (run, tag)


def _tensorboard_scalars(run: Path) -> dict[str, list[tuple[float, float]]]:
    """Tensorboard's own reading of a run's scalars (none if it is not installed)."""
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        return {}
    acc = event_accumulator.EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    return {
        tag: [(float(e.step), e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]
    }


def make_sweep(tmp: Path, rounds: int) -> tuple[Path, Path]:
    """A real one-job sweep of tests/apps/plain, its job given an event file of ``rounds``
    rounds: the sweep's directory and the file."""
    command = [sys.executable, str(APP), "-m", "x=1", "seed=0", "rlsweep=serial"]
    done = subprocess.run(
        [*command, "hydra.sweeper.report=false"], cwd=tmp, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"the sweep failed:\n{done.stderr[-3000:]}")
    sweep = tmp / "multirun" / "app"
    (job,) = [d for d in sweep.iterdir() if (d / "result.json").is_file()]
    path = job / "tb" / f"events.out.tfevents.{int(WALL0)}.bench.1.0"
    path.parent.mkdir()
    write_event_file(path, rounds)
    return sweep, path


def measure(command: list[str], pythonpath: Path, cwd: Path) -> tuple[float, float]:
    """(wall seconds, peak resident MB) of ``command`` run with ``pythonpath`` first on
    PYTHONPATH, in ``cwd`` (out of the checkout, so that ``python -m`` imports from there)."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "MPLBACKEND": "Agg"}
    start = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-v", *command], cwd=cwd, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    assert peak is not None, done.stderr[-2000:]
    return wall, int(peak.group(1)) / 1024


def anchor(tmp: Path) -> Path:
    """HEAD's rlsweep package, unpacked under ``tmp``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "HEAD", "rlsweep"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
    return tmp


READ = "import sys; from pathlib import Path; from rlsweep.series import job_series; job_series(Path(sys.argv[1]))"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds of 4 scalars")
    parser.add_argument("--no-anchor", action="store_true", help="do not run HEAD's reader")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rlsweep-event-memory-") as d:
        tmp = Path(d)
        (tmp / "sample").mkdir()
        check_sample(tmp / "sample")
        start = time.perf_counter()
        sweep, path = make_sweep(tmp, args.rounds)
        print(
            f"{path.stat().st_size / 1e6:.0f} MB, {args.rounds * len(TAGS):,} scalars "
            f"(written in {time.perf_counter() - start:.1f} s, sweep included)"
        )
        trees = {"working tree": ROOT}
        if not args.no_anchor:
            (tmp / "head").mkdir()
            trees["HEAD (anchor)"] = anchor(tmp / "head")
        rows = {}
        print("| reader | what | wall s | peak MB |\n|---|---|---:|---:|")
        for what, command in (
            ("`python -m rlsweep.report SWEEP`", ["-m", "rlsweep.report", str(sweep)]),
            ("the job's series alone (`job_series`)", ["-c", READ, str(path.parents[1])]),
        ):
            for name, tree in trees.items():  # side by side: the tree, then HEAD
                rows[name, what] = measure([sys.executable, *command], tree, tmp)
                wall, peak = rows[name, what]
                print(f"| {name} | {what} | {wall:.1f} | {peak:,.0f} |", flush=True)
        for what in dict.fromkeys(w for _, w in rows) if len(trees) > 1 else ():
            (new_wall, new_peak), (old_wall, old_peak) = (rows[n, what] for n in trees)
            print(
                f"{what}: peak {new_peak / old_peak:.3f} of HEAD's, wall "
                f"{new_wall / old_wall:.3f} of HEAD's"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
