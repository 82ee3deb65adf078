"""TFX's CsvExampleGen with the checking, schema-typed executor; the component id stays TFX's ``CsvExampleGen``."""

from __future__ import annotations

from google.protobuf import struct_pb2
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.dsl.components.base import executor_spec
from tfx.proto import example_gen_pb2

from torchtfx.components.csv_input import executor
from torchtfx.components.csv_input.constants import (
    MAX_CELL_CHARS_KEY,
    MISSING_VALUES_KEY,
    SAMPLE_KEY,
    SCHEMA_FILE_KEY,
    SPAN_PATTERN_KEY,
    SPAN_STORE_KEY,
    SPAN_WINDOW_KEY,
)
from torchtfx.components.csv_input.driver import SpanWindowDriver
from torchtfx.components.shared.contracts import EXAMPLE_GEN_ID
from torchtfx.data.config.dataset import MAX_CELL_CHARS
from torchtfx.data.config.missing import DEFAULT_MISSING_VALUES
from torchtfx.data.config.spans import SpanConfig
from torchtfx.data.csv_reader.files import INPUT_PATTERN


def schema_custom_config(
    schema_file: str,
    missing_values: tuple[str, ...] = DEFAULT_MISSING_VALUES,
    max_cell_chars: int = MAX_CELL_CHARS,
    sample: float = 1.0,
    spans: SpanConfig | None = None,
    span_store: str = "",
) -> example_gen_pb2.CustomConfig:
    """The component's custom_config: the curated schema whose types decode the CSV (the DataGate's schema too),
    the text read as a missing value in its numeric columns, the most characters one cell may hold, and the
    fraction of rows kept (absent when 1: the properties of a dataset that keeps every row stay as they were), and
    the spans pattern and window of a data root of spans, and where its spans' examples are kept for later runs."""
    values = struct_pb2.Struct()
    values.update({SCHEMA_FILE_KEY: schema_file, MISSING_VALUES_KEY: list(missing_values)})
    if max_cell_chars != MAX_CELL_CHARS:
        values.update({MAX_CELL_CHARS_KEY: max_cell_chars})
    if sample != 1.0:
        values.update({SAMPLE_KEY: sample})
    if spans is not None:
        values.update({SPAN_PATTERN_KEY: spans.pattern, SPAN_WINDOW_KEY: spans.window})
        if span_store:
            values.update({SPAN_STORE_KEY: span_store})
    config = example_gen_pb2.CustomConfig()
    config.custom_config.Pack(values)
    return config


def checked_csv_example_gen(
    input_base: str,
    output_config: example_gen_pb2.Output,
    schema_file: str,
    missing_values: tuple[str, ...] = DEFAULT_MISSING_VALUES,
    max_cell_chars: int = MAX_CELL_CHARS,
    sample: float = 1.0,
    spans: SpanConfig | None = None,
    span_store: str = "",
) -> FileBasedExampleGen:
    """ExampleGen over the ``*.csv`` files of ``input_base`` (the files data/csv_reader/sources.py:csv_files
    checks), each column decoded with ``schema_file``'s type; ``missing_values`` in a numeric column are missing
    values; a cell may hold up to ``max_cell_chars`` characters; ``sample``: the fraction of rows kept.

    With ``spans``, the input is the files of the newest span (TFX's driver resolves it, and the Examples carry its
    ``span`` and ``version``) and the executor reads the older spans of the window beside it; with ``span_store``,
    each span is read once and kept there for the runs after (span_store.py)."""
    pattern = spans.pattern if spans is not None else INPUT_PATTERN
    split = example_gen_pb2.Input.Split(name="single_split", pattern=pattern)
    component = FileBasedExampleGen(
        input_base=input_base,
        input_config=example_gen_pb2.Input(splits=[split]),
        output_config=output_config,
        custom_config=schema_custom_config(schema_file, missing_values, max_cell_chars, sample, spans, span_store),
        custom_executor_spec=executor_spec.BeamExecutorSpec(executor.Executor),
    )
    if spans is not None:
        component.driver_class = SpanWindowDriver  # the window's older spans in the cache key (driver.py)
    return component.with_id(EXAMPLE_GEN_ID)
