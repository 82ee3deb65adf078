"""Draft a schema from CSV data: TFDV infers types and presence; we add value ranges from the stats.

The draft is a starting point to curate by hand (tighten domains, mark optional columns), then
commit as ``schema/<dataset>/schema.pbtxt``.
"""

from __future__ import annotations

import logging
import math
import tempfile
from pathlib import Path

import apache_beam as beam
import tensorflow_data_validation as tfdv
from google.protobuf import text_format
from tensorflow_data_validation.coders import csv_decoder
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from torchtfx.data.sources import DataSourceError, csv_files, read_header

logger = logging.getLogger(__name__)


def _numeric_ranges(stats: statistics_pb2.DatasetFeatureStatisticsList) -> dict[str, tuple[float, float]]:
    ranges = {}
    for feature in stats.datasets[0].features:
        if feature.HasField("num_stats"):
            ranges[feature.path.step[0]] = (feature.num_stats.min, feature.num_stats.max)
    return ranges


def _add_value_ranges(schema: schema_pb2.Schema, ranges: dict[str, tuple[float, float]]) -> None:
    """Observed min/max, widened outward to round numbers, as int/float domains."""
    for feature in schema.feature:
        if feature.name not in ranges:
            continue
        low, high = ranges[feature.name]
        if feature.type == schema_pb2.INT:
            feature.int_domain.min = math.floor(low)
            feature.int_domain.max = math.ceil(high)
        elif feature.type == schema_pb2.FLOAT:
            feature.float_domain.min = math.floor(low)
            feature.float_domain.max = math.ceil(high)


def _set_presence_and_shape(schema: schema_pb2.Schema) -> None:
    """Columns present in every row get a fixed shape (dense in Transform); the others may be empty
    in any row (ExampleGen writes an empty value list), so only their maximum count is kept."""
    for feature in schema.feature:
        if feature.presence.min_fraction >= 1.0:
            feature.ClearField("value_count")
            feature.shape.dim.add().size = 1
        else:
            feature.value_count.ClearField("min")
            feature.ClearField("presence")


def _statistics(files: list[Path]) -> statistics_pb2.DatasetFeatureStatisticsList:
    """TFDV's ``generate_statistics_from_csv``, with the header read by data/sources.py: TFDV's own reader keeps
    a byte-order mark in the first column's name, and the draft would then name that column '\\ufeff...'."""
    header = read_header(files[0])
    for path in files[1:]:
        if read_header(path) != header:
            raise DataSourceError(f"{path} and {files[0]} have different headers; the draft needs them identical")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stats.pb"
        with beam.Pipeline() as pipeline:
            _ = (
                pipeline
                | "Read" >> beam.Create([str(p) for p in files])
                | "Lines" >> beam.io.ReadAllFromText(skip_header_lines=1)
                | "Decode" >> csv_decoder.DecodeCSV(column_names=header)
                | "Statistics" >> tfdv.GenerateStatistics(tfdv.StatsOptions())
                | "Write" >> tfdv.WriteStatisticsToBinaryFile(str(out))
            )
        return statistics_pb2.DatasetFeatureStatisticsList.FromString(out.read_bytes())


def draft_schema(data_dir: Path) -> schema_pb2.Schema:
    """Infer a schema (types, presence, string domains, value ranges) from the CSVs in ``data_dir``."""
    files = csv_files(data_dir)
    logger.info("Computing statistics over %s CSV file(s) in %s", len(files), data_dir)
    stats = _statistics(files)
    schema = tfdv.infer_schema(stats, infer_feature_shape=False)
    _add_value_ranges(schema, _numeric_ranges(stats))
    _set_presence_and_shape(schema)
    return schema


def write_schema(schema: schema_pb2.Schema, out_path: Path) -> None:
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(text_format.MessageToString(schema))
