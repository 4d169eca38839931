"""The few fields of TensorBoard's ``Event`` protobuf a learning curve needs, decoded from a
record's bytes with the protobuf wire format alone (no protobuf, TensorFlow or tensorboard
import: tensorboard is an optional extra, and slow to import).

Read (field numbers of tensorboard/compat/proto/event.proto, summary.proto, tensor.proto):

- ``Event``: ``wall_time`` (1), ``step`` (2), ``summary`` (5), ``session_log`` (7, its
  ``status`` (1) == START marks a restart, as TensorBoard reads it).
- ``Summary``: its repeated ``value`` (1); ``Summary.Value``: ``tag`` (1), ``simple_value``
  (2: what torch's ``SummaryWriter.add_scalar`` writes), ``tensor`` (8).
- ``TensorProto``: a scalar is a float (1), double (2) or half (19) ``dtype`` with an empty
  ``tensor_shape`` (2), its value in ``tensor_content`` (4), ``float_val`` (5), ``double_val``
  (6) or ``half_val`` (13): how TF2's ``tf.summary.scalar`` and tensorboard's own
  ``scalar_pb`` write it. Any other tensor (histograms, images, text) is not a scalar.

Every other field is skipped by its wire type, so events of any plugin decode.

The event ``SummaryWriter.add_scalar`` writes (wall_time, step, a summary of one ``Value``
of a tag and a ``simple_value``, each message under 128 bytes) is most of a scalar log's
records: :func:`simple_events` reads those of many records at once with numpy, and
:func:`decode_event` any one record (those included: the two agree on every event the first
reads).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

_FLOAT, _DOUBLE, _HALF = 1, 2, 19  # TensorFlow's DataType enum
_WIDTH = {_FLOAT: 4, _DOUBLE: 8, _HALF: 2}
_FORMAT = {_FLOAT: "<f", _DOUBLE: "<d", _HALF: "<e"}
_SESSION_START = 1  # SessionLog.SessionStatus.START
_DOUBLE_AT, _FLOAT_AT = struct.Struct("<d").unpack, struct.Struct("<f").unpack
# An Event of wall_time (field 1, fixed64), step (2, varint; absent when 0) and a Summary
# (5) of one Value: tag (1) and simple_value (2, fixed32), each size one byte (< 128).
_SIMPLE = re.compile(
    rb"\x09(.{8})(?:\x10([\x80-\xff]{0,9}[\x00-\x7f]))?"
    rb"\x2a([\x00-\x7f])\x0a([\x00-\x7f])\x0a([\x00-\x7f])(.*)\x15(.{4})",
    re.DOTALL,
)


class Event(NamedTuple):
    """One event: when, at which step, the scalars it holds, whether it marks a restart."""

    wall_time: float
    step: int
    scalars: list[tuple[str, float]]
    restart: bool


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    result, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _fields(buf: bytes, pos: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """``(number, wire type, a, b)`` for each field of the message in ``buf[pos:end]``:
    ``a`` is a varint's value, otherwise ``buf[a:b]`` holds the field's payload."""
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield number, wire, value, pos
            continue
        if wire == 2:
            size, pos = _varint(buf, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos + size > end:
            raise ValueError("protobuf field runs past its message")
        yield number, wire, pos, pos + size
        pos += size
    if pos != end:
        raise ValueError("protobuf message runs past its end")


def _values(buf: bytes, wire: int, a: int, b: int, dtype: int) -> list[float]:
    """The values of a repeated numeric field, packed (wire type 2) or not."""
    if dtype == _HALF:  # half_val: the float16 bits as varints
        if wire == 0:
            return [struct.unpack("<e", struct.pack("<H", a & 0xFFFF))[0]]
        bits, pos = [], a
        while pos < b:
            value, pos = _varint(buf, pos)
            bits.append(value & 0xFFFF)
        return [struct.unpack("<e", struct.pack("<H", v))[0] for v in bits]
    if wire == 0:
        raise ValueError("a float or double value encoded as a varint")
    width, fmt = _WIDTH[dtype], _FORMAT[dtype]
    return [struct.unpack_from(fmt, buf, pos)[0] for pos in range(a, b - width + 1, width)]


def _tensor_scalar(buf: bytes, pos: int, end: int) -> float | None:
    """The value of a float/double/half tensor of empty shape, or None for any other."""
    dtype, scalar_shape = 0, True
    content: tuple[int, int] | None = None
    values: list[float] = []
    payloads = []
    for number, wire, a, b in _fields(buf, pos, end):
        if number == 1 and wire == 0:
            dtype = a
        elif number == 2 and wire == 2:
            scalar_shape = not any(n in (2, 3) for n, *_ in _fields(buf, a, b))
        elif number == 4 and wire == 2:
            content = (a, b)
        elif number in (5, 6, 13):
            payloads.append((number, wire, a, b))
    if dtype not in _WIDTH or not scalar_shape:
        return None
    wanted = {_FLOAT: 5, _DOUBLE: 6, _HALF: 13}[dtype]
    for number, wire, a, b in payloads:
        if number == wanted:
            values += _values(buf, wire, a, b, dtype)
    if content is not None and content[1] - content[0] == _WIDTH[dtype]:
        return float(struct.unpack_from(_FORMAT[dtype], buf, content[0])[0])
    return float(values[0]) if len(values) == 1 else None


def _summary_value(buf: bytes, pos: int, end: int) -> tuple[str, float] | None:
    """A ``Summary.Value``'s tag and scalar, or None if it holds no scalar."""
    tag, value = "", None
    for number, wire, a, b in _fields(buf, pos, end):
        if number == 1 and wire == 2:
            tag = buf[a:b].decode("utf-8", errors="replace")
        elif number == 2 and wire == 5:
            value = float(struct.unpack_from("<f", buf, a)[0])
        elif number == 8 and wire == 2:
            value = _tensor_scalar(buf, a, b)
    return None if value is None else (tag, value)


def _simple_event(buf: bytes, start: int, end: int) -> Event | None:
    """The event if it is the one-``simple_value`` event ``SummaryWriter.add_scalar`` writes
    (wall_time, step, a summary of one value: tag, simple_value), read in one regex match;
    None for any other event."""
    match = _SIMPLE.fullmatch(buf, start, end)
    if match is None:
        return None
    wall, step_bytes, summary_size, value_size, tag_size, tag, value = match.groups()
    if not len(tag) == tag_size[0] == value_size[0] - 7 == summary_size[0] - 9:
        return None
    if step_bytes is None:
        step = 0
    elif len(step_bytes) == 1:
        step = step_bytes[0]
    else:
        step = _varint(step_bytes, 0)[0]
        step = step - (1 << 64) if step >= 1 << 63 else step
    text = tag.decode("utf-8", errors="replace")
    return Event(_DOUBLE_AT(wall)[0], step, [(text, _FLOAT_AT(value)[0])], False)


def decode_event(buf: bytes, start: int, end: int) -> Event:
    """The ``Event`` in ``buf[start:end]`` (raises ValueError, IndexError or struct.error if
    the bytes are not a protobuf message)."""
    simple = _simple_event(buf, start, end)
    if simple is not None:
        return simple
    wall_time, step, restart = 0.0, 0, False
    scalars: list[tuple[str, float]] = []
    for number, wire, a, b in _fields(buf, start, end):
        if number == 1 and wire == 1:
            wall_time = struct.unpack_from("<d", buf, a)[0]
        elif number == 2 and wire == 0:
            step = a - (1 << 64) if a >= 1 << 63 else a
        elif number == 5 and wire == 2:
            for n, w, c, d in _fields(buf, a, b):
                if n == 1 and w == 2 and (found := _summary_value(buf, c, d)) is not None:
                    scalars.append(found)
        elif number == 7 and wire == 2:
            restart = any(
                n == 1 and w == 0 and c == _SESSION_START for n, w, c, _ in _fields(buf, a, b)
            )
    return Event(wall_time, step, scalars, restart)


class SimpleEvents(NamedTuple):
    """Which of a run of records are ``add_scalar``'s one-``simple_value`` events, and what
    they hold (each array over those records alone, in order)."""

    simple: np.ndarray  # bool, per record
    walls: np.ndarray  # float64
    steps: np.ndarray  # int64
    values: np.ndarray  # float64
    tags: np.ndarray  # int64: an index into ``names``
    names: list[str]


def _step_field(buffer: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per record, the width of the step's varint after the wall time (0: no step field,
    -1: no varint of at most 9 bytes there) and those up to 10 bytes."""
    varint = buffer[np.minimum(starts[:, None] + 10 + np.arange(10), buffer.size - 1)]
    last = varint < 0x80
    width = np.where(last[:, :9].any(axis=1), last.argmax(axis=1) + 1, -1)
    has_step = buffer[np.minimum(starts + 9, buffer.size - 1)] == 0x10
    return np.where(has_step, width, 0), varint


def _simple(buffer: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, ...]:
    """Which records are simple events, and per record the step's varint width and bytes
    and where the tag starts (meaningful where simple)."""
    width, varint = _step_field(buffer, starts)
    at = starts + 9 + np.where(width > 0, width + 1, 0)  # the summary's key
    tag_size = stops - 5 - (at + 6)
    simple = (width >= 0) & (tag_size >= 0) & (stops - starts >= 20)

    def byte(offsets: np.ndarray) -> np.ndarray:
        return buffer[np.clip(offsets, 0, buffer.size - 1)].astype(np.int64)

    simple &= (byte(starts) == 0x09) & (byte(at) == 0x2A) & (byte(at + 2) == 0x0A)
    simple &= (byte(at + 4) == 0x0A) & (byte(stops - 5) == 0x15) & (byte(at + 5) == tag_size)
    simple &= (byte(at + 3) == tag_size + 7) & (byte(at + 1) == tag_size + 9)
    simple &= byte(at + 1) < 0x80
    return simple, width, varint, at + 6


def _tag_names(
    buffer: np.ndarray, starts: np.ndarray, sizes: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """Each tag's index into the names of the distinct tags ``buffer[starts:starts+sizes]``
    (decoded as :func:`decode_event` decodes them)."""
    ids = np.empty(starts.size, dtype=np.int64)
    names: dict[str, int] = {}
    for size in np.unique(sizes).tolist():
        which = np.flatnonzero(sizes == size)
        rows = buffer[starts[which, None] + np.arange(size)]
        if size == 0:
            distinct, inverse = [b""], np.zeros(which.size, dtype=np.int64)
        else:
            found, inverse = np.unique(rows.view(f"V{size}").ravel(), return_inverse=True)
            distinct = [tag.tobytes() for tag in found]
        texts = [tag.decode("utf-8", errors="replace") for tag in distinct]
        index = np.asarray([names.setdefault(t, len(names)) for t in texts], dtype=np.int64)
        ids[which] = index[inverse.ravel()]
    return ids, list(names)


def simple_events(data: bytes, starts: np.ndarray, stops: np.ndarray) -> SimpleEvents:
    """Of the records ``data[starts[i]:stops[i]]``, the one-``simple_value`` events
    ``SummaryWriter.add_scalar`` writes, read as :func:`decode_event` reads them (a step of a
    10-byte varint, a negative one, is left to it)."""
    buffer = np.frombuffer(data, dtype=np.uint8)
    simple, width, varint, tag_starts = _simple(buffer, starts, stops)
    starts, stops, width, varint = starts[simple], stops[simple], width[simple], varint[simple]
    tag_starts = tag_starts[simple]
    walls = buffer[starts[:, None] + 1 + np.arange(8)].view("<f8").ravel()
    with np.errstate(invalid="ignore"):  # a signalling NaN, made quiet as struct makes it
        values = buffer[stops[:, None] - 4 + np.arange(4)].view("<f4").ravel().astype(float)
    shifts = (7 * np.arange(10)).astype(np.uint64)
    digits = (varint.astype(np.uint64) & np.uint64(0x7F)) << shifts
    digits[np.arange(10) >= width[:, None]] = 0
    steps = digits.sum(axis=1, dtype=np.uint64).astype(np.int64)
    tags, names = _tag_names(buffer, tag_starts, stops - 5 - tag_starts)
    return SimpleEvents(simple, walls, steps, values, tags, names)
