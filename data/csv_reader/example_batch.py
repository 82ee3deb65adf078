"""Many checked records to serialized tf.Examples in one call, a column at a time: the cells are parsed by Arrow,
typed by the column plan, and written by example_wire.py, byte for byte what :meth:`ColumnPlan.to_example` and
a deterministic serialization write (tests/unit/data/csv_reader/test_example_batch.py holds that over every
spelling a cell may have), so ExampleGen's hash split puts each row where it did.

Why: building each tf.Example in Python and serializing it took 7.5 s of ``torchtfx predict``'s 21 s on 150,020
taxi rows, against 0.3 s for the served model itself at 8,192-row calls (profiled on 2 cores); ExampleGen spent
most of its CPU there at 1M rows.

A numeric column is parsed by Arrow (correctly rounded, as Python's ``float``/``int``) where Arrow reads every
cell; a cell only Python reads (``3.0`` in an INT column, ``1_000``, blanks around a number) sends the whole
column through the plan's own parser, so both ways give the same number.

``encode_list_columns`` writes other list columns (the MLflow pyfunc's frames) with tfx_bsl's C++ encoder.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder

from torchtfx.data.csv_reader.columns import ColumnPlan, parse_float, parse_int
from torchtfx.data.csv_reader.example_wire import WireColumn, deterministic_examples

_ARROW_TYPES = {schema_pb2.INT: pa.int64(), schema_pb2.FLOAT: pa.float64(), schema_pb2.BYTES: pa.large_binary()}
_VALUE_TYPES = {schema_pb2.INT: pa.int64(), schema_pb2.FLOAT: pa.float32(), schema_pb2.BYTES: pa.large_binary()}
_NUMPY_TYPES = {schema_pb2.INT: np.int64, schema_pb2.FLOAT: np.float32}
_PARSERS: dict[int, Callable[[str], object]] = {schema_pb2.INT: parse_int, schema_pb2.FLOAT: parse_float}


class ChangedInputError(ValueError):
    """A record the checks did not see this way: its file changed after the checks."""


def serialized_examples(plan: ColumnPlan, records: Sequence[Sequence[str]]) -> list[bytes]:
    """The serialized tf.Example of each checked record, in order."""
    if not records:
        return []
    columns = []
    for (name, kind, typed, missing), cells in zip(plan.encodings, zip(*records, strict=True), strict=True):
        if typed:
            columns.append(_wire_column(name, kind, cells, missing))
        elif all(cell in missing for cell in cells):
            columns.append(WireColumn(name, kind, None, None))
        else:
            raise ChangedInputError(f"column {name!r} had no value in any row when checked and has one now")
    return deterministic_examples(columns, len(records))


def encode_list_columns(
    names: Sequence[str], columns: Sequence[pa.Array], rows: int, untyped: Sequence[str] = ()
) -> list[bytes]:
    """``rows`` serialized tf.Examples from one Arrow list column per typed feature (a row's list holds its values;
    an empty list is a typed, empty value list: a missing value) and the features written without a type."""
    encoded = (
        RecordBatchToExamplesEncoder().encode(pa.RecordBatch.from_arrays(list(columns), list(names)))
        if columns
        else [b""] * rows
    )
    if not untyped:
        return encoded
    # A feature without a type, as to_example writes it: a serialized message followed by another of the same
    # type parses as their merge, so the untyped features are appended as one Example's bytes.
    suffix = example_pb2.Example(
        features=feature_pb2.Features(feature={name: feature_pb2.Feature() for name in untyped})
    ).SerializeToString()
    return [example + suffix for example in encoded]


def list_column(values: pa.Array, present: np.ndarray) -> pa.Array:
    """A list per row: the next of ``values`` where ``present``, else an empty list."""
    offsets = np.concatenate([np.zeros(1, np.int64), np.cumsum(present, dtype=np.int64)])
    return pa.LargeListArray.from_arrays(pa.array(offsets), values)


def _wire_column(name: str, kind: int, cells: Sequence[str], missing: frozenset[str]) -> WireColumn:
    """One column's cells: which hold a value, and the value of each row (0 where there is none)."""
    strings = pa.array(cells, type=pa.large_string())
    present = pc.invert(pc.is_in(strings, value_set=pa.array(sorted(missing), type=pa.large_string())))
    present_rows = present.to_numpy(zero_copy_only=False)
    if kind == schema_pb2.BYTES:
        return WireColumn(name, kind, present_rows, strings)
    values = np.zeros(len(cells), _NUMPY_TYPES[kind])
    values[present_rows] = _typed_values(name, kind, strings.filter(present)).to_numpy(zero_copy_only=False)
    return WireColumn(name, kind, present_rows, pa.array(values))


def _typed_values(name: str, kind: int, values: pa.Array) -> pa.Array:
    if kind == schema_pb2.BYTES:
        return values.cast(pa.large_binary())  # UTF-8, as str.encode
    try:
        parsed = pc.cast(values, _ARROW_TYPES[kind])
    except pa.ArrowInvalid:  # a spelling only Python reads: the plan's parser for the whole column
        numbers = [_PARSERS[kind](text) for text in values.to_pylist()]
        if any(number is None for number in numbers):
            raise ChangedInputError(f"column {name!r} holds a value that is not a number now") from None
        parsed = pa.array(numbers, type=_ARROW_TYPES[kind])
    return parsed.cast(_VALUE_TYPES[kind]) if kind == schema_pb2.FLOAT else parsed
