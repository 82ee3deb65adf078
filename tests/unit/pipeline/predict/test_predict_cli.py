"""`torchtfx predict` against a real champion: a model trained briefly on the taxi fixture, exported and
converted as the Trainer does, promoted by the real Promoter into a serving directory and a sqlite registry
under a pipeline root; scored through the command line on the taxi CSV."""

from __future__ import annotations

import contextlib
import csv
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
import torch
from click.testing import CliRunner

from tests import helpers
from tests.unit.components.torch_trainer.served_models import export_and_serve, train_briefly
from torchtfx.components.promoter import promotion
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.data.config.model import ModelConfig
from torchtfx.pipeline.cli.main import cli
from torchtfx.pipeline.cli.promotion import local_settings, serving_target


@pytest.fixture(scope="module")
def pipeline_root(tmp_path_factory, tiny_taxi):
    """A pipeline root whose registry's champion (registry version 1) is served as serving version 1."""
    torch.manual_seed(0)
    model = train_briefly(build_model(ModelConfig(), tiny_taxi.layout.model_spec()), tiny_taxi)
    work = tmp_path_factory.mktemp("predict")
    (work / "export").mkdir()
    serving = export_and_serve(tiny_taxi, model, work / "export" / contracts.ONNX_FILE, work / "export" / "serving")
    settings = local_settings("taxi", work / "root", None)
    (settings.root / "mlflow").mkdir(parents=True)
    target = serving_target(settings)
    experiment = target.registry.client.create_experiment("runs", artifact_location=str(work / "artifacts"))
    run_id = target.registry.client.create_run(experiment).info.run_id
    assert promotion.promote(promotion.Candidate(serving, None, run_id, {}), target) == 1
    return settings.root


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _predict(root, *args: str):
    return CliRunner().invoke(cli, ["predict", "--pipeline-root", str(root), *args])


def _direct(serving_dir, rows: list[dict[str, str]], taxi_cfg) -> np.ndarray:
    """The SavedModel's serving_default called directly on the rows, encoded by the tests' own CSV reader."""
    schema = helpers.read_schema(taxi_cfg.schema_path)
    examples = [helpers.row_to_example(row, schema).SerializeToString() for row in rows]
    signature = tf.saved_model.load(str(serving_dir)).signatures["serving_default"]
    return np.concatenate(
        [
            signature(examples=tf.constant(examples[i : i + 4096]))["probabilities"].numpy()
            for i in range(0, len(examples), 4096)
        ]
    )


def test_the_champion_scores_every_row_of_the_taxi_csv_as_its_saved_model_does(
    pipeline_root, taxi_csv, taxi_cfg, tmp_path
):
    out = tmp_path / "scores.csv"
    result = _predict(pipeline_root, "--data", str(taxi_csv), "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = helpers.csv_rows(taxi_csv)
    assert re.search(
        rf"Scored {len(rows):,} rows of 1 file\(s\) with serving version 1 \(registry version 1, ", result.output
    )
    _assert_every_row_scored_as_the_saved_model_does(out, pipeline_root, taxi_csv, taxi_cfg)
    print(result.output)  # the rows/s line, for the record (pytest -s)


def _assert_every_row_scored_as_the_saved_model_does(out, pipeline_root, taxi_csv, taxi_cfg) -> None:
    rows = helpers.csv_rows(taxi_csv)
    with out.open(newline="") as handle:
        written = list(csv.DictReader(handle))
    assert list(written[0]) == ["source_file", "source_line", "probabilities"]
    by_line = {int(row["source_line"]): float(row["probabilities"]) for row in written}
    assert sorted(by_line) == list(range(2, len(rows) + 2))  # every row once (the taxi CSV: one line a record)
    assert {row["source_file"] for row in written} == {str(taxi_csv)}
    expected = _direct(pipeline_root / "serving" / "taxi" / "1", rows, taxi_cfg)
    scored = np.array([by_line[line] for line in range(2, len(rows) + 2)])
    assert np.max(np.abs(scored - expected)) <= 1e-6


def test_a_rerun_removes_the_staging_folder_of_a_killed_predict_and_scores_every_row(
    pipeline_root, taxi_csv, taxi_cfg, tmp_path
):
    """A real `torchtfx predict` SIGKILLed while its staging folder exists. Before: the folder stayed beside
    --out after every rerun (named with a random id, it was neither reused nor removed)."""
    out = tmp_path / "scores.csv"
    env = {name: value for name, value in os.environ.items() if name != "MLFLOW_TRACKING_URI"}
    command = [
        sys.executable,
        "-m",
        "torchtfx.pipeline.cli.main",
        "predict",
        "--pipeline-root",
        str(pipeline_root),
        "--data",
        str(taxi_csv),
        "--out",
        str(out),
    ]
    killed = subprocess.Popen(
        command, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 180
        while killed.poll() is None and time.monotonic() < deadline and not list(tmp_path.glob(".scores.csv.*")):
            time.sleep(0.02)
        killed.send_signal(signal.SIGKILL)  # no handler runs, nothing is cleaned up
        killed.wait()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(killed.pid, signal.SIGKILL)  # a Beam worker it may have started
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left and all(name.startswith(".scores.csv.") for name in left), left  # killed mid-run
    result = _predict(pipeline_root, "--data", str(taxi_csv), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.csv"]  # the killed run's staging folder is gone
    _assert_every_row_scored_as_the_saved_model_does(out, pipeline_root, taxi_csv, taxi_cfg)


def test_a_malformed_line_stops_the_command_by_file_and_line_and_nothing_is_written(pipeline_root, taxi_csv, tmp_path):
    lines = taxi_csv.read_text().splitlines()[:50]
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.csv").write_text("\n".join(lines) + "\n")
    (data / "b.csv").write_text("\n".join([*lines[:10], '1,"unclosed,3', *lines[10:]]) + "\n")
    out = tmp_path / "out" / "scores.parquet"
    result = _predict(pipeline_root, "--data", str(data), "--out", str(out))
    assert result.exit_code == 1
    assert f"{data / 'b.csv'}, line 11: malformed CSV" in result.output
    assert "Traceback" not in result.output
    assert not out.exists() and not (tmp_path / "out").exists()


def test_a_registry_version_scores_into_parquet_shards_keyed_by_the_given_columns(pipeline_root, taxi_csv, tmp_path):
    lines = taxi_csv.read_text().splitlines()[:301]
    data = tmp_path / "day.csv"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "scores"
    result = _predict(
        pipeline_root,
        "--data",
        str(data),
        "--out",
        str(out),
        "--format",
        "parquet",
        "--version",
        "1",
        "--key-column",
        "trip_start_timestamp",
        "--key-column",
        "company",
    )
    assert result.exit_code == 0, result.output
    table = pq.read_table(str(out))
    assert table.column_names == ["trip_start_timestamp", "company", "probabilities"]
    assert table.num_rows == 300 and str(table.schema.field("probabilities").type) == "float"
    assert (out / "_SUCCESS").is_file()


def test_an_unknown_alias_or_version_is_named(pipeline_root, taxi_csv, tmp_path):
    result = _predict(pipeline_root, "--data", str(taxi_csv), "--out", str(tmp_path / "a.csv"), "--alias", "nope")
    assert result.exit_code == 1 and "has no alias 'nope'" in result.output
    result = _predict(pipeline_root, "--data", str(taxi_csv), "--out", str(tmp_path / "b.csv"), "--version", "7")
    assert result.exit_code == 1 and "has no registry version 7; it has [1]" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_serving_folder_changed_on_disk_is_refused_by_name_and_nothing_is_written(pipeline_root, taxi_csv, tmp_path):
    """The serving-folder reader predict shares with the Promoter (components/tf_serving/version_folder.py)."""
    added = local_settings("taxi", pipeline_root, None).serving_model_dir / "1" / "added.txt"
    added.write_text("not registered")
    try:
        result = _predict(pipeline_root, "--data", str(taxi_csv), "--out", str(tmp_path / "a.csv"), "--version", "1")
    finally:
        added.unlink()
    assert result.exit_code == 1, result.output
    held = re.escape(f"Error: {added.parent} does not hold registry version 1 of ")
    assert re.match(held + r"\S+ \(on disk: sha256-tree-v1:", result.output), result.output
    assert list(tmp_path.iterdir()) == []
