"""The Beam step of ExampleGen: each part of each CSV file (data/csv_reader/parts.py) read and written out as
serialized tf.Examples in one pass.

TFX's CSV path infers column types with a ``beam.CombineGlobally`` over every parsed line, consumed as a side
input: the runner must hold the parsed lines until the inference is done, and the DirectRunner keeps them in
the pipeline process (peak 3.8 GiB at 5M rows). With the schema's types there is nothing to wait for, so the
read, the decoding, the split and the write fuse into one streaming stage.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import IO

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from tensorflow.core.example import example_pb2

from torchtfx.data.csv_reader.columns import ColumnPlan
from torchtfx.data.csv_reader.example_batch import ChangedInputError, serialized_examples
from torchtfx.data.csv_reader.parts import CsvPart, part_records
from torchtfx.data.csv_reader.sources import DataSourceError


def open_input(path: str) -> IO[bytes]:
    """An input file through Beam's filesystems (local, gs://, s3://), as TFX's CSV reader opens it; the checks
    before the Beam work open it the same way, so both read the same bytes."""
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


class CsvPartToExamples(beam.DoFn):
    """A part of a CSV file -> its records as tf.Examples typed by the schema, serialized deterministically (the
    bytes TFX's hash split reads, so an example lands in the same split as with TFX), or as protos when the
    split is by a feature's value."""

    def __init__(
        self,
        schema_types: dict[str, int],
        empty: frozenset[str],
        missing_values: tuple[str, ...] = (),
        serialize: bool = True,
    ):
        self._schema_types = schema_types
        self._empty = empty  # columns without a value in any row (check.py): written without a type
        self._missing_values = missing_values  # read as missing in a numeric column (the dataset config's)
        self._serialize = serialize

    def process(self, part: CsvPart) -> Iterator[bytes | object]:
        plan = ColumnPlan(list(part.header), self._schema_types, self._empty, self._missing_values)
        for _line, _record, example in part_examples(part, plan):
            yield example.SerializeToString(deterministic=True) if self._serialize else example


def part_examples(part: CsvPart, plan: ColumnPlan) -> Iterator[tuple[int, list[str], example_pb2.Example]]:
    """Each record of ``part`` (checked before the Beam work) with the line it starts on and its tf.Example, as
    ExampleGen writes it (batch scoring encodes a chunk at a time the same way: example_batch.py)."""
    for line, record in part_records(part, open_input(part.path)):
        try:
            example = plan.to_example(record)
        except ValueError as err:  # checked before the Beam work: the file changed since
            raise DataSourceError(f"{part.path}, line {line}: {err} (did the file change during the run?)") from None
        yield line, record, example


def part_chunks(part: CsvPart, rows: int) -> Iterator[list[tuple[int, list[str]]]]:
    """The records of ``part`` with the line each starts on, ``rows`` at a time."""
    records = part_records(part, open_input(part.path))
    while chunk := list(itertools.islice(records, rows)):
        yield chunk


def chunk_examples(part: CsvPart, plan: ColumnPlan, chunk: list[tuple[int, list[str]]]) -> list[bytes]:
    """The serialized tf.Examples of consecutive (line, record) pairs of ``part`` (example_batch.py); a record the
    checks before the Beam work did not see this way (its file changed since) is named by file and lines."""
    try:
        return serialized_examples(plan, [record for _line, record in chunk])
    except ChangedInputError as err:
        lines = f"lines {chunk[0][0]}-{chunk[-1][0]}"
        raise DataSourceError(f"{part.path}, {lines}: {err} (did the file change during the run?)") from None
