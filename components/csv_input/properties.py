"""What CsvExampleGen's execution properties say: the custom_config the component wrote (component.py), the
output split config, and for a dataset of spans the window and the span store."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from google.protobuf import json_format, struct_pb2
from tfx.components.example_gen import utils
from tfx.proto import example_gen_pb2
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

from torchtfx.components.csv_input.constants import (
    MAX_CELL_CHARS_KEY,
    MISSING_VALUES_KEY,
    SAMPLE_KEY,
    SCHEMA_FILE_KEY,
    SPAN_PATTERN_KEY,
    SPAN_STORE_KEY,
    SPAN_WINDOW_KEY,
)
from torchtfx.components.csv_input.span_store import EntrySettings, SpanStore
from torchtfx.data.config.dataset import MAX_CELL_CHARS
from torchtfx.data.config.missing import DEFAULT_MISSING_VALUES, checked_markers
from torchtfx.data.spans.layout import SpanInput, window


def custom_config(exec_properties: dict[str, Any]) -> struct_pb2.Struct:
    """The component's custom_config (component.py:schema_custom_config), which names the curated schema."""
    config = exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY)
    if isinstance(config, str):
        config = proto_utils.json_to_proto(config, example_gen_pb2.CustomConfig())
    values = struct_pb2.Struct()
    if config is None or not config.custom_config.Unpack(values) or SCHEMA_FILE_KEY not in values:
        raise ValueError(
            f"CsvExampleGen decodes the CSV with the curated schema: build it with "
            f"torchtfx.components.csv_input.component.checked_csv_example_gen(schema_file=...) (custom_config: "
            f"{json_format.MessageToJson(config) if config is not None else None})"
        )
    return values


def schema_file(exec_properties: dict[str, Any]) -> str:
    """The curated schema named in the component's custom_config."""
    return custom_config(exec_properties)[SCHEMA_FILE_KEY]


def missing_values(exec_properties: dict[str, Any]) -> tuple[str, ...]:
    """The text read as a missing value in a numeric column (the default list where the config has none)."""
    values = custom_config(exec_properties)
    return checked_markers(list(values[MISSING_VALUES_KEY])) if MISSING_VALUES_KEY in values else DEFAULT_MISSING_VALUES


def max_cell_chars(exec_properties: dict[str, Any]) -> int:
    """The most characters one cell may hold (the dataset config's default where the custom_config has none)."""
    values = custom_config(exec_properties)
    return int(values[MAX_CELL_CHARS_KEY]) if MAX_CELL_CHARS_KEY in values else MAX_CELL_CHARS


def sample(exec_properties: dict[str, Any]) -> float:
    """The fraction of rows kept (every row where the custom_config has none)."""
    values = custom_config(exec_properties)
    return float(values[SAMPLE_KEY]) if SAMPLE_KEY in values else 1.0


def window_spans(exec_properties: dict[str, Any]) -> list[SpanInput]:
    """The window's spans, oldest first, the newest last (none for a data root without spans). The newest is the
    input split TFX's driver resolved, whose number it put into the ``span`` property."""
    values = custom_config(exec_properties)
    if SPAN_PATTERN_KEY not in values:
        return []
    newest = int(exec_properties[utils.SPAN_PROPERTY_NAME])
    input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
    return window(input_base, values[SPAN_PATTERN_KEY], int(values[SPAN_WINDOW_KEY]), newest)


def older_spans(exec_properties: dict[str, Any]) -> list[SpanInput]:
    """The window's spans before the newest one, oldest first."""
    return window_spans(exec_properties)[:-1]


@contextlib.contextmanager
def span_store(exec_properties: dict[str, Any]) -> Iterator[SpanStore]:
    """Where a dataset of spans keeps each span's examples for later runs; without one (the Kubeflow steps), a
    store on the local disk for this run alone, removed after it (its files are copied into the output)."""
    values = custom_config(exec_properties)
    splits = [(s.name, s.hash_buckets) for s in output_config(exec_properties).split_config.splits]
    settings = EntrySettings.of(
        schema_file(exec_properties),
        missing_values(exec_properties),
        max_cell_chars(exec_properties),
        sample(exec_properties),
        splits,
    )
    if SPAN_STORE_KEY in values:
        yield SpanStore(values[SPAN_STORE_KEY], settings)
        return
    root = tempfile.mkdtemp(prefix="torchtfx-span-store-")
    try:
        yield SpanStore(root, settings)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def output_config(exec_properties: dict[str, Any]) -> example_gen_pb2.Output:
    return proto_utils.json_to_proto(
        exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], example_gen_pb2.Output()
    )
