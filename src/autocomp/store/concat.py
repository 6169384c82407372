"""Concatenate Parquet files of one schema into one file without decoding a page.

A Parquet file is the magic `PAR1`, the row groups' column chunks, then a footer (a Thrift
compact-protocol `FileMetaData`, its length, `PAR1`). Files written by the same writer with the
same schema and options differ only in their row groups, so the concatenation is the first
magic, each file's column chunks one after the other, and the first file's footer with every
file's row groups (their byte offsets moved by where their chunks now start, their ordinals
renumbered, the row count summed). The footers are not decoded into objects: each row group is
copied field by field, and only the offset and ordinal fields are re-encoded. The result is the
file one writer would have written with the same row groups: `tests/store/test_concat.py` checks
it byte for byte.

Only files without page indexes, bloom filters or encryption are accepted (what
`pq.ParquetWriter` writes by default); anything else raises ValueError.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

MAGIC = b"PAR1"

# Thrift compact protocol types
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)

# Field ids (parquet.thrift)
_FILE_NUM_ROWS, _FILE_ROW_GROUPS = 3, 4
_FILE_REFUSED = {8: "is encrypted", 9: "is encrypted"}
_RG_COLUMNS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 5, 7
_CC_FILE_OFFSET, _CC_META = 2, 3
_CC_REFUSED = {
    1: "has external column chunks",
    4: "has page indexes",
    6: "has page indexes",
    8: "is encrypted",
    9: "is encrypted",
}
_META_OFFSETS = (9, 10, 11)  # data_page_offset, index_page_offset, dictionary_page_offset
_META_REFUSED = {14: "has bloom filters"}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _zigzag(data: bytes, pos: int) -> tuple[int, int]:
    n, pos = _varint(data, pos)
    return (n >> 1) ^ -(n & 1), pos


def _encode_zigzag(n: int) -> bytes:
    return _encode_varint((n << 1) ^ (n >> 63))


def _skip(data: bytes, pos: int, kind: int) -> int:
    """The position after a value of compact type `kind` starting at `pos`."""
    if kind in (_TRUE, _FALSE, _BYTE):  # a bool inside a list is one byte
        return pos + 1
    if kind in (_I16, _I32, _I64):
        while data[pos] & 0x80:
            pos += 1
        return pos + 1
    if kind == _DOUBLE:
        return pos + 8
    if kind == _BINARY:
        size, pos = _varint(data, pos)
        return pos + size
    if kind in (_LIST, _SET):
        size, element, pos = _list_header(data, pos)
        for _ in range(size):
            pos = _skip(data, pos, element)
        return pos
    if kind == _STRUCT:
        while True:
            header = data[pos]
            pos += 1
            if header == 0:
                return pos
            if not header >> 4:  # the long form: the field id follows
                pos = _skip(data, pos, _I16)
            if header & 0x0F not in (_TRUE, _FALSE):
                pos = _skip(data, pos, header & 0x0F)
    raise ValueError(f"unsupported Thrift compact type {kind} in a Parquet footer")


def _list_header(data: bytes, pos: int) -> tuple[int, int, int]:
    header = data[pos]
    size, element, pos = header >> 4, header & 0x0F, pos + 1
    if size == 15:
        size, pos = _varint(data, pos)
    return size, element, pos


Handler = Callable[[bytes, int, bytearray], int]


def _copy_struct(data: bytes, pos: int, out: bytearray, handlers: dict[int, Handler]) -> int:
    """Copy the struct at `pos` to `out`; a field with a handler is written by it (given its
    value's position, it appends the value and returns the position after it). Returns the
    position after the struct."""
    copied = pos  # bytes from here to `pos` are still to be copied
    last = 0
    while True:
        header = data[pos]
        pos += 1
        if header == 0:
            out += data[copied:pos]
            return pos
        kind, delta = header & 0x0F, header >> 4
        if delta:
            fid = last + delta
        else:
            fid, pos = _zigzag(data, pos)
        last = fid
        handler = handlers.get(fid)
        if handler is not None:
            out += data[copied:pos]
            pos = copied = handler(data, pos, out)
        elif kind not in (_TRUE, _FALSE):
            pos = _skip(data, pos, kind)


def _int_handler(new: Callable[[int], int]) -> Handler:
    def handle(data: bytes, pos: int, out: bytearray) -> int:
        value, end = _zigzag(data, pos)
        out += _encode_zigzag(new(value))
        return end

    return handle


def _list_handler(element: Handler) -> Handler:
    def handle(data: bytes, pos: int, out: bytearray) -> int:
        size, _, start = _list_header(data, pos)
        out += data[pos:start]
        for _ in range(size):
            start = element(data, start, out)
        return start

    return handle


def _refuse(name: str, why: str) -> Handler:
    def handle(data: bytes, pos: int, out: bytearray) -> int:
        raise ValueError(f"{name} {why}: cannot concatenate it")

    return handle


def _row_group_handler(shift: int, ordinal: int, name: str) -> Handler:
    """Copies one RowGroup struct with its offsets moved by `shift` and its ordinal set."""
    meta = {fid: _int_handler(lambda v: v + shift) for fid in _META_OFFSETS}
    meta |= {fid: _refuse(name, why) for fid, why in _META_REFUSED.items()}
    chunk = {
        _CC_FILE_OFFSET: _int_handler(lambda v: v + shift if v else 0),  # 0: not set (Arrow)
        _CC_META: lambda data, pos, out: _copy_struct(data, pos, out, meta),
    }
    chunk |= {fid: _refuse(name, why) for fid, why in _CC_REFUSED.items()}
    group = {
        _RG_COLUMNS: _list_handler(lambda data, pos, out: _copy_struct(data, pos, out, chunk)),
        _RG_FILE_OFFSET: _int_handler(lambda v: v + shift),
        _RG_ORDINAL: _int_handler(lambda v: ordinal),
    }
    return lambda data, pos, out: _copy_struct(data, pos, out, group)


class ParquetConcat:
    """Append Parquet files (same schema, metadata and writer) to one file, in order; `close`
    writes the footer. Not atomic itself: write to a temporary path."""

    def __init__(self, sink: BinaryIO) -> None:
        self._sink = sink
        self._sink.write(MAGIC)
        self._offset = len(MAGIC)
        self._rows = 0
        self._groups = 0
        self._encoded = bytearray()  # the row groups, moved and renumbered
        self._frame: tuple[bytes, bytes, bytes, bytes] | None = None
        self._first = ""
        self.files = 0

    def add(self, path: str | Path) -> None:
        data = Path(path).read_bytes()
        name = str(path)
        if len(data) < 12 or data[:4] != MAGIC or data[-4:] != MAGIC:
            raise ValueError(f"{name} is not a Parquet file")
        (size,) = struct.unpack("<I", data[-8:-4])
        start = len(data) - 8 - size
        if self._frame is None:
            self._frame, self._first = self._read_footer(data, start, name), name
        else:
            self._read_like_first(data, start, name)
        self._sink.write(memoryview(data)[len(MAGIC) : start])
        self.files += 1
        self._offset += start - len(MAGIC)

    def _read_footer(self, data: bytes, pos: int, name: str) -> tuple[bytes, bytes, bytes, bytes]:
        """Append the footer's row groups (moved) to `_encoded`; return the footer's other
        bytes: (before num_rows, num_rows' header, row groups' header, after the row groups)."""
        shift = self._offset - len(MAGIC)
        parts: dict[str, bytes] = {}
        copied, last = pos, 0
        while True:
            header = data[pos]
            if header == 0:
                break
            kind, delta = header & 0x0F, header >> 4
            field_start = pos
            pos += 1
            if delta:
                fid = last + delta
            else:
                fid, pos = _zigzag(data, pos)
            last = fid
            if fid in _FILE_REFUSED:
                _refuse(name, _FILE_REFUSED[fid])(data, pos, self._encoded)
            if fid == _FILE_NUM_ROWS:
                parts["before"] = data[copied:field_start]
                parts["rows_header"] = data[field_start:pos]
                rows, pos = _zigzag(data, pos)
                self._rows += rows
                copied = pos
            elif fid == _FILE_ROW_GROUPS:
                parts["rows_gap"] = data[copied:field_start]
                parts["groups_header"] = data[field_start:pos]
                size, _, pos = _list_header(data, pos)
                for _ in range(size):
                    handler = _row_group_handler(shift, self._groups, name)
                    pos = handler(data, pos, self._encoded)
                    self._groups += 1
                copied = pos
            elif kind not in (_TRUE, _FALSE):
                pos = _skip(data, pos, kind)
        if "before" not in parts or "groups_header" not in parts or parts["rows_gap"]:
            raise ValueError(f"{name}: a footer without num_rows and row_groups in order")
        after = data[copied : pos + 1]
        return parts["before"], parts["rows_header"], parts["groups_header"], after

    def _read_like_first(self, data: bytes, pos: int, name: str) -> None:
        """`_read_footer` for a later file, whose footer must hold the same bytes as the
        first's around its row count and row groups (so only those are read)."""
        assert self._frame is not None
        before, rows_header, groups_header, after = self._frame
        for expected in (before + rows_header, None, groups_header):
            if expected is None:
                rows, pos = _zigzag(data, pos)
            elif data[pos : pos + len(expected)] == expected:
                pos += len(expected)
            else:
                raise ValueError(f"{name} has another schema or metadata than {self._first}")
        size, _, pos = _list_header(data, pos)
        for _ in range(size):
            pos = _row_group_handler(self._offset - len(MAGIC), self._groups, name)(
                data, pos, self._encoded
            )
            self._groups += 1
        if data[pos:-8] != after:
            raise ValueError(f"{name} has another schema or metadata than {self._first}")
        self._rows += rows

    def close(self) -> None:
        """Write the footer: the first file's, with every row group and the summed rows."""
        if self._frame is None:
            raise ValueError("no Parquet file to concatenate")
        before, rows_header, groups_header, after = self._frame
        footer = bytearray(before)
        footer += rows_header + _encode_zigzag(self._rows) + groups_header
        if self._groups < 15:
            footer.append(self._groups << 4 | _STRUCT)
        else:
            footer.append(0xF0 | _STRUCT)
            footer += _encode_varint(self._groups)
        footer += self._encoded
        footer += after
        self._sink.write(footer)
        self._sink.write(struct.pack("<I", len(footer)))
        self._sink.write(MAGIC)


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def concat_parquet(parts: Sequence[str | Path], out: str | Path) -> None:
    """Write the row groups of `parts`, in order, as one Parquet file `out` (not atomic: give
    a temporary path)."""
    with open(out, "wb") as sink:
        concat = ParquetConcat(sink)
        for part in parts:
            concat.add(part)
        concat.close()
