"""End-to-end, through the CLI: data that arrives a folder a day. Each run trains on the window of the newest
days and evaluates on the newest day's eval split alone; a rerun on the same days changes nothing; a new day
is new input. Small days: CI has 2 cores."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from tests import helpers
from tests.e2e.test_input_data import REJECTED, torchtfx

pytestmark = pytest.mark.e2e

ROWS = 400  # a day
DAYS = ("2026-12-01", "2026-12-02", "2026-12-03")  # spans 20788, 20789, 20790: days since 1970-01-01
SPANS = dict(zip(DAYS, (20788, 20789, 20790), strict=True))
ROW_KEY = ("trip_start_timestamp", "fare", "trip_miles", "pickup_latitude")


def _dataset_yaml(taxi_cfg, path: Path) -> Path:
    """The shipped taxi dataset, its data root a folder a day, the newest 2 days trained on."""
    text = (taxi_cfg.schema_path.parents[2] / "data" / "datasets" / "taxi.yaml").read_text()
    text = text.replace("name: taxi\n", "name: taxi_days\n")
    text = text.replace("schema: schema/taxi/schema.pbtxt", f"schema: {taxi_cfg.schema_path}")
    path.write_text(text + '\nspans:\n  pattern: "{YYYY}-{MM}-{DD}/*.csv"\n  window: 2\n')
    return path


def _keys(split_dir: str) -> list[tuple]:
    files = sorted(str(p) for p in Path(split_dir).glob("*.gz"))
    keys = []
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
        feature = tf.train.Example.FromString(record.numpy()).features.feature
        keys.append(tuple(tuple(getattr(feature[k], feature[k].WhichOneof("kind")).value) for k in ROW_KEY))
    return keys


def _row_keys(rows: list[dict[str, str]], schema) -> set[tuple]:
    found = set()
    for row in rows:
        feature = helpers.row_to_example(row, schema).features.feature
        found.add(tuple(tuple(getattr(feature[k], feature[k].WhichOneof("kind")).value) for k in ROW_KEY))
    return found


def _examples(root: Path):
    summary = helpers.metadata(root / "pipeline")
    return summary, summary.output("CsvExampleGen", "examples")


def test_a_daily_loop_trains_on_the_window_evaluates_the_newest_day_and_a_rerun_changes_nothing(
    taxi_csv, taxi_cfg, tmp_path
):
    rows = helpers.csv_rows(taxi_csv, len(DAYS) * ROWS)
    fields = list(rows[0])
    days = {day: rows[i * ROWS : (i + 1) * ROWS] for i, day in enumerate(DAYS)}
    keys = {day: _row_keys(day_rows, helpers.read_schema(taxi_cfg.schema_path)) for day, day_rows in days.items()}
    data = tmp_path / "days"
    for day in DAYS[:2]:
        helpers.write_sample(days[day], data / day, fields)
    dataset = _dataset_yaml(taxi_cfg, tmp_path / "taxi_days.yaml")
    run = ("--dataset", str(dataset), "--epochs", "1", "--confirm-labels", "immediate")

    first = torchtfx(data, tmp_path, *run)
    assert first.returncode in (0, REJECTED), first.stderr[-4000:]
    summary, examples = _examples(tmp_path)
    assert examples.custom_properties["span"].int_value == SPANS[DAYS[1]]
    assert examples.custom_properties["window_spans"].string_value == f"{SPANS[DAYS[0]]},{SPANS[DAYS[1]]}"
    train, eval_ = _keys(examples.uri + "/Split-train"), _keys(examples.uri + "/Split-eval")
    assert set(eval_) <= keys[DAYS[1]]  # the newest day's eval split alone judges the models
    assert keys[DAYS[0]] <= set(train)  # every row of the older day trains
    assert len(train) + len(eval_) == 2 * ROWS

    again = torchtfx(data, tmp_path, *run)
    assert again.returncode in (0, REJECTED), again.stderr[-4000:]
    summary, cached = _examples(tmp_path)
    states = {s.node: s.state for s in summary.stages}
    assert {states[n] for n in ("CsvExampleGen", "StatisticsGen", "Transform", "TorchTrainer")} == {"CACHED"}
    assert cached.uri == examples.uri

    helpers.write_sample(days[DAYS[2]], data / DAYS[2], fields)  # the next day arrives
    third = torchtfx(data, tmp_path, *run)
    assert third.returncode in (0, REJECTED), third.stderr[-4000:]
    summary, newest = _examples(tmp_path)
    assert {s.node: s.state for s in summary.stages}["CsvExampleGen"] == "COMPLETE"
    assert newest.custom_properties["span"].int_value == SPANS[DAYS[2]]
    assert newest.custom_properties["window_spans"].string_value == f"{SPANS[DAYS[1]]},{SPANS[DAYS[2]]}"
    train, eval_ = _keys(newest.uri + "/Split-train"), _keys(newest.uri + "/Split-eval")
    assert set(eval_) <= keys[DAYS[2]] and not set(train) & keys[DAYS[0]]  # the first day left the window
