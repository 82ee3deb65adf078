"""CsvExampleGen's executor: every input CSV checked against the curated schema first (structure, header,
every value readable as its schema type: data/csv_reader/check.py), so bad input stops the run with its
file, line and column instead of a Beam stack trace; then decoded with the schema's types
(data/csv_reader/decode.py) rather than TFX's type inference.

It writes the splits without TFX's ``Reshuffle`` before the write: on the DirectRunner a shuffle holds
every serialized example in the pipeline process (2.5 GiB there at 1M rows, and not given back to the OS
for the rest of the run). Nothing downstream depends on the order on disk: the Trainer shuffles every
epoch, and Transform, StatisticsGen and the Evaluator aggregate. For TFX's hash split (the pipeline's), each
part of the input goes straight into one file per split (split_writer.py); a split by a feature's value
keeps TFX's Beam steps.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any, cast

import apache_beam as beam
from google.protobuf import json_format, struct_pb2
from tfx import types
from tfx.components.example_gen import base_example_gen_executor, utils, write_split
from tfx.components.util import examples_utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from torchtfx.components.csv_input.constants import (
    MAX_CELL_CHARS_KEY,
    MISSING_VALUES_KEY,
    SAMPLE_KEY,
    SCHEMA_FILE_KEY,
    SPAN_PATTERN_KEY,
    SPAN_WINDOW_KEY,
    WINDOW_SPANS_PROPERTY,
)
from torchtfx.components.csv_input.split_writer import PartColumns, SplitTargets, write_parts
from torchtfx.data.config.dataset import MAX_CELL_CHARS
from torchtfx.data.config.missing import DEFAULT_MISSING_VALUES, checked_markers
from torchtfx.data.csv_reader.beam_parts import input_parts
from torchtfx.data.csv_reader.check import check_inputs
from torchtfx.data.csv_reader.columns import load_schema_types
from torchtfx.data.csv_reader.decode import CsvPartToExamples, open_input
from torchtfx.data.csv_reader.files import split_files
from torchtfx.data.csv_reader.parts import CsvPart
from torchtfx.data.csv_reader.sample import in_sample
from torchtfx.data.spans.layout import SpanInput, window

logger = logging.getLogger(__name__)


def _custom_config(exec_properties: dict[str, Any]) -> struct_pb2.Struct:
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
    return _custom_config(exec_properties)[SCHEMA_FILE_KEY]


def missing_values(exec_properties: dict[str, Any]) -> tuple[str, ...]:
    """The text read as a missing value in a numeric column (the default list where the config has none)."""
    values = _custom_config(exec_properties)
    return checked_markers(list(values[MISSING_VALUES_KEY])) if MISSING_VALUES_KEY in values else DEFAULT_MISSING_VALUES


def max_cell_chars(exec_properties: dict[str, Any]) -> int:
    """The most characters one cell may hold (the dataset config's default where the custom_config has none)."""
    values = _custom_config(exec_properties)
    return int(values[MAX_CELL_CHARS_KEY]) if MAX_CELL_CHARS_KEY in values else MAX_CELL_CHARS


def sample(exec_properties: dict[str, Any]) -> float:
    """The fraction of rows kept (every row where the custom_config has none)."""
    values = _custom_config(exec_properties)
    return float(values[SAMPLE_KEY]) if SAMPLE_KEY in values else 1.0


def older_spans(exec_properties: dict[str, Any]) -> list[SpanInput]:
    """The window's spans before the newest one, oldest first (none for a data root without spans). The newest is
    the input split TFX's driver resolved, whose number it put into the ``span`` property."""
    values = _custom_config(exec_properties)
    if SPAN_PATTERN_KEY not in values:
        return []
    newest = int(exec_properties[utils.SPAN_PROPERTY_NAME])
    input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
    return window(input_base, values[SPAN_PATTERN_KEY], int(values[SPAN_WINDOW_KEY]), newest)[:-1]


def _output_config(exec_properties: dict[str, Any]) -> example_gen_pb2.Output:
    return proto_utils.json_to_proto(
        exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], example_gen_pb2.Output()
    )


class _SchemaCsvToExample(beam.PTransform):
    """The files of one input split -> tf.Examples typed by the curated schema (TFX's ``_CsvToExample`` API)."""

    def __init__(self, exec_properties: dict[str, Any], parts: list[CsvPart], empty: frozenset[str] = frozenset()):
        super().__init__()
        self._empty = empty
        self._parts = parts
        self._schema_types = load_schema_types(schema_file(exec_properties))
        self._missing_values = missing_values(exec_properties)
        self._sample = sample(exec_properties)
        # TFX's split by a feature's value reads the proto; its hash split reads the serialized bytes.
        self._serialize = not _output_config(exec_properties).split_config.HasField("partition_feature_name")

    def expand(self, pipeline: beam.Pipeline) -> beam.PCollection:
        examples = (
            pipeline
            | "CreateParts" >> beam.Create(self._parts)
            # Parts go to the workers from here: without it, Create fuses with the read into one worker's bundle.
            | "SpreadParts" >> beam.Reshuffle()
            | "CsvToExample"
            >> beam.ParDo(CsvPartToExamples(self._schema_types, self._empty, self._missing_values, self._serialize))
        )
        if self._sample >= 1.0:
            return examples
        return examples | "Sample" >> beam.Filter(in_sample, self._sample)


_TFRECORD_GZIP = (None, example_gen_pb2.FILE_FORMAT_UNSPECIFIED, example_gen_pb2.FORMAT_TFRECORDS_GZIP)
_TFRECORD_GZIP_NAME = write_split.to_file_format_str(example_gen_pb2.FORMAT_TFRECORDS_GZIP)


TRAIN_SPLIT = "train"


class Executor(base_example_gen_executor.BaseExampleGenExecutor):
    _older: list[SpanInput] = []  # the window's spans before the newest one (older_spans)
    _empty: dict[str, frozenset[str]] = {}  # input split pattern -> its columns without a value (the checks)
    _parts: dict[str, list[CsvPart]] = {}  # input split pattern -> its files' parts (the checks)

    # TFX annotates the result as a PTransform, but calls it with (exec_properties, split_pattern) to make one,
    # as what its own executors return (a beam.ptransform_fn) is called.
    def GetInputSourceToExamplePTransform(  # type: ignore[override]
        self,
    ) -> Callable[[dict[str, Any], str], beam.PTransform]:
        return lambda exec_properties, pattern: _SchemaCsvToExample(
            exec_properties, self._parts[pattern], self._empty.get(pattern, frozenset())
        )

    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        self._check_inputs(exec_properties)
        file_format = exec_properties.get(standard_component_specs.OUTPUT_FILE_FORMAT_KEY)
        payload_format = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
        if file_format not in _TFRECORD_GZIP or payload_format == example_gen_pb2.PayloadFormat.FORMAT_PARQUET:
            if self._older:
                raise ValueError("a window of spans is written as gzipped TFRecords of tf.Examples (TFX's default)")
            super().Do(input_dict, output_dict, exec_properties)  # formats other than TFX's default: TFX's path
            return
        if _output_config(exec_properties).split_config.HasField("partition_feature_name"):
            if self._older:
                raise ValueError("a window of spans is split by hash buckets; drop partition_feature_name")
            self._write_unshuffled(output_dict, exec_properties)  # TFX's split by a feature's value reads protos
        else:
            self._write_parts(output_dict, exec_properties)
        for artifact in output_dict[standard_component_specs.EXAMPLES_KEY]:
            if payload_format:
                examples_utils.set_payload_format(artifact, payload_format)
            examples_utils.set_file_format(artifact, _TFRECORD_GZIP_NAME)

    def _check_inputs(self, exec_properties: dict[str, Any]) -> None:
        input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        input_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input()
        )
        self._empty, self._parts = {}, {}
        self._older = older_spans(exec_properties)
        for pattern in [split.pattern for split in input_config.splits] + [span.pattern for span in self._older]:
            self._check_files(exec_properties, input_base, pattern)
        if self._older:
            logger.info(
                "Reading a window of %s spans: %s, then the newest (%s)",
                len(self._older) + 1,
                ", ".join(span.label for span in self._older),
                exec_properties[utils.SPAN_PROPERTY_NAME],
            )

    def _check_files(self, exec_properties: dict[str, Any], input_base: str, pattern: str) -> None:
        schema = schema_file(exec_properties)
        paths = split_files(input_base, pattern)
        limit = max_cell_chars(exec_properties)
        checked = check_inputs(
            paths, load_schema_types(schema), schema, open_input, missing_values(exec_properties), limit
        )
        self._empty[pattern] = frozenset(checked.empty)
        # Placeholders in the Beam args are resolved to text before an executor runs.
        beam_args = cast(list[str], self._beam_pipeline_args)
        self._parts[pattern] = input_parts(checked.cut_points, beam_args)
        logger.info(
            "Checked the CSV files %s under %s against %s: %s rows, every line well-formed and every value of "
            "its schema type",
            pattern,
            input_base,
            schema,
            checked.rows,
        )

    def _write_parts(self, output_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]) -> None:
        """Each part of each input split straight into its output split files (split_writer.py)."""
        input_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input()
        )
        output_config = _output_config(exec_properties)
        examples = output_dict[standard_component_specs.EXAMPLES_KEY]
        split_names = utils.generate_output_split_names(input_config, output_config)
        artifact_utils.get_single_instance(examples).split_names = artifact_utils.encode_split_names(split_names)
        uris = [artifact_utils.get_split_uri(examples, name) for name in split_names]
        for uri in uris:
            fileio.makedirs(uri)
        columns = {
            pattern: PartColumns(
                load_schema_types(schema_file(exec_properties)),
                self._empty.get(pattern, frozenset()),
                missing_values(exec_properties),
                sample(exec_properties),
            )
            for pattern in self._parts
        }
        with self._make_beam_pipeline() as pipeline:
            if output_config.split_config.splits:  # one input split, hashed into the output splits (TFX's check)
                (split,) = input_config.splits
                buckets = tuple(itertools.accumulate(s.hash_buckets for s in output_config.split_config.splits))
                write_parts(
                    pipeline,
                    split.name,
                    self._parts[split.pattern],
                    columns[split.pattern],
                    SplitTargets(tuple(uris), buckets),
                )
            else:  # each input split is an output split
                for split, uri in zip(input_config.splits, uris, strict=True):
                    write_parts(
                        pipeline, split.name, self._parts[split.pattern], columns[split.pattern], SplitTargets((uri,))
                    )
            self._write_older_spans(pipeline, split_names, uris, columns)
        if self._older:
            spans = [span.number for span in self._older] + [int(exec_properties[utils.SPAN_PROPERTY_NAME])]
            artifact_utils.get_single_instance(examples).set_string_custom_property(
                WINDOW_SPANS_PROPERTY, ",".join(map(str, spans))
            )
        logger.info("Examples generated under %s", artifact_utils.get_single_uri(examples))

    def _write_older_spans(
        self, pipeline: beam.Pipeline, split_names: list[str], uris: list[str], columns: dict[str, PartColumns]
    ) -> None:
        """Every row of the window's older spans into the train split: the newest span's eval split alone judges
        the candidate and the champion, on the data the model will serve next."""
        if not self._older:
            return
        if TRAIN_SPLIT not in split_names:
            raise ValueError(
                f"a window of spans trains on the split named {TRAIN_SPLIT!r}; the splits are {split_names}"
            )
        train_uri = uris[split_names.index(TRAIN_SPLIT)]
        for span in self._older:
            targets = SplitTargets((train_uri,), tag=f"-span{span.number}")
            write_parts(pipeline, f"span{span.number}", self._parts[span.pattern], columns[span.pattern], targets)

    def _write_unshuffled(self, output_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]) -> None:
        """TFX's ``BaseExampleGenExecutor.Do`` for gzipped TFRecords, less the ``Reshuffle``."""
        input_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input()
        )
        examples = output_dict[standard_component_specs.EXAMPLES_KEY]
        artifact_utils.get_single_instance(examples).split_names = artifact_utils.encode_split_names(
            utils.generate_output_split_names(input_config, _output_config(exec_properties))
        )
        with self._make_beam_pipeline() as pipeline:
            for split_name, split in self.GenerateExamplesByBeam(pipeline, exec_properties).items():
                path = f"{artifact_utils.get_split_uri(examples, split_name)}/{write_split.DEFAULT_FILE_NAME}"
                _ = (
                    split
                    | f"Serialize[{split_name}]" >> beam.ParDo(write_split.MaybeSerialize())
                    | f"Write[{split_name}]" >> beam.io.WriteToTFRecord(path, file_name_suffix=".gz")
                )
        logger.info("Examples generated under %s", artifact_utils.get_single_uri(examples))
