"""CsvExampleGen's executor, with every input CSV checked first (field counts, quoting, encoding, rows), so a
malformed file stops the run with its name and line instead of a Beam stack trace.

It also writes the splits without TFX's ``Reshuffle`` before the write: on the DirectRunner a shuffle holds
every serialized example in the pipeline process (2.5 GiB there at 1M rows, and not given back to the OS
for the rest of the run). Nothing downstream depends on the order on disk: the Trainer shuffles every
epoch, and Transform, StatisticsGen and the Evaluator aggregate.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import apache_beam as beam
from tfx import types
from tfx.components.example_gen import utils, write_split
from tfx.components.example_gen.csv_example_gen import executor as csv_executor
from tfx.components.util import examples_utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from torchtfx.data.sources import DataSourceError, check_csv_structure, csv_files

logger = logging.getLogger(__name__)


def _csv_paths(input_base: str) -> list[str]:
    if "://" not in input_base:
        return [str(p) for p in csv_files(Path(input_base))]
    paths = sorted(fileio.glob(f"{input_base.rstrip('/')}/*.csv"))
    if not paths:
        raise DataSourceError(f"input directory {input_base} holds no *.csv files")
    return paths


def _opener(input_base: str):
    return None if "://" not in input_base else (lambda path: fileio.open(path, "r"))


_TFRECORD_GZIP = (None, example_gen_pb2.FILE_FORMAT_UNSPECIFIED, example_gen_pb2.FORMAT_TFRECORDS_GZIP)
_TFRECORD_GZIP_NAME = write_split.to_file_format_str(example_gen_pb2.FORMAT_TFRECORDS_GZIP)


class Executor(csv_executor.Executor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        rows = sum(check_csv_structure(path, _opener(input_base)) for path in _csv_paths(input_base))
        logger.info("Checked the CSV files under %s: %s rows, every line well-formed", input_base, rows)
        file_format = exec_properties.get(standard_component_specs.OUTPUT_FILE_FORMAT_KEY)
        payload_format = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
        if file_format not in _TFRECORD_GZIP or payload_format == example_gen_pb2.PayloadFormat.FORMAT_PARQUET:
            super().Do(input_dict, output_dict, exec_properties)  # formats other than TFX's default: TFX's path
            return
        self._write_unshuffled(output_dict, exec_properties)
        for artifact in output_dict[standard_component_specs.EXAMPLES_KEY]:
            if payload_format:
                examples_utils.set_payload_format(artifact, payload_format)
            examples_utils.set_file_format(artifact, _TFRECORD_GZIP_NAME)

    def _write_unshuffled(self, output_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]) -> None:
        """TFX's ``BaseExampleGenExecutor.Do`` for gzipped TFRecords, less the ``Reshuffle``."""
        input_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input()
        )
        output_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], example_gen_pb2.Output()
        )
        examples = output_dict[standard_component_specs.EXAMPLES_KEY]
        artifact_utils.get_single_instance(examples).split_names = artifact_utils.encode_split_names(
            utils.generate_output_split_names(input_config, output_config)
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
