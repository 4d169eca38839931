"""The TFRecord framing of TensorBoard's event files, read and checked without TensorFlow.

A file is a sequence of records, each::

    uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)

little-endian, with CRC-32C (Castagnoli) masked as ``((crc >> 15 | crc << 17) + 0xa282ead8)``.
A job killed mid-write leaves a truncated last record: :func:`framed` stops before it, and
before the first record whose length field fails its checksum (what follows cannot be
framed). Data checksums are checked by :func:`first_damaged` on the records a caller reads
values from, all at once with numpy (a record's bytes in pure Python would cost more than
parsing it); TensorBoard's own reader stops at the first damaged record, and so do its
callers here.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence

import numpy as np

_HEADER = 12  # uint64 length + uint32 its masked crc
_FOOTER = 4  # uint32 the data's masked crc
_MASK_DELTA = 0xA282EAD8
_CASTAGNOLI = 0x82F63B78  # CRC-32C's polynomial, bit-reversed


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


def frame(data: bytes) -> tuple[list[tuple[int, int]], str]:
    """The ``(start, stop)`` of each record's data, in file order, up to a truncated
    record or the first length whose checksum fails; and how the framing ended: ``WHOLE``
    (every byte framed), ``CUT`` (a last record cut short) or ``DAMAGED_LENGTH``."""
    spans = []
    pos, size = 0, len(data)
    while pos + _HEADER <= size:
        (length,) = struct.unpack_from("<Q", data, pos)
        start = pos + _HEADER
        stop = start + length
        if stop + _FOOTER > size:
            break
        spans.append((start, stop))
        pos = stop + _FOOTER
    buffer = np.frombuffer(data, dtype=np.uint8)
    end = WHOLE if pos == size else CUT
    if pos + _HEADER <= size and not _crc_ok(buffer, np.asarray([pos], dtype=np.int64), 8)[0]:
        end = DAMAGED_LENGTH  # a length beyond the file: damaged, not cut
    if not spans:
        return spans, end
    ok = _crc_ok(buffer, np.asarray([s - _HEADER for s, _ in spans], dtype=np.int64), 8)
    bad = np.flatnonzero(~ok)
    return (spans[: int(bad[0])], DAMAGED_LENGTH) if bad.size else (spans, end)


def framed(data: bytes) -> list[tuple[int, int]]:
    """The ``(start, stop)`` of each record's data, in file order, up to a truncated
    record or the first length whose checksum fails."""
    return frame(data)[0]


def first_damaged(data: bytes, spans: Sequence[tuple[int, int]]) -> int | None:
    """The index in ``spans`` of the first record whose data fails its checksum, or None."""
    if not spans:
        return None
    buffer = np.frombuffer(data, dtype=np.uint8)
    by_length: dict[int, list[int]] = {}
    for i, (start, stop) in enumerate(spans):
        by_length.setdefault(stop - start, []).append(i)
    damaged: list[int] = []
    for length, indices in by_length.items():
        starts = np.asarray([spans[i][0] for i in indices], dtype=np.int64)
        ok = _crc_ok(buffer, starts, length)
        damaged.extend(indices[int(j)] for j in np.flatnonzero(~ok))
    return min(damaged) if damaged else None
