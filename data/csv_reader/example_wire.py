"""Serialized tf.Examples written in protobuf's wire format a column at a time, byte for byte what
``ColumnPlan.to_example(record).SerializeToString(deterministic=True)`` writes for records that hold one value or
none per column (a CSV row): the features sorted by the UTF-8 bytes of their names, as protobuf's deterministic
serialization sorts a map, so TFX's hash split, which reads these bytes, puts each row where it did before.

Why: ExampleGen built each row's tf.Example in Python and serialized it, 44 us a row on this machine; at 1M rows
that was most of its two workers' CPU (tests/bench/results/README.md, "ExampleGen at 1M rows"). tfx_bsl's C++
encoder is faster but writes the features in another order, so its bytes differ; reordering them in Python costs
13 us a row. Here every step is one Arrow or numpy call over a column.

The wire format (tensorflow/core/example/example.proto, feature.proto): an Example is field 1 (Features), a
Features is field 1 repeated (one map entry per feature: key field 1, value field 2, a Feature), and a Feature
is one of bytes_list (1), float_list (2) or int64_list (3), each a message whose field 1 holds the values: bytes
one by one, floats and int64s packed. Every field here is length-delimited (wire type 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tensorflow_metadata.proto.v0 import schema_pb2

_NOTHING = pa.scalar(b"", pa.large_binary())
# The Feature field of each schema type's value list.
_LIST_FIELDS = {schema_pb2.BYTES: 1, schema_pb2.FLOAT: 2, schema_pb2.INT: 3}
_VARINT_BYTES = 10  # the most bytes of a varint: a negative int64 (two's complement, 64 bits / 7)


@dataclass(frozen=True)
class WireColumn:
    """One column of a chunk of records: its name, schema type and, per row, whether it holds a value; ``values``
    has one entry per row (INT: int64, FLOAT: float32, BYTES: binary; the entry of a row without a value is
    ignored). ``present`` None: the column has no value anywhere and is written without a type."""

    name: str
    kind: int
    present: np.ndarray | None
    values: pa.Array | None


def deterministic_examples(columns: Sequence[WireColumn], rows: int) -> list[bytes]:
    """The ``rows`` serialized tf.Examples of ``columns``, in row order."""
    if not columns:
        return [b""] * rows
    entries = [_map_entry(column, rows) for column in sorted(columns, key=lambda column: column.name.encode())]
    features = pc.binary_join_element_wise(*entries, _NOTHING)
    return _field(1, features).to_pylist()


def _map_entry(column: WireColumn, rows: int) -> pa.Array:
    """Each row's ``Features.feature`` entry of ``column``, with its own field tag and length."""
    key = column.name.encode()
    key_field = _scalar(_tag(1) + _varint(len(key)) + key)
    return _field(1, pc.binary_join_element_wise(key_field, _field(2, _feature(column, rows)), _NOTHING))


def _feature(column: WireColumn, rows: int) -> pa.Array:
    if column.present is None:  # no type: an empty Feature
        return pa.nulls(rows, pa.large_binary()).fill_null(b"")
    assert column.values is not None
    list_field = _LIST_FIELDS[column.kind]
    if column.kind == schema_pb2.INT:
        payload = varints(column.values.to_numpy(zero_copy_only=False).view(np.uint64))
    elif column.kind == schema_pb2.FLOAT:
        floats = np.ascontiguousarray(column.values.to_numpy(zero_copy_only=False), dtype="<f4")
        offsets = np.arange(0, 4 * rows + 1, 4, dtype=np.int64)
        buffers = [None, pa.py_buffer(offsets), pa.py_buffer(floats)]
        payload = pa.LargeBinaryArray.from_buffers(pa.large_binary(), rows, buffers)
    else:
        payload = column.values.cast(pa.large_binary())
    typed = _field(list_field, _field(1, payload))
    empty = _scalar(_tag(list_field) + b"\x00")  # a missing value: a typed, empty value list
    return pc.if_else(pa.array(column.present, pa.bool_()), typed, empty)


def _field(number: int, payloads: pa.Array) -> pa.Array:
    """Each payload as a length-delimited field ``number``: its tag, its length as a varint, its bytes."""
    lengths = pc.binary_length(payloads).to_numpy(zero_copy_only=False)
    return pc.binary_join_element_wise(_scalar(_tag(number)), varints(lengths.astype(np.uint64)), payloads, _NOTHING)


def varints(values: np.ndarray) -> pa.Array:
    """Each unsigned 64-bit value as a protobuf varint: 7 bits a byte, low bits first, the high bit set on every
    byte but the last."""
    values = np.asarray(values, dtype=np.uint64)
    if not len(values) or values.max() < 0x80:  # one byte each: most lengths here
        offsets = np.arange(len(values) + 1, dtype=np.int64)
        buffers = [None, pa.py_buffer(offsets), pa.py_buffer(values.astype(np.uint8))]
        return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(values), buffers)
    sizes = np.ones(len(values), np.int64)
    for k in range(1, _VARINT_BYTES):
        sizes += values >= np.uint64(1 << (7 * k))
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    data = np.empty(int(offsets[-1]), np.uint8)
    starts, rest = offsets[:-1], values.copy()
    for k in range(int(sizes.max())):
        rows = np.flatnonzero(sizes > k)
        more = np.where(sizes[rows] > k + 1, 0x80, 0).astype(np.uint8)
        data[starts[rows] + k] = (rest[rows] & np.uint64(0x7F)).astype(np.uint8) | more
        rest >>= np.uint64(7)
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(values), buffers)


def _varint(value: int) -> bytes:
    return varints(np.array([value], np.uint64))[0].as_py()


def _tag(number: int) -> bytes:
    return bytes([number << 3 | 2])  # field numbers here are 1-3: one byte


def _scalar(data: bytes) -> pa.Scalar:
    return pa.scalar(data, pa.large_binary())
