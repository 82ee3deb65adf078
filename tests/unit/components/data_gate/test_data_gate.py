"""The DataGate's logic on real TFDV output: anomalies against a schema in plain words, drift against the
champion's training statistics, and the run-stopping error that lists them all."""

from __future__ import annotations

import pandas as pd
import pytest
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2

from torchtfx.components.data_gate import anomalies, drift
from torchtfx.components.data_gate.constants import ANOMALIES_FILE


def _schema() -> schema_pb2.Schema:
    schema = tfdv.infer_schema(tfdv.generate_statistics_from_dataframe(_frame(["Cash", "Card"] * 50)))
    tfdv.get_feature(schema, "payment_type").drift_comparator.infinity_norm.threshold = 0.1
    return schema


def _frame(payments: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"payment_type": payments, "fare": [float(i % 7) for i in range(len(payments))]})


def _write_anomalies(tmp_path, split: str, found) -> str:
    split_dir = tmp_path / f"Split-{split}"
    split_dir.mkdir(parents=True)
    (split_dir / ANOMALIES_FILE).write_bytes(found.SerializeToString())
    return str(split_dir)


def test_clean_data_passes(tmp_path):
    schema = _schema()
    found = tfdv.validate_statistics(tfdv.generate_statistics_from_dataframe(_frame(["Cash", "Card"] * 20)), schema)
    clean = anomalies.read_anomalies(_write_anomalies(tmp_path, "train", found))
    assert anomalies.describe("train", clean) == []
    anomalies.check({"train": clean}, "schema/taxi/schema.pbtxt")


def test_anomalies_stop_the_run_with_split_column_and_the_fix(tmp_path):
    frame = _frame(["Cash"] * 20).assign(fare=["about three"] * 20)
    found = tfdv.validate_statistics(tfdv.generate_statistics_from_dataframe(frame), _schema())
    read = anomalies.read_anomalies(_write_anomalies(tmp_path, "eval", found))
    with pytest.raises(anomalies.DataValidationError) as err:
        anomalies.check({"eval": read}, "schema/taxi/schema.pbtxt")
    text = str(err.value)
    assert "split 'eval', column 'fare'" in text and "training was not started and nothing was pushed" in text
    assert "update the curated schema (schema/taxi/schema.pbtxt)" in text


def test_missing_validator_output_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=ANOMALIES_FILE):
        anomalies.read_anomalies(str(tmp_path))


def _stats_dir(tmp_path, name: str, payments: list[str]) -> str:
    root = tmp_path / name
    (root / f"Split-{drift.DRIFT_SPLIT}").mkdir(parents=True)
    stats = tfdv.generate_statistics_from_dataframe(_frame(payments))
    (root / f"Split-{drift.DRIFT_SPLIT}" / drift.STATS_FILE).write_bytes(stats.SerializeToString())  # as StatisticsGen
    return str(root)


def test_drift_beyond_the_schema_threshold_is_reported_and_stops_the_run(tmp_path):
    baseline = _stats_dir(tmp_path, "champion", ["Cash", "Card"] * 50)
    same = _stats_dir(tmp_path, "same", ["Card", "Cash"] * 40)
    shifted = _stats_dir(tmp_path, "shifted", ["Cash"] * 90 + ["Card"] * 10)
    assert drift.drift_lines(same, baseline, _schema()) == []
    lines = drift.drift_lines(shifted, baseline, _schema())
    assert len(lines) == 1 and lines[0].startswith("split 'train', column 'payment_type': drift from the champion")
    with pytest.raises(anomalies.DataValidationError, match="against the schema and the champion's training data"):
        anomalies.check({}, "schema.pbtxt", lines)


def test_a_column_name_with_an_invisible_character_shows_it_escaped():
    """A byte-order mark or zero-width space in a header made 'New column' and 'Column dropped' look alike."""
    frame = _frame(["Cash"] * 20).rename(columns={"fare": "\u200bfare"})
    found = tfdv.validate_statistics(tfdv.generate_statistics_from_dataframe(frame), _schema())
    text = "\n".join(anomalies.describe("train", found))
    assert "column '\\u200bfare': New column" in text and "column 'fare': Column dropped" in text


def _artifacts(tmp_path, window: list[str], newest: list[str]) -> dict:
    """The DataGate's inputs for a dataset of spans: clean anomalies, the window's (train) and the newest span's
    (eval) statistics as StatisticsGen writes them, and the schema as ImportSchemaGen writes it."""
    from tfx.types import standard_artifacts

    statistics = standard_artifacts.ExampleStatistics()
    statistics.uri = str(tmp_path / "statistics")
    for split, payments in (("train", window), ("eval", newest)):
        (tmp_path / "statistics" / f"Split-{split}").mkdir(parents=True)
        stats = tfdv.generate_statistics_from_dataframe(_frame(payments))
        (tmp_path / "statistics" / f"Split-{split}" / drift.STATS_FILE).write_bytes(stats.SerializeToString())
    schema = standard_artifacts.Schema()
    schema.uri = str(tmp_path / "schema")
    (tmp_path / "schema").mkdir()
    tfdv.write_schema_text(_schema(), str(tmp_path / "schema" / "schema.pbtxt"))
    found = anomalies_pb2.Anomalies()
    anomaly = standard_artifacts.ExampleAnomalies()
    anomaly.uri = str(tmp_path / "anomalies")
    anomaly.split_names = '["train", "eval"]'
    for split in ("train", "eval"):
        _write_anomalies(tmp_path / "anomalies", split, found)
    return {"anomalies": [anomaly], "statistics": [statistics], "schema": [schema]}


def _gate(inputs: dict, newest_span_split: str | None) -> None:
    from torchtfx.components.data_gate.executor import Executor

    properties = {"schema_hint": "schema.pbtxt", "newest_span_split": newest_span_split}
    Executor().Do(inputs, {}, properties)


def test_a_newest_span_that_drifted_from_the_window_stops_the_run(tmp_path):
    inputs = _artifacts(tmp_path, window=["Cash", "Card"] * 100, newest=["Cash"] * 90 + ["Card"] * 10)
    _gate(inputs, None)  # not a dataset of spans: no baseline, nothing to compare the split with
    with pytest.raises(anomalies.DataValidationError) as refused:
        _gate(inputs, "eval")
    text = str(refused.value)
    assert "against the schema and the window's spans (the train split);" in text
    assert "split 'eval', column 'payment_type': drift from the window's spans (the train split)" in text


def test_a_newest_span_like_the_window_passes(tmp_path):
    _gate(_artifacts(tmp_path, window=["Cash", "Card"] * 100, newest=["Card", "Cash"] * 30), "eval")
