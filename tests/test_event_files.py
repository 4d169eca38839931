"""Event files are read a chunk at a time (rlsweep.series.tfrecord.chunks), exactly as whole:
real files written by torch's SummaryWriter and tensorboard's own writer, read with chunks
small enough that records straddle their ends (a record cut by a chunk's end is carried
over to the next chunk), damaged or cut in a later chunk, and checked against reading them
in one chunk and against TensorBoard's own EventAccumulator."""

from __future__ import annotations

import random
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from torch.utils.tensorboard import SummaryWriter

from rlsweep.series.event_files import event_series, read_event_file
from rlsweep.series.event_proto import decode_event, simple_events
from rlsweep.series.tfrecord import chunks, framed

# Chunk sizes from one byte (each chunk a record, read whole) to several records (of 25 to
# 45 bytes, a histogram's 500).
SMALL_CHUNKS = [1, 7, 45, 64, 97, 151, 256, 1000]


def pairs(series) -> list[tuple[float, float]]:
    return list(zip(series.steps.tolist(), series.values.tolist(), strict=True))


def tb_scalars(run_dir: Path, tag: str) -> list[tuple[float, float]]:
    """TensorBoard's reading of a run's scalars: last value per step, restarts purged."""
    acc = event_accumulator.EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    by_step = {}
    for e in sorted(acc.Scalars(tag), key=lambda e: e.wall_time):
        by_step[float(e.step)] = e.value
    return sorted(by_step.items())


def write_scalars(run_dir: Path, steps: range) -> Path:
    """torch's SummaryWriter: ``loss`` and ``reward`` at each step, a histogram (a record
    far longer than the small chunks) every tenth."""
    writer = SummaryWriter(str(run_dir))
    for step in steps:
        writer.add_scalar("loss", step / 4, step)
        writer.add_scalar("reward", -step / 8, step)
        if step % 10 == 0:
            writer.add_histogram("weights", np.arange(50.0) * step, step)
    writer.close()
    (path,) = run_dir.glob("events.out.tfevents.*")
    return path


def record_of_step(data: bytes, step: int) -> tuple[int, int]:
    """The (start, stop) of the data of the ``loss`` record logged at ``step``."""
    for start, stop in framed(data):
        event = decode_event(data, start, stop)
        if event.scalars == [("loss", step / 4)] and event.step == step:
            return start, stop
    raise AssertionError(f"no loss record at step {step}")


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scalars(tmp_path_factory.mktemp("run"), range(0, 300, 3))


def test_chunks_frame_the_records_of_the_whole_file(logged: Path) -> None:
    """Every record once, in order, whatever the chunk size: none dropped or read twice where
    a chunk's end cuts it."""
    data = logged.read_bytes()
    whole = framed(data)
    for size in SMALL_CHUNKS:
        got = []
        offset = 0  # the file offset of each chunk's first byte
        for chunk in chunks(logged, size):
            spans = zip(chunk.starts.tolist(), chunk.stops.tolist(), strict=True)
            got += [(offset + a, offset + b) for a, b in spans]
            assert chunk.data == data[offset : offset + len(chunk.data)]
            offset += int(chunk.stops[-1]) + 4 if chunk.stops.size else 0
        assert got == whole, size


def test_a_record_straddling_a_chunks_end_is_read(logged: Path) -> None:
    """With every small chunk size, records straddle chunk ends: the series are those of the
    file read whole, and TensorBoard's."""
    want = {
        "loss": [(float(s), s / 4) for s in range(0, 300, 3)],
        "reward": [(float(s), -s / 8) for s in range(0, 300, 3)],
    }
    assert {tag: tb_scalars(logged.parent, tag) for tag in want} == want
    whole = read_event_file(logged, logged.parent)
    for size in SMALL_CHUNKS:
        problems: list[str] = []
        got = event_series(logged.parent, [logged], problems, chunk_size=size)
        assert {tag: pairs(series) for tag, series in got.items()} == want, size
        assert problems == []
        f = read_event_file(logged, logged.parent, chunk_size=size)
        assert (f.start, f.end, f.records, f.problem) == (
            whole.start,
            whole.end,
            whole.records,
            None,
        )


def test_a_flip_in_a_record_of_a_later_chunk_is_reported_with_the_file_and_step(
    logged: Path, tmp_path: Path
) -> None:
    """Twenty bytes flipped in the record of step 252, near the file's end (a later chunk
    for every small chunk size): each reading stops there, names the file and step 249."""
    data = bytearray(logged.read_bytes())
    start, stop = record_of_step(bytes(data), 252)
    assert start > 4 * max(SMALL_CHUNKS)
    for i in range(start, min(stop, start + 20)):
        data[i] ^= 0xFF
    path = tmp_path / logged.name
    path.write_bytes(bytes(data))
    kept = sum(1 for a, _ in framed(bytes(data)) if a < start)
    said = (
        f"`{logged.name}`: damaged (a record fails its checksum) after step 249: read up to "
        f"step 249 ({kept} records kept), the rest of the file not read"
    )
    want = [(float(s), s / 4) for s in range(0, 252, 3)]
    assert tb_scalars(tmp_path, "loss") == want
    for size in [*SMALL_CHUNKS, 1 << 22]:
        problems: list[str] = []
        got = event_series(tmp_path, [path], problems, chunk_size=size)
        assert problems == [said], size
        assert pairs(got["loss"]) == want, size
        assert pairs(got["reward"]) == [(float(s), -s / 8) for s in range(0, 252, 3)], size


def test_a_cut_in_the_last_chunk_is_reported(logged: Path, tmp_path: Path) -> None:
    """The file cut inside its last loss record (in its length, its length's checksum, its
    data, its data's checksum): read up to step 294 whatever the chunk size, the cut said."""
    data = logged.read_bytes()
    start, stop = record_of_step(data, 297)
    kept = sum(1 for a, _ in framed(data) if a < start)
    said = (
        f"`{logged.name}`: cut mid-record (a write cut short) after step 294: read up to "
        f"step 294 ({kept} records kept), the rest of the file not read"
    )
    path = tmp_path / logged.name
    for cut in (start - 11, start - 5, start - 1, start, (start + stop) // 2, stop, stop + 3):
        path.write_bytes(data[:cut])
        for size in (1, 45, 151, 1 << 22):
            problems: list[str] = []
            got = event_series(tmp_path, [path], problems, chunk_size=size)
            assert problems == [said], (cut, size)
            assert pairs(got["loss"]) == [(float(s), s / 4) for s in range(0, 297, 3)]
            assert pairs(got["reward"])[-1] == (294.0, -294 / 8)


def test_a_damaged_length_in_a_later_chunk_stops_the_file(logged: Path, tmp_path: Path) -> None:
    """The length of step 150's record flipped to a huge one: never trusted (nothing more is
    read for it), the file read up to step 147."""
    data = bytearray(logged.read_bytes())
    start, _ = record_of_step(bytes(data), 150)
    data[start - 12 + 5] ^= 0x40  # the length's sixth byte: 2**46 bytes more
    path = tmp_path / logged.name
    path.write_bytes(bytes(data))
    for size in (1, 64, 150, 1 << 22):
        f = read_event_file(path, tmp_path, chunk_size=size)
        assert f.problem is not None
        assert f.problem.startswith(
            f"`{logged.name}`: damaged (a record's length fails its checksum) after step 147: "
        )
        steps, _ = f.scalars["loss"].arrays()
        assert steps.tolist() == list(range(0, 150, 3))


def test_restart_markers_in_later_chunks_drop_earlier_chunks_steps(tmp_path: Path) -> None:
    """SessionLog.START at steps 40 and 100 in one file (resumed twice): what earlier chunks
    logged at later steps is dropped, as TensorBoard does, whatever the chunk size."""
    writer = EventFileWriter(str(tmp_path))

    def log(step: int, tag: str, value: float) -> None:
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))

    for first, last, resume in ((0, 60, None), (40, 130, 40), (100, 160, 100)):
        if resume is not None:
            start = SessionLog(status=SessionLog.START)
            writer.add_event(Event(wall_time=time.time(), step=resume, session_log=start))
        for step in range(first, last, 2):
            log(step, "loss", step + first / 64)
            if step % 20 == 0:
                log(step, "eval", -step - first / 64)
    writer.close()
    (path,) = tmp_path.glob("events.out.tfevents.*")
    want = {tag: tb_scalars(tmp_path, tag) for tag in ("loss", "eval")}
    assert want["loss"][20] == (40.0, 40.625) and want["loss"][-1] == (158.0, 159.5625)
    for size in [*SMALL_CHUNKS, 1 << 22]:
        got = event_series(tmp_path, [path], chunk_size=size)
        assert {tag: pairs(series) for tag, series in got.items()} == want, size


def _mutated(records: list[bytes], rng: random.Random) -> bytes:
    """One of ``records`` with a byte or a few set, inserted, deleted, or the end cut."""
    r = bytearray(rng.choice(records))
    op = rng.randrange(4)
    if op == 0:
        for _ in range(rng.choice([1, 2, 3])):
            r[rng.randrange(len(r))] = rng.choice([0x09, 0x10, 0x2A, 0x0A, 0x15, 0x80, 0xFF, 0])
    elif op == 1:
        r.insert(rng.randrange(len(r) + 1), rng.choice([0x0A, 0x80, 0x00]))
    elif op == 2:
        del r[rng.randrange(len(r))]
    else:
        del r[rng.randrange(len(r)) :]
    return bytes(r)


def test_simple_events_read_what_decode_event_reads(tmp_path: Path) -> None:
    """add_scalar's events read all at once are those decode_event reads one by one: on a
    real file's records (steps of every varint width) and on thousands of them altered."""
    writer = SummaryWriter(str(tmp_path))
    for i, step in enumerate((0, 1, 127, 128, 16384, 2**21, 2**35, 2**62, -5)):
        writer.add_scalar("t" * (i + 1), i - 0.5, step)
    writer.close()
    (path,) = tmp_path.glob("events.out.tfevents.*")
    data = path.read_bytes()
    records = [data[a:b] for a, b in framed(data)]
    rng = random.Random(0)
    datas = records + [_mutated(records[1:], rng) for _ in range(5000)]
    buffer = b"".join(datas)
    stops = np.cumsum([len(d) for d in datas])
    starts = stops - [len(d) for d in datas]
    found = simple_events(buffer, starts, stops)
    assert found.simple[1:9].all() and not found.simple[[0, 9]].any()  # -5: a 10-byte varint
    assert found.simple.sum() > 500  # of the 5,000 altered, some still simple
    read = iter(range(int(found.simple.sum())))
    for i in np.flatnonzero(found.simple).tolist():
        j = next(read)
        event = decode_event(buffer, int(starts[i]), int(stops[i]))
        got = (found.walls[j], int(found.steps[j]), found.names[found.tags[j]], found.values[j])
        assert struct.pack("<d", got[0]) == struct.pack("<d", event.wall_time)
        assert (got[1], [(got[2], got[3])], event.restart) == (event.step, event.scalars, False)
