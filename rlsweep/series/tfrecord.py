"""The TFRecord framing of TensorBoard's event files, read and checked without TensorFlow.

A file is a sequence of records, each::

    uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)

little-endian, with CRC-32C (Castagnoli) masked as ``((crc >> 15 | crc << 17) + 0xa282ead8)``.

A file is read in chunks of ``CHUNK_SIZE`` bytes (:func:`chunks`), so that reading one costs
a chunk's memory however large the file: each chunk's whole records are framed, the part of a
record at its end carried over to the next (a record longer than a chunk is read whole). The
framing stops at a record cut short by the end of the file (a job killed mid-write) and at the
first record whose length field fails its checksum (what follows cannot be framed); a length
whose checksum fails is never trusted to read further. The walk from record to record guesses
the next records' positions from the lengths of the last ones (a writer logging the same tags
in turn repeats them), checks each guess against the length stored there with numpy, and
steps record by record where a guess fails: the positions are those of a plain walk.

Checksums are checked with numpy on a chunk's records at once (a record's bytes in pure
Python would cost more than parsing it): the lengths' on every record, the data's by
:func:`first_damaged` on the records a caller reads values from. TensorBoard's own reader
stops at the first damaged record, and so do its callers here.
"""

from __future__ import annotations

import functools
import os
import struct
from collections.abc import Generator
from pathlib import Path
from typing import NamedTuple

import numpy as np

_HEADER = 12  # uint64 length + uint32 its masked crc
_FOOTER = 4  # uint32 the data's masked crc
_MASK_DELTA = 0xA282EAD8
_CASTAGNOLI = 0x82F63B78  # CRC-32C's polynomial, bit-reversed
_LENGTH = struct.Struct("<Q")


@functools.cache
def _table() -> np.ndarray:
    """The byte-at-a-time CRC-32C table."""
    table = np.zeros(256, dtype=np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _CASTAGNOLI if crc & 1 else crc >> 1
        table[byte] = crc
    return table


def masked_crc32c(rows: np.ndarray) -> np.ndarray:
    """The masked CRC-32C of each row of a ``(n, length)`` uint8 array, as uint32.

    One numpy step per byte position, over all rows at once: records of one length cost
    ``length`` vector operations however many there are.
    """
    table = _table()
    columns = np.ascontiguousarray(rows.T)
    crc = np.full(rows.shape[0], 0xFFFFFFFF, dtype=np.uint32)
    for column in columns:
        crc = table[(crc ^ column) & 0xFF] ^ (crc >> 8)
    crc ^= np.uint32(0xFFFFFFFF)
    return ((crc >> 15) | (crc << 17)) + np.uint32(_MASK_DELTA)


def _crc_ok(data: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """Whether each ``data[start:start+length]`` matches the masked crc stored after it."""
    rows = data[starts[:, None] + np.arange(length)]
    crc_bytes = data[starts[:, None] + length + np.arange(4)].astype(np.uint32)
    stored = crc_bytes[:, 0] | crc_bytes[:, 1] << 8 | crc_bytes[:, 2] << 16 | crc_bytes[:, 3] << 24
    return masked_crc32c(rows) == stored


# How a file's framing ends (:func:`frame`): whole, cut mid-record, or at a damaged length.
WHOLE, CUT, DAMAGED_LENGTH = "whole", "cut", "damaged length"
CHUNK_SIZE = 4 << 20  # bytes read at once
_LEARN = 16  # records walked one by one before guessing the next ones' positions
_MOST_WALKED = 4096  # records walked one by one at most between guesses
_FIRST_GUESS, _MOST_GUESSED = 256, 1 << 16  # positions guessed at once


class Framed(NamedTuple):
    """Whole records of a buffer: where each record's data starts and stops in ``data``."""

    data: bytes
    starts: np.ndarray  # int64
    stops: np.ndarray  # int64
    # How the file's framing ended here (WHOLE, CUT, DAMAGED_LENGTH); None: it goes on.
    end: str | None


def _walk_one_by_one(data: bytes, pos: int, most: int) -> tuple[list[int], int]:
    """The starts of up to ``most`` whole records of ``data`` from ``pos``, and where the
    next record starts."""
    starts: list[int] = []
    size, length_at = len(data), _LENGTH.unpack_from
    while len(starts) < most and pos + _HEADER <= size:
        next_pos = pos + _HEADER + length_at(data, pos)[0] + _FOOTER
        if next_pos > size:
            break
        starts.append(pos)
        pos = next_pos
    return starts, pos


def _period(sizes: list[int]) -> list[int]:
    """The sizes the records after ``sizes`` are guessed to have, in turn: the shortest
    repeating pattern of the last ones (all of them if none repeats)."""
    last = sizes[-_LEARN:]
    for period in range(1, len(last) // 2 + 1):
        if last[period:] == last[:-period]:
            return last[-period:]
    return last


def _guess(buffer: np.ndarray, pos: int, pattern: list[int], count: int) -> tuple[np.ndarray, int]:
    """The starts of the whole records from ``pos`` whose sizes repeat ``pattern`` (up to
    ``count`` of them; each checked against the length stored there, up to the first that
    does not match), and where the next record starts."""
    sizes = np.resize(np.asarray(pattern, dtype=np.int64), count)
    ends = pos + np.cumsum(sizes)
    ends = ends[: np.searchsorted(ends, buffer.size, side="right")]
    starts = ends - sizes[: ends.size]
    lengths = buffer[starts[:, None] + np.arange(8)].view("<u8").ravel()
    wrong = np.flatnonzero(lengths != (sizes[: ends.size] - _HEADER - _FOOTER).astype(np.uint64))
    if wrong.size:
        return starts[: wrong[0]], int(starts[wrong[0]])
    return starts, int(ends[-1]) if ends.size else pos


def _walk(data: bytes, pos: int) -> tuple[np.ndarray, int]:
    """The starts of the whole records of ``data`` from ``pos``, in order, and where the
    next (not whole) record starts: a plain walk's, guessed ahead where lengths repeat."""
    buffer = np.frombuffer(data, dtype=np.uint8)
    pieces, walked, guessed = [], _LEARN, _FIRST_GUESS
    while True:
        starts, pos = _walk_one_by_one(data, pos, walked)
        pieces.append(np.asarray(starts, dtype=np.int64))
        if len(starts) < walked:
            return np.concatenate(pieces), pos
        pattern = _period(np.diff([*starts[-_LEARN - 1 :], pos]).tolist())
        found, pos = _guess(buffer, pos, pattern, guessed)
        pieces.append(found)
        full = found.size == guessed
        guessed = min(guessed * 4, _MOST_GUESSED) if full else _FIRST_GUESS
        # Guesses that fail at once: walk longer before the next one.
        walked = _LEARN if found.size else min(walked * 2, _MOST_WALKED)


def _frame_buffer(data: bytes, remaining: int = 0) -> tuple[Framed, int]:
    """The whole records of ``data`` (the file's bytes from a record's start on, ``remaining``
    more bytes after them), up to a length whose checksum fails; and where the next record
    starts in ``data`` (the bytes from there on to carry over to the next chunk)."""
    starts, pos = _walk(data, 0)
    buffer = np.frombuffer(data, dtype=np.uint8)
    pending = pos + _HEADER <= len(data)  # the next record's length is here, its data not all
    headers = np.append(starts, pos) if pending else starts
    bad = np.flatnonzero(~_crc_ok(buffer, headers, 8))
    if bad.size:
        starts = starts[: int(bad[0])]
        return Framed(data, starts + _HEADER, _stops(data, starts), DAMAGED_LENGTH), pos
    end: str | None = None
    if pending:
        (length,) = _LENGTH.unpack_from(data, pos)
        if pos + _HEADER + length + _FOOTER > len(data) + remaining:
            end = CUT  # the file ends inside this record
    elif not remaining:
        end = WHOLE if pos == len(data) else CUT
    return Framed(data, starts + _HEADER, _stops(data, starts), end), pos


def _stops(data: bytes, starts: np.ndarray) -> np.ndarray:
    """Where the data of the records at ``starts`` stops."""
    buffer = np.frombuffer(data, dtype=np.uint8)
    lengths = buffer[starts[:, None] + np.arange(8)].view("<u8").ravel()
    return starts + _HEADER + lengths.astype(np.int64)


def chunks(path: Path, chunk_size: int = CHUNK_SIZE) -> Generator[Framed, None, None]:
    """The whole records of the file at ``path``, a chunk of about ``chunk_size`` bytes at a
    time, up to a truncated record or the first length whose checksum fails; the last
    chunk says how the framing ended. The file is read as far as its size when opened."""
    with path.open("rb") as f:
        remaining = os.fstat(f.fileno()).st_size
        carry = b""
        while True:
            wanted = min(max(chunk_size, _needed(carry)) - len(carry), remaining)
            read = f.read(wanted)
            # A file shorter than it was when opened ends here.
            remaining = remaining - len(read) if len(read) == wanted else 0
            framed, pos = _frame_buffer(carry + read, remaining)
            yield framed
            if framed.end is not None:
                return
            carry = framed.data[pos:]


def _needed(carry: bytes) -> int:
    """The bytes a chunk needs to hold the record ``carry`` begins (its header, if its length
    is not all there)."""
    if len(carry) < _HEADER:
        return _HEADER
    return _HEADER + _LENGTH.unpack_from(carry, 0)[0] + _FOOTER


def frame(data: bytes) -> tuple[list[tuple[int, int]], str]:
    """The ``(start, stop)`` of each record's data in ``data`` (a whole file's bytes), in
    file order, up to a truncated record or the first length whose checksum fails; and how
    the framing ended: ``WHOLE`` (every byte framed), ``CUT`` (a last record cut short) or
    ``DAMAGED_LENGTH``."""
    framed, _ = _frame_buffer(data)
    assert framed.end is not None
    return list(zip(framed.starts.tolist(), framed.stops.tolist(), strict=True)), framed.end


def framed(data: bytes) -> list[tuple[int, int]]:
    """The ``(start, stop)`` of each record's data, in file order, up to a truncated
    record or the first length whose checksum fails."""
    return frame(data)[0]


def first_damaged(data: bytes, starts: np.ndarray, stops: np.ndarray) -> int | None:
    """The index of the first record whose data fails its checksum, of the records whose
    data is ``data[starts[i]:stops[i]]``; None if none does."""
    if not starts.size:
        return None
    buffer = np.frombuffer(data, dtype=np.uint8)
    lengths = stops - starts
    damaged = []
    for length in np.unique(lengths).tolist():
        indices = np.flatnonzero(lengths == length)
        ok = _crc_ok(buffer, starts[indices], length)
        if not ok.all():
            damaged.append(int(indices[np.argmin(ok)]))
    return min(damaged) if damaged else None
