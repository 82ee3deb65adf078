"""The Beam pipeline of batch scoring: parts of the checked CSV files -> for each part, its records in chunks of
rows -> each chunk encoded as the tf.Examples ExampleGen writes (data/csv_reader/example_batch.py, a column at a
time), scored by one call of the SavedModel's ``serving_default`` and written as one element (CSV lines or an Arrow
table) -> a CSV or Parquet sink.

Nothing here runs per row in Python but reading the CSV records and formatting the written cells. Profiled on
150,020 taxi rows (2 cores): the per-row path (a tf.Example built and serialized in Python per record, Beam's
RunInference batching single rows and a DoFn per scored row) took 21 s, 7.5 s of it building examples, against
0.3 s for the served model itself at 8,192-row calls.

The model is loaded as TF Serving and the Evaluator see it (``tf.saved_model.load``), once per worker process
(Beam's ``Shared``); the probe before the Beam work holds the same one, so an in-process run loads it once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.utils.shared import Shared

from torchtfx.components.shared.batching import rows_per_call
from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, SERVING_SIGNATURE
from torchtfx.data.csv_reader.columns import ColumnPlan
from torchtfx.data.csv_reader.decode import chunk_examples, part_chunks
from torchtfx.data.csv_reader.parts import CsvPart
from torchtfx.pipeline.predict.outputs import OutputPlan, ScoredRows
from torchtfx.pipeline.predict.source import CheckedSource

logger = logging.getLogger(__name__)

METRICS_NAMESPACE = "torchtfx.predict"
ROWS_SCORED = "rows_scored"
PROGRESS_EVERY_S = 5.0
_LAUNCHER_PID = os.getpid()  # a worker process that imports this module again has another pid
_MODELS = Shared()  # one loaded SavedModel per process, by folder


class LoadedModel:
    """A loaded SavedModel (the object: its signatures hold only weak references), shareable through ``Shared``."""

    def __init__(self, saved_model_dir: str):
        import tensorflow as tf

        self.model = tf.saved_model.load(saved_model_dir)


def load_served(saved_model_dir: str) -> LoadedModel:
    """This process's loaded ``saved_model_dir``: loaded once while anyone holds the returned object."""
    return _MODELS.acquire(lambda: LoadedModel(saved_model_dir), tag=saved_model_dir)


def call_signature(loaded: LoadedModel, examples: list[bytes]) -> dict[str, np.ndarray]:
    """``serving_default`` on serialized tf.Examples: its outputs as arrays, by name."""
    import tensorflow as tf

    outputs = loaded.model.signatures[SERVING_SIGNATURE](**{EXAMPLES_INPUT: tf.constant(examples, tf.string)})
    return {name: tensor.numpy() for name, tensor in outputs.items()}


class _Progress:
    """Rows scored in this process, logged every PROGRESS_EVERY_S seconds."""

    def __init__(self, total: int):
        self._total = total
        self._lock = threading.Lock()
        self._count = 0
        self._start = self._last = time.monotonic()

    def add(self, rows: int) -> None:
        with self._lock:
            self._count += rows
            now = time.monotonic()
            if now - self._last < PROGRESS_EVERY_S:
                return
            self._last = now
            count, rate = self._count, self._count / (now - self._start)
        where = "" if os.getpid() == _LAUNCHER_PID else f" by worker process {os.getpid()}"
        logger.info(
            "Scored %s of %s rows%s (%.0f%%), %s rows/s",
            f"{count:,}",
            f"{self._total:,}",
            where,
            100.0 * count / self._total,
            f"{rate:,.0f}",
        )


class ScorePart(beam.DoFn):
    """A part of a checked CSV file -> its scored rows, one element per ``rows`` records: CSV lines (one string)
    or an Arrow table; every record counted in the ROWS_SCORED metric."""

    def __init__(
        self, saved_model_dir: str, source: CheckedSource, plan: OutputPlan, as_csv: bool, rows: int, total: int
    ):
        self._saved_model_dir = saved_model_dir
        self._columns = (source.schema_types, source.empty, source.missing_values)
        self._plan = plan
        self._as_csv = as_csv
        self._rows = rows
        self._total = total
        self._scored = Metrics.counter(METRICS_NAMESPACE, ROWS_SCORED)
        self._loaded: LoadedModel | None = None
        self._progress: _Progress | None = None

    def setup(self) -> None:
        self._loaded = load_served(self._saved_model_dir)
        self._progress = _Progress(self._total)

    def process(self, part: CsvPart) -> Iterator[Any]:
        assert self._loaded is not None and self._progress is not None  # setup() ran
        schema_types, empty, missing_values = self._columns
        columns = ColumnPlan(list(part.header), schema_types, empty, missing_values)
        positions = [part.header.index(name) for name in self._plan.keys]
        for chunk in part_chunks(part, self._rows):
            rows = ScoredRows(
                part.path,
                [line for line, _record in chunk],
                [tuple(record[i] for i in positions) for _line, record in chunk],
                call_signature(self._loaded, chunk_examples(part, columns, chunk)),
            )
            yield self._plan.csv_text(rows) if self._as_csv else self._plan.table(rows)
            self._scored.inc(len(chunk))
            self._progress.add(len(chunk))


def scored_rows(
    pipeline: beam.Pipeline,
    parts: list[CsvPart],
    source: CheckedSource,
    saved_model_dir: str,
    plan: OutputPlan,
    as_csv: bool,
    tokens: int = 0,
) -> beam.PCollection:
    """The pipeline up to the elements to write; ``tokens``: the model's token ids per row (its text features'
    ``max_length``), which caps the rows per call (``batching.rows_per_call``)."""
    score = ScorePart(saved_model_dir, source, plan, as_csv, rows_per_call(tokens), source.rows)
    return (
        pipeline
        | "CreateParts" >> beam.Create(parts)
        | "SpreadParts" >> beam.Reshuffle()  # parts to the workers (ExampleGen's reason: Create fuses otherwise)
        | "Score" >> beam.ParDo(score)
    )
