"""End-to-end, through the CLI: data that arrives a folder a day. Each run trains on the window of the newest
days and evaluates on the newest day's eval split alone; a rerun on the same days changes nothing; a new day is
new input, and the only span read (the other comes from the span store); `torchtfx monitor` passes requests like
the training data and names a served feature that moved. Small days: CI has 2 cores."""

from __future__ import annotations

import json
import subprocess
import sys
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
    assert "Window of 2 spans (2026-12-02, 2026-12-03): 1 read, 1 from the span store" in third.stderr
    assert newest.custom_properties["span"].int_value == SPANS[DAYS[2]]
    assert newest.custom_properties["window_spans"].string_value == f"{SPANS[DAYS[1]]},{SPANS[DAYS[2]]}"
    train, eval_ = _keys(newest.uri + "/Split-train"), _keys(newest.uri + "/Split-eval")
    assert set(eval_) <= keys[DAYS[2]] and not set(train) & keys[DAYS[0]]  # the first day left the window

    _monitor_flags_a_new_payment_type(tmp_path, dataset, days[DAYS[2]], helpers.read_schema(taxi_cfg.schema_path))
    _a_drifted_day_is_refused_by_the_data_gate(tmp_path, data, rows[: 2 * ROWS], fields, run)


def _a_drifted_day_is_refused_by_the_data_gate(tmp_path, data, rows, fields, run) -> None:
    """A day whose trips were nearly all paid in cash: its eval split moved from the window's (and from the
    champion's data); the run stops before Transform and the serving folder is left as it was."""
    serving_before = helpers.tree_digest(tmp_path / "serving")
    cash = [{**row, "payment_type": "Cash"} for row in rows[:ROWS]]
    helpers.write_sample(cash, data / "2026-12-04", fields)
    drifted = torchtfx(data, tmp_path, *run)
    assert drifted.returncode == 1, drifted.stderr[-4000:]
    assert "column 'payment_type': drift from the window's spans (the train split)" in drifted.stderr
    assert "Traceback" not in drifted.stderr
    summary = helpers.metadata(tmp_path / "pipeline")
    ran = {s.node for s in summary.stages if s.state == "COMPLETE"}
    assert "CsvExampleGen" in ran and not ran & {"Transform", "TorchTrainer", "Promoter"}
    assert helpers.tree_digest(tmp_path / "serving") == serving_before


def _monitor(tmp_path: Path, dataset: Path, logs: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torchtfx.pipeline.cli.main", "monitor", "--logs", str(logs)]
    command += ["--dataset", str(dataset), "--pipeline-root", str(tmp_path / "pipeline")]
    command += ["--serving-dir", str(tmp_path / "serving")]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def _monitor_flags_a_new_payment_type(tmp_path: Path, dataset: Path, rows: list[dict[str, str]], schema) -> None:
    """Requests like the newest day pass; the same requests, a third of them paid in a currency the schema does not
    know, are named against the schema, the champion's training data and the previous window."""
    scored = helpers.write_sample(rows, tmp_path / "scored", list(rows[0]))  # CSV, as `torchtfx predict` reads
    same = _monitor(tmp_path, dataset, scored)
    assert same.returncode == 0, same.stdout + same.stderr[-3000:]
    assert f"{ROWS} requests compared" in same.stdout and "Nothing moved" in same.stdout

    logs = tmp_path / "sidecar"  # serialized tf.Examples, as the serving sidecar writes them
    logs.mkdir()
    with tf.io.TFRecordWriter(str(logs / "requests-0.tfrecord.gz"), options="GZIP") as writer:
        for i, row in enumerate(rows):
            shifted = {**row, "payment_type": "Crypto" if i % 3 == 0 else row["payment_type"]}
            writer.write(helpers.row_to_example(shifted, schema).SerializeToString())
    moved = _monitor(tmp_path, dataset, logs)
    assert moved.returncode == 5, moved.stdout + moved.stderr[-3000:]
    assert "Moved: payment_type" in moved.stdout and "Crypto" in moved.stdout
    (report,) = [
        p for p in (tmp_path / "pipeline" / "monitor" / "taxi_days").glob("*/report.json") if "Crypto" in p.read_text()
    ]
    against = {f["against"] for f in json.loads(report.read_text())["findings"] if f["feature"] == "payment_type"}
    assert against == {"the schema", "the champion's training data", "the previous monitoring window"}
