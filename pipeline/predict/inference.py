"""The Beam pipeline of batch scoring: parts of the checked CSV files -> the tf.Example ExampleGen would write for
each record (data/csv_reader/decode.py:part_examples), keyed by file, line and key columns -> Beam's
RunInference, batched, through the SavedModel's ``serving_default`` -> rows -> a CSV or Parquet sink.

The model handler is this module's :class:`ServingSignatureHandler`, not Beam's TF handler or tfx_bsl's (what
TFX's BulkInferrer runs). Beam's ``TFModelHandlerTensor`` loads a Keras model and feeds it tensors; this SavedModel
is a ``tf.Module`` whose signature takes serialized tf.Examples. tfx_bsl's handler serves it, through a TF1
session, but answers with a ``PredictionLog`` proto per row, holding a copy of the input example and one
TensorProto per output, only for this step to parse it back. The handler here loads the SavedModel as TF Serving
and the Evaluator see it (``tf.saved_model.load``) and hands RunInference each batch's outputs as arrays; batching,
one model per worker process and the inference metrics are RunInference's.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import KeyedModelHandler, ModelHandler, RunInference

from torchtfx.components.shared.batching import rows_per_call
from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, SERVING_SIGNATURE
from torchtfx.data.csv_reader.columns import ColumnPlan
from torchtfx.data.csv_reader.decode import part_examples
from torchtfx.data.csv_reader.parts import CsvPart
from torchtfx.pipeline.predict.outputs import OutputPlan, RowKey
from torchtfx.pipeline.predict.source import CheckedSource

logger = logging.getLogger(__name__)

METRICS_NAMESPACE = "torchtfx.predict"
ROWS_SCORED = "rows_scored"
MIN_BATCH, MAX_BATCH = 64, 2048  # examples per serving_default call (RunInference adapts between them)
PROGRESS_EVERY_S = 5.0
_LAUNCHER_PID = os.getpid()  # a worker process that imports this module again has another pid


class ServingSignatureHandler(ModelHandler[bytes, dict, Any]):
    """RunInference's model handler for a SavedModel whose ``serving_default`` takes serialized tf.Examples."""

    def __init__(self, saved_model_dir: str, min_batch: int = MIN_BATCH, max_batch: int = MAX_BATCH):
        super().__init__()
        self._saved_model_dir = saved_model_dir
        self._batching = {"min_batch_size": min_batch, "max_batch_size": max_batch}

    def load_model(self) -> Any:
        import tensorflow as tf

        return tf.saved_model.load(self._saved_model_dir)  # the object: its signatures hold only weak references

    def run_inference(self, batch: Sequence[bytes], model: Any, inference_args: dict | None = None) -> list[dict]:
        outputs = call_signature(model, list(batch))
        return [{name: values[i] for name, values in outputs.items()} for i in range(len(batch))]

    def get_num_bytes(self, batch: Sequence[bytes]) -> int:
        return sum(len(example) for example in batch)

    def batch_elements_kwargs(self) -> dict[str, int]:
        return self._batching


def call_signature(model: Any, examples: list[bytes]) -> dict[str, np.ndarray]:
    """``serving_default`` of a loaded SavedModel on serialized tf.Examples: its outputs as arrays, by name."""
    import tensorflow as tf

    outputs = model.signatures[SERVING_SIGNATURE](**{EXAMPLES_INPUT: tf.constant(examples, tf.string)})
    return {name: tensor.numpy() for name, tensor in outputs.items()}


class PartToKeyedExamples(beam.DoFn):
    """A part of a checked CSV file -> (file, line, key cells) and the record's serialized tf.Example, encoded as
    ExampleGen encodes it (the schema's types, its missing values, columns without any value untyped)."""

    def __init__(
        self,
        schema_types: dict[str, int],
        empty: frozenset[str],
        missing_values: tuple[str, ...],
        keys: tuple[str, ...],
    ):
        self._schema_types = schema_types
        self._empty = empty
        self._missing_values = missing_values
        self._keys = keys

    def process(self, part: CsvPart) -> Iterator[tuple[RowKey, bytes]]:
        plan = ColumnPlan(list(part.header), self._schema_types, self._empty, self._missing_values)
        positions = [part.header.index(name) for name in self._keys]
        for line, record, example in part_examples(part, plan):
            yield (part.path, line, tuple(record[i] for i in positions)), example.SerializeToString()


class _Progress:
    """Rows scored in this process, logged every PROGRESS_EVERY_S seconds."""

    def __init__(self, total: int):
        self._total = total
        self._lock = threading.Lock()
        self._count = 0
        self._start = self._last = time.monotonic()

    def add(self) -> None:
        with self._lock:
            self._count += 1
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


class ToOutputRow(beam.DoFn):
    """(key, outputs) -> the written row (a CSV line or a Parquet record), counted in the ROWS_SCORED metric."""

    def __init__(self, plan: OutputPlan, as_csv: bool, total: int):
        self._plan = plan
        self._as_csv = as_csv
        self._total = total
        self._rows = Metrics.counter(METRICS_NAMESPACE, ROWS_SCORED)
        self._progress: _Progress | None = None

    def setup(self) -> None:
        self._progress = _Progress(self._total)

    def process(self, scored: tuple[RowKey, dict]) -> Iterator[str | dict]:
        key, outputs = scored
        self._rows.inc()
        if self._progress is not None:
            self._progress.add()
        yield self._plan.csv_line(key, outputs) if self._as_csv else self._plan.record(key, outputs)


def scored_rows(
    pipeline: beam.Pipeline,
    parts: list[CsvPart],
    source: CheckedSource,
    saved_model_dir: str,
    plan: OutputPlan,
    as_csv: bool,
    tokens: int = 0,
) -> beam.PCollection:
    """The pipeline up to the rows to write; ``tokens``: the model's token ids per row (its text features'
    ``max_length``), which caps the rows per call (``batching.rows_per_call``)."""
    handler = KeyedModelHandler(ServingSignatureHandler(saved_model_dir, max_batch=rows_per_call(tokens, MAX_BATCH)))
    return (
        pipeline
        | "CreateParts" >> beam.Create(parts)
        | "SpreadParts" >> beam.Reshuffle()  # parts to the workers (ExampleGen's reason: Create fuses otherwise)
        | "CsvToExamples"
        >> beam.ParDo(PartToKeyedExamples(source.schema_types, source.empty, source.missing_values, plan.keys))
        | "RunInference" >> RunInference(handler)
        | "ToRows" >> beam.ParDo(ToOutputRow(plan, as_csv, source.rows))
    )
