"""End-to-end, through the CLI: the CSV files users really have. An Excel export (byte-order mark, CRLF) of
whole-dollar fares and tips trains like the clean file; a duplicated header column or a value that is not
its schema type stops in ExampleGen with the file, line and column. Small samples: CI has 2 cores."""

from __future__ import annotations

import collections
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from tests import helpers

pytestmark = pytest.mark.e2e

ROWS = 400
REJECTED = 3  # torchtfx run's exit code for a candidate a gate rejected: the data path still ran
DATA_STAGES = {"CsvExampleGen", "StatisticsGen", "ExampleValidator", "DataGate", "Transform", "TorchTrainer"}


def torchtfx(data: Path, root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torchtfx.pipeline.cli.main",
            "run",
            "--data-dir",
            str(data),
            "--pipeline-root",
            str(root / "pipeline"),
            "--serving-dir",
            str(root / "serving"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        env=dict(os.environ),
    )


def _excel_export(rows: list[dict[str, str]], fields: list[str], directory: Path) -> Path:
    """Excel's "CSV UTF-8": a byte-order mark before the header, CRLF line ends."""
    directory.mkdir(parents=True)
    with (directory / "trips.csv").open("w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(rows)
    return directory


def _examples(uri: str) -> collections.Counter:
    files = sorted(str(p) for p in Path(uri).glob("Split-*/*.gz"))
    records = tf.data.TFRecordDataset(files, compression_type="GZIP")
    examples = (tf.train.Example.FromString(r.numpy()) for r in records)
    return collections.Counter(e.SerializeToString(deterministic=True) for e in examples)


def _clean_examples(rows: list[dict[str, str]], cfg) -> collections.Counter:
    """The rows as TFX's CsvExampleGen writes them: typed by the schema, an empty cell an empty value list, and a
    column without any value (pickup_census_tract in these rows) without a type."""
    schema = helpers.read_schema(cfg.schema_path)
    untyped = {name for name in rows[0] if not any(row[name] for row in rows)}
    found = collections.Counter()
    for row in rows:
        example = helpers.row_to_example(row, schema)
        for name in untyped:
            example.features.feature[name].Clear()
        found[example.SerializeToString(deterministic=True)] += 1
    return found


def test_excel_export_of_whole_dollar_fares_and_tips_trains_like_the_clean_file(taxi_csv, taxi_cfg, tmp_path):
    """TFX inferred INT for fare and tips here (every value a whole number) and read the BOM into the first
    column's name: the DataGate stopped the run on two type anomalies, a new and a dropped column."""
    rows = helpers.csv_rows(taxi_csv, ROWS)
    for row in rows:
        row["fare"], row["tips"] = str(round(float(row["fare"]))), str(round(float(row["tips"])))
    data = _excel_export(rows, list(rows[0]), tmp_path / "data")

    proc = torchtfx(data, tmp_path, "--epochs", "1")

    assert proc.returncode in (0, REJECTED), proc.stderr[-4000:]
    summary = helpers.metadata(tmp_path / "pipeline")
    assert DATA_STAGES <= {s.node for s in summary.stages if s.state == "COMPLETE"}, summary.stages
    # What ExampleGen wrote is the clean rows typed by the schema, every row once.
    assert _examples(summary.output("CsvExampleGen", "examples").uri) == _clean_examples(rows, taxi_cfg)


def _duplicate_fare(rows, fields):
    return rows, fields, ["fare" if name == "trip_seconds" else name for name in fields]


def _text_in_trip_miles(rows, fields):
    rows[41]["trip_miles"] = "about three miles"
    return rows, fields, fields


BAD_CSV = {
    "duplicate_header_column": (_duplicate_fare, "the header names column 'fare' twice (columns 2 and 16)"),
    "text_in_numeric_column": (
        _text_in_trip_miles,
        "line 43, column 'trip_miles': 'about three miles' is not a number (FLOAT in the schema)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CSV))
def test_bad_csv_stops_in_example_gen_naming_file_column_and_fix(taxi_csv, tmp_path, case):
    mutate, expected = BAD_CSV[case]
    rows, fields, header = mutate(helpers.csv_rows(taxi_csv, ROWS), list(helpers.csv_rows(taxi_csv, 1)[0]))
    data = helpers.write_sample(rows, tmp_path / "data", fields)
    lines = (data / "data.csv").read_text().split("\n", 1)
    (data / "data.csv").write_text(",".join(header) + "\r\n" + lines[1])

    proc = torchtfx(data, tmp_path)

    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"{data / 'data.csv'}" in proc.stderr and expected in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    summary = helpers.metadata(tmp_path / "pipeline")
    ran = {s.node for s in summary.stages} if summary else set()
    assert not ran & {"StatisticsGen", "Transform", "TorchTrainer"}, ran
