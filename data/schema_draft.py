"""Draft a schema from CSV data: TFDV infers types and presence; we add value ranges from the stats.

The draft is a starting point to curate by hand (tighten domains, mark optional columns), then
commit as ``schema/<dataset>/schema.pbtxt``.

Missing-value markers (``NA`` from R, ``#N/A`` from Excel, ``NULL``, ``NaN``: data/config/missing.py) are read as
missing in a column whose other values are all numbers, as ExampleGen reads them with the dataset config's
``missing_values``; a column with any other text keeps them as values. Each column where that made a difference
is named in a warning, and so is a column that is numeric but for a common marker left out of the list.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import io
import logging
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path

import apache_beam as beam
import tensorflow_data_validation as tfdv
from google.protobuf import text_format
from tensorflow_data_validation.coders import csv_decoder
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from torchtfx.data.config.dataset import MAX_CELL_CHARS
from torchtfx.data.config.missing import DEFAULT_MISSING_VALUES
from torchtfx.data.csv_reader.sources import DataSourceError, csv_files, csv_rows, read_header

logger = logging.getLogger(__name__)
_TERMINATOR = "\r\n"


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


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclasses.dataclass
class _ColumnScan:
    """What one column's cells are: numbers but for missing-value markers, or text."""

    numeric: bool = True  # every cell so far is empty, a number or a marker
    markers: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # configured ones
    unlisted: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # common, not configured

    def add(self, text: str, markers: frozenset[str]) -> None:
        if not self.numeric or not text:
            return
        if text in markers:
            self.markers[text] += 1
        elif _is_number(text):  # "NaN" too, when it is not a marker: TFDV reads it as a float
            return
        elif text in DEFAULT_MISSING_VALUES:
            self.unlisted[text] += 1
        else:
            self.numeric = False


def _scan(files: list[Path], header: list[str], markers: frozenset[str], limit: int) -> dict[str, _ColumnScan]:
    """Every column's cells classified (one pass over the files, with the reader ExampleGen uses)."""
    scans = [_ColumnScan() for _ in header]
    for path in files:
        rows = csv_rows(path, max_cell_chars=limit)
        next(rows)
        for _, record in rows:
            for scan, text in zip(scans, record, strict=True):
                scan.add(text, markers)
    return dict(zip(header, scans, strict=True))


def _counted(counter: collections.Counter) -> str:
    return ", ".join(f"{value!r} ({count} cells)" for value, count in counter.most_common())


def _warn_about_markers(scans: dict[str, _ColumnScan]) -> frozenset[str]:
    """Warn per column where markers decide its type; returns the columns whose markers are read as missing."""
    blanked = set()
    for name, scan in scans.items():
        if not scan.numeric:
            continue
        if scan.unlisted:
            logger.warning(
                "Column %r holds numbers and %s, which is not among the missing-value markers given: drafted as "
                "text (BYTES). If it means 'no value', pass it with --missing-value and list it under "
                "missing_values in the dataset config (the default list has it)",
                name,
                _counted(scan.unlisted),
            )
        elif scan.markers:
            blanked.add(name)
            logger.warning(
                "Column %r holds numbers and %s: read as missing, so the column is drafted as a number. ExampleGen "
                "reads them so only while the dataset config's missing_values lists them (the default list does)",
                name,
                _counted(scan.markers),
            )
    return frozenset(blanked)


def _lines(path: str, blanked: tuple[int, ...], markers: frozenset[str], limit: int) -> Iterator[str]:
    """The records of ``path`` after its header, as CSV lines, with the markers of the ``blanked`` columns
    emptied. ``limit``: the most characters in a cell, set in this worker for TFDV's reader too."""
    rows = csv_rows(path, max_cell_chars=limit)
    next(rows)
    for _, record in rows:
        for i in blanked:
            if record[i] in markers:
                record[i] = ""
        out = io.StringIO()
        # csv's writer quotes a value that holds a character of its line terminator, and only those: with "" it
        # wrote a value's line break unquoted, which TFDV's reader refused ("new-line character seen in unquoted
        # field"). With CRLF, a value holding CR or LF is quoted; the terminator itself is cut off.
        csv.writer(out, lineterminator=_TERMINATOR).writerow(record)
        yield out.getvalue()[: -len(_TERMINATOR)]


def _statistics(
    files: list[Path], missing_values: tuple[str, ...], limit: int
) -> statistics_pb2.DatasetFeatureStatisticsList:
    """TFDV's ``generate_statistics_from_csv``, with the records read by data/csv_reader/sources.py: TFDV's own
    reader keeps a byte-order mark in the first column's name, and the draft would then name that column
    '\\ufeff...'. The numeric columns' missing-value markers are emptied first (see the module's docstring)."""
    header = read_header(files[0], max_cell_chars=limit)
    for path in files[1:]:
        if read_header(path, max_cell_chars=limit) != header:
            raise DataSourceError(f"{path} and {files[0]} have different headers; the draft needs them identical")
    markers = frozenset(missing_values) - {""}
    blanked = _warn_about_markers(_scan(files, header, markers, limit))
    positions = tuple(i for i, name in enumerate(header) if name in blanked)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stats.pb"
        with beam.Pipeline() as pipeline:
            _ = (
                pipeline
                | "Read" >> beam.Create([str(p) for p in files])
                | "Lines" >> beam.FlatMap(_lines, positions, markers, limit)
                | "Decode" >> csv_decoder.DecodeCSV(column_names=header)
                | "Statistics" >> tfdv.GenerateStatistics(tfdv.StatsOptions())
                | "Write" >> tfdv.WriteStatisticsToBinaryFile(str(out))
            )
        return statistics_pb2.DatasetFeatureStatisticsList.FromString(out.read_bytes())


def draft_schema(
    data_dir: Path, missing_values: tuple[str, ...] = DEFAULT_MISSING_VALUES, max_cell_chars: int = MAX_CELL_CHARS
) -> schema_pb2.Schema:
    """Infer a schema (types, presence, string domains, value ranges) from the CSVs in ``data_dir``;
    ``missing_values`` in a numeric column are missing values; a cell may hold up to ``max_cell_chars``
    characters."""
    files = csv_files(data_dir)
    logger.info("Computing statistics over %s CSV file(s) in %s", len(files), data_dir)
    stats = _statistics(files, missing_values, max_cell_chars)
    schema = tfdv.infer_schema(stats, infer_feature_shape=False)
    _add_value_ranges(schema, _numeric_ranges(stats))
    _set_presence_and_shape(schema)
    return schema


def write_schema(schema: schema_pb2.Schema, out_path: Path) -> None:
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(text_format.MessageToString(schema))
