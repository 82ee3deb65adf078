"""End-to-end: the real pipeline (LocalDagRunner, Beam, sqlite MLMD + MLflow) run through the CLI
exactly as a user runs it, on small samples."""

from __future__ import annotations

import csv
import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from data.synthetic_loans import write_csv
from pipeline.summary import latest_run
from tests import helpers

pytestmark = pytest.mark.e2e

SAMPLE_ROWS = 3000
ALL_NODES = {
    "CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator", "DataGate",
    "Transform", "TorchTrainer", "Evaluator", "Pusher",
}  # fmt: skip


def torchtfx(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "run", *args], capture_output=True, text=True, timeout=1200
    )


def metadata(root: Path):
    from tfx.orchestration import metadata as tfx_metadata

    return latest_run(tfx_metadata.sqlite_metadata_connection_config(str(root / "metadata.sqlite")))


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def write_sample(rows: list[dict[str, str]], directory: Path, fieldnames: list[str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "data.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fieldnames, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return directory


@pytest.fixture(scope="module")
def taxi_rows(taxi_csv):
    return helpers.csv_rows(taxi_csv, SAMPLE_ROWS)


@pytest.fixture(scope="module")
def taxi_run(tmp_path_factory, taxi_rows):
    root = tmp_path_factory.mktemp("taxi_e2e")
    data = write_sample(taxi_rows, root / "data", list(taxi_rows[0]))
    proc = torchtfx("--data-dir", str(data), "--pipeline-root", str(root / "pipeline"),
                    "--serving-dir", str(root / "serving"), "--epochs", "6")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return root, proc


def test_taxi_sample_runs_every_component_and_pushes_a_blessed_model(taxi_run):
    root, proc = taxi_run
    summary = metadata(root / "pipeline")
    assert {s.node for s in summary.stages} == ALL_NODES
    assert all(s.state == "COMPLETE" for s in summary.stages), summary.stages
    assert summary.blessed is True
    assert summary.parity is not None and summary.parity <= 1e-5
    assert summary.ddp_workers == 2
    versions = [p for p in (root / "serving").iterdir() if p.is_dir()]
    assert len(versions) == 1 and versions[0].name.isdigit()
    assert (versions[0] / "saved_model.pb").is_file()
    assert f"Pushed model: {versions[0]}" in proc.stdout
    assert "auc=" in proc.stdout and "MLflow run:" in proc.stdout


def test_pushed_model_serves_raw_examples_in_a_tensorflow_only_process(taxi_run, taxi_rows, taxi_cfg):
    root, _ = taxi_run
    (version,) = [p for p in (root / "serving").iterdir() if p.is_dir()]
    schema = helpers.read_schema(taxi_cfg.schema_path)
    requests = root / "requests.tfrecord"
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(requests)) as writer:
        for row in taxi_rows[:32]:
            row = {k: v for k, v in row.items() if k != "tips"}  # no label in a serving request
            writer.write(helpers.row_to_example(row, schema).SerializeToString())
    script = textwrap.dedent(f"""
        import sys
        import tensorflow as tf
        model = tf.saved_model.load({str(version)!r})
        batch = tf.constant([r.numpy() for r in tf.data.TFRecordDataset({str(requests)!r})])
        probs = model.signatures["serving_default"](examples=batch)["probabilities"].numpy()
        assert probs.shape == (32,) and ((probs >= 0) & (probs <= 1)).all(), probs
        leaked = [m for m in ("torch", "tensorflow_transform", "onnx2tf") if m in sys.modules]
        assert not leaked, leaked
        print("served", probs.shape[0], "mean", float(probs.mean()))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "served 32" in proc.stdout


def test_second_dataset_runs_from_config_and_schema_alone(tmp_path):
    data = tmp_path / "loans"
    write_csv(data, rows=2500)
    proc = torchtfx("--dataset", "loans", "--data-dir", str(data), "--pipeline-root", str(tmp_path / "pipeline"),
                    "--serving-dir", str(tmp_path / "serving"), "--epochs", "8", "--auc-threshold", "0.65")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = metadata(tmp_path / "pipeline")
    assert summary.blessed is True and summary.pushed_to
    assert all(s.state == "COMPLETE" for s in summary.stages)


@pytest.mark.parametrize(
    "corruption, expected",
    [
        ("missing_column", ["column 'fare': Column dropped"]),
        ("text_in_numeric", ["column 'trip_miles'", 'String values that were not floats were found, such as "about']),
    ],
)
def test_corrupt_input_stops_before_training_and_leaves_serving_untouched(
    taxi_run, taxi_rows, tmp_path, corruption, expected
):
    root, _ = taxi_run
    serving = root / "serving"
    before = tree_digest(serving)
    fields = list(taxi_rows[0])
    rows = [dict(r) for r in taxi_rows[:1500]]
    if corruption == "missing_column":
        fields.remove("fare")
    else:
        for row in rows[::50]:
            row["trip_miles"] = "about three miles"
    data = write_sample(rows, tmp_path / "data", fields)
    proc = torchtfx(
        "--data-dir", str(data), "--pipeline-root", str(tmp_path / "pipeline"), "--serving-dir", str(serving)
    )
    assert proc.returncode != 0
    assert "data validation failed" in proc.stderr, proc.stderr[-3000:]
    assert all(text in proc.stderr for text in expected), proc.stderr[-3000:]
    ran = {s.node for s in metadata(tmp_path / "pipeline").stages}
    assert not ran & {"Transform", "TorchTrainer", "Evaluator", "Pusher"}, ran
    assert tree_digest(serving) == before
