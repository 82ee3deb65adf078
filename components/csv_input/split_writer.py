"""ExampleGen's Beam work for gzipped TFRecords: each part of the checked input (data/csv_reader/parts.py) read,
encoded and written straight into one file of each output split, by one DoFn call per part.

Why: TFX's path (examples as Beam elements -> hash partition -> ``WriteToTFRecord``) spent its time per element
in Python: at 1M taxi rows, of ExampleGen's 184.5 CPU-s in its two workers, 45.7 s built the tf.Examples, 23.5 s
wrote the TFRecords (gzip and the records' CRCs in Python's ``crcmod``), about 19 s was Beam's per-element work
and 6.3 s the partition (py-spy, tests/bench/results/README.md). Here the examples are encoded a chunk at a time
(data/csv_reader/example_batch.py) and TF's C++ ``TFRecordWriter`` writes them.

What stays TFX's: the split of each example by ``base_example_gen_executor._PartitionFn`` (the hash of the
same deterministic bytes, so a row lands where TFX puts it), the sample's hash (sample.py), the output split
names and the ``data_tfrecord-*.gz`` files in ``Split-<name>`` folders that every TFX reader globs.

A part's files are written under temporary names outside the split folders and renamed when the part is done,
to the same name a retried part would write: a failed part leaves no file that a reader of the split would take.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass

import apache_beam as beam
import tensorflow as tf
from apache_beam.metrics import Metrics
from tfx.components.example_gen import base_example_gen_executor, write_split
from tfx.proto import example_gen_pb2

from torchtfx.data.csv_reader.columns import ColumnPlan
from torchtfx.data.csv_reader.decode import chunk_examples, part_chunks
from torchtfx.data.csv_reader.parts import CsvPart
from torchtfx.data.csv_reader.sample import in_sample

CHUNK_ROWS = 8192  # records encoded per call: the batch encoder's cost per row is flat from here (measured)
METRICS_NAMESPACE = "torchtfx.example_gen"


_HASH_SPLIT = example_gen_pb2.SplitConfig()  # no partition feature: the hash split reads the serialized example


@dataclass(frozen=True)
class SplitTargets:
    """Where one input split's examples go: the output split folders and, for more than one, TFX's hash buckets
    (the running totals of the split config's ``hash_buckets``)."""

    uris: tuple[str, ...]
    buckets: tuple[int, ...] = ()

    def split_of(self, example: bytes) -> int:
        if not self.buckets:
            return 0
        # One list and one SplitConfig for every row: 1.51-1.52 us a row against 1.56 with new ones per row
        # (200,000 rows, 3 alternating rounds, the same splits).
        return base_example_gen_executor._PartitionFn(example, len(self.buckets), self._bucket_list, _HASH_SPLIT)

    @functools.cached_property
    def _bucket_list(self) -> list[int]:
        return list(self.buckets)


@dataclass(frozen=True)
class PartColumns:
    """What turns a part's records into examples: the schema's types, the columns without a value anywhere and
    the numeric columns' missing-value text (the checks'), and the fraction of rows kept."""

    schema_types: dict[str, int]
    empty: frozenset[str]
    missing_values: tuple[str, ...]
    sample: float = 1.0


class WritePart(beam.DoFn):
    """(index, part) -> the part's examples in one file per output split; yields (split folder, examples)."""

    def __init__(self, columns: PartColumns, targets: SplitTargets, parts: int):
        self._columns = columns
        self._targets = targets
        self._parts = parts
        self._written = Metrics.counter(METRICS_NAMESPACE, "examples_written")

    def process(self, indexed: tuple[int, CsvPart]) -> Iterator[tuple[str, int]]:
        index, part = indexed
        columns = self._columns
        plan = ColumnPlan(list(part.header), columns.schema_types, columns.empty, columns.missing_values)
        finals = [shard_path(uri, index, self._parts) for uri in self._targets.uris]
        temporaries = [_temporary_path(uri, index) for uri in self._targets.uris]
        counts = [0] * len(finals)
        try:
            with contextlib.ExitStack() as files:  # each writer closed, also when a chunk fails
                writers = [files.enter_context(tf.io.TFRecordWriter(path, options="GZIP")) for path in temporaries]
                for chunk in part_chunks(part, CHUNK_ROWS):
                    for example in chunk_examples(part, plan, chunk):
                        if columns.sample < 1.0 and not in_sample(example, columns.sample):
                            continue
                        split = self._targets.split_of(example)
                        writers[split].write(example)
                        counts[split] += 1
            for temporary, final in zip(temporaries, finals, strict=True):
                tf.io.gfile.rename(temporary, final, overwrite=True)
        finally:
            for temporary in temporaries:
                if tf.io.gfile.exists(temporary):
                    tf.io.gfile.remove(temporary)
        self._written.inc(sum(counts))
        yield from zip(self._targets.uris, counts, strict=True)


def shard_path(split_uri: str, index: int, parts: int) -> str:
    """Part ``index``'s file in a split folder, named as Beam's ``WriteToTFRecord`` names its shards."""
    return os.path.join(split_uri, f"{write_split.DEFAULT_FILE_NAME}-{index:05d}-of-{parts:05d}.gz")


def _temporary_path(split_uri: str, index: int) -> str:
    """Beside the split folder, not in it: a TFX reader takes every file the folder holds."""
    parent, name = os.path.split(split_uri.rstrip("/"))
    return os.path.join(parent, f".writing-{name}-{index:05d}.gz")


def write_parts(pipeline: beam.Pipeline, label: str, parts: list[CsvPart], columns: PartColumns, targets: SplitTargets):
    """The Beam steps that write one input split's parts; returns the (split folder, examples) counts."""
    return (
        pipeline
        | f"CreateParts[{label}]" >> beam.Create(list(enumerate(parts)))
        # Parts go to the workers from here: without it, Create fuses with the write into one worker's bundle.
        | f"SpreadParts[{label}]" >> beam.Reshuffle()
        | f"WriteParts[{label}]" >> beam.ParDo(WritePart(columns, targets, len(parts)))
    )
