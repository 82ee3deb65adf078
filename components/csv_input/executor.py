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
from tfx import types
from tfx.components.example_gen import base_example_gen_executor, utils, write_split
from tfx.components.util import examples_utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from torchtfx.components.csv_input.constants import (
    WINDOW_SPANS_PROPERTY,
)
from torchtfx.components.csv_input.properties import (
    max_cell_chars,
    missing_values,
    output_config,
    sample,
    schema_file,
    span_store,
    window_spans,
)
from torchtfx.components.csv_input.span_store import SpanStore, split_folder
from torchtfx.components.csv_input.split_writer import PartColumns, SplitTargets, write_parts
from torchtfx.components.shared.contracts import TRAIN_SPLIT
from torchtfx.data.csv_reader.beam_parts import input_parts
from torchtfx.data.csv_reader.check import check_inputs
from torchtfx.data.csv_reader.columns import load_schema_types
from torchtfx.data.csv_reader.decode import CsvPartToExamples, open_input
from torchtfx.data.csv_reader.files import split_files
from torchtfx.data.csv_reader.parts import CsvPart
from torchtfx.data.csv_reader.sample import in_sample
from torchtfx.data.spans.layout import SpanInput

logger = logging.getLogger(__name__)


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
        self._serialize = not output_config(exec_properties).split_config.HasField("partition_feature_name")

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


def _tfx_default_format(exec_properties: dict[str, Any]) -> bool:
    """Gzipped TFRecords of tf.Examples, split by hash: what the split writer writes."""
    file_format = exec_properties.get(standard_component_specs.OUTPUT_FILE_FORMAT_KEY)
    payload_format = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
    return (
        file_format in _TFRECORD_GZIP
        and payload_format != example_gen_pb2.PayloadFormat.FORMAT_PARQUET
        and not output_config(exec_properties).split_config.HasField("partition_feature_name")
    )


class Executor(base_example_gen_executor.BaseExampleGenExecutor):
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
        spans = window_spans(exec_properties)  # each span's files globbed and fingerprinted: once a run
        if spans:  # a dataset of spans
            if not _tfx_default_format(exec_properties):
                raise ValueError("a window of spans is written as gzipped TFRecords of tf.Examples, split by hash")
            with span_store(exec_properties) as store:
                self._write_window(output_dict, exec_properties, store, spans)
            self._set_formats(output_dict, exec_properties)
            return
        self._check_inputs(exec_properties)
        file_format = exec_properties.get(standard_component_specs.OUTPUT_FILE_FORMAT_KEY)
        payload_format = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
        if file_format not in _TFRECORD_GZIP or payload_format == example_gen_pb2.PayloadFormat.FORMAT_PARQUET:
            super().Do(input_dict, output_dict, exec_properties)  # formats other than TFX's default: TFX's path
            return
        if output_config(exec_properties).split_config.HasField("partition_feature_name"):
            self._write_unshuffled(output_dict, exec_properties)  # TFX's split by a feature's value reads protos
        else:
            self._write_parts(output_dict, exec_properties)
        self._set_formats(output_dict, exec_properties)

    @staticmethod
    def _set_formats(output_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]) -> None:
        payload_format = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
        for artifact in output_dict[standard_component_specs.EXAMPLES_KEY]:
            if payload_format:
                examples_utils.set_payload_format(artifact, payload_format)
            examples_utils.set_file_format(artifact, _TFRECORD_GZIP_NAME)

    def _write_window(
        self,
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
        store: SpanStore,
        spans: list[SpanInput],
    ) -> None:
        """The window's spans from the span store: only the spans it does not hold yet are checked and read (each
        hash-split as one input), then kept there. The newest span's splits are the output's, so its eval split
        alone judges the candidate and the champion on the data the model serves next; every split of an older
        span goes to the train split."""
        input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        self._empty, self._parts = {}, {}
        new = [span for span in spans if not store.ready(span)]
        for span in new:
            self._check_files(exec_properties, input_base, span.pattern)
        examples = output_dict[standard_component_specs.EXAMPLES_KEY]
        names = store.settings.split_names
        if TRAIN_SPLIT not in names:
            raise ValueError(f"a window of spans trains on the split {TRAIN_SPLIT!r}; the splits are {names}")
        artifact = artifact_utils.get_single_instance(examples)
        artifact.split_names = artifact_utils.encode_split_names(names)
        uris = {name: artifact_utils.get_split_uri(examples, name) for name in names}
        for uri in uris.values():
            fileio.makedirs(uri)
        if new:
            self._write_into_store(exec_properties, store, new)
        store.compose(spans, uris, TRAIN_SPLIT)
        artifact.set_string_custom_property(WINDOW_SPANS_PROPERTY, ",".join(str(span.number) for span in spans))
        logger.info(
            "Window of %s spans (%s): %s read, %s from the span store %s",
            len(spans),
            ", ".join(span.label for span in spans),
            len(new),
            len(spans) - len(new),
            store.root,
        )

    def _write_into_store(self, exec_properties: dict[str, Any], store: SpanStore, spans: list[SpanInput]) -> None:
        """Each of ``spans`` hash-split into a new entry of the store; a failed run keeps none of them."""
        schema_types = load_schema_types(schema_file(exec_properties))
        settings = store.settings  # the reader's settings and the split, as the entries' keys hold them
        buckets = tuple(itertools.accumulate(n for _name, n in settings.splits))
        writing = {span.number: store.start() for span in spans}
        try:
            with self._make_beam_pipeline() as pipeline:
                for span in spans:
                    folders = tuple(split_folder(writing[span.number], n) for n in settings.split_names)
                    empty = self._empty[span.pattern]
                    columns = PartColumns(schema_types, empty, settings.missing_values, settings.sample)
                    parts = self._parts[span.pattern]
                    write_parts(pipeline, f"span{span.number}", parts, columns, SplitTargets(folders, buckets))
            for span in spans:
                store.commit(span, writing.pop(span.number))
        finally:
            for folder in writing.values():
                store.discard(folder)

    def _check_inputs(self, exec_properties: dict[str, Any]) -> None:
        input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        input_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input()
        )
        self._empty, self._parts = {}, {}
        for split in input_config.splits:
            self._check_files(exec_properties, input_base, split.pattern)

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
        outputs = output_config(exec_properties)
        examples = output_dict[standard_component_specs.EXAMPLES_KEY]
        split_names = utils.generate_output_split_names(input_config, outputs)
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
            if outputs.split_config.splits:  # one input split, hashed into the output splits (TFX's check)
                (split,) = input_config.splits
                buckets = tuple(itertools.accumulate(s.hash_buckets for s in outputs.split_config.splits))
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
        logger.info("Examples generated under %s", artifact_utils.get_single_uri(examples))

    def _write_unshuffled(self, output_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]) -> None:
        """TFX's ``BaseExampleGenExecutor.Do`` for gzipped TFRecords, less the ``Reshuffle``."""
        input_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input()
        )
        examples = output_dict[standard_component_specs.EXAMPLES_KEY]
        artifact_utils.get_single_instance(examples).split_names = artifact_utils.encode_split_names(
            utils.generate_output_split_names(input_config, output_config(exec_properties))
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
