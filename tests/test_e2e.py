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
    "Transform", "TorchTrainer", "ChampionModel", "Evaluator", "Promoter",
}  # fmt: skip
REJECTED = 3  # torchtfx run's exit code for a candidate a gate rejected


def torchtfx(*args: str, command: str = "run") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", command, *args], capture_output=True, text=True, timeout=1200
    )


def registry(root: Path):
    from components.promoter.registry import Registry

    return Registry(f"sqlite:///{root / 'pipeline' / 'mlflow' / 'mlflow.db'}", "torchtfx-taxi")


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


def test_first_run_runs_every_component_and_promotes_version_1(taxi_run):
    """Promotion scenario 1: no champion yet; value gates alone decide; version 1 becomes champion."""
    root, proc = taxi_run
    summary = metadata(root / "pipeline")
    assert {s.node for s in summary.stages} == ALL_NODES
    assert all(s.state == "COMPLETE" for s in summary.stages), summary.stages
    assert summary.blessed is True
    assert summary.parity is not None and summary.parity <= 1e-5
    assert summary.ddp_workers == 2
    assert (root / "serving" / "1" / "saved_model.pb").is_file()
    assert f"pushed model: {root / 'serving' / '1'}" in proc.stdout
    assert 'version_labels { key: "stable" value: 1 }' in (root / "serving" / "models.config").read_text()
    assert registry(root).serving_version("champion") == 1
    assert "auc=" in proc.stdout and "MLflow run:" in proc.stdout
    report = Path(proc.stdout.split("Report: ")[1].split()[0])
    assert report.is_file() and (report.parent / "calibration.png").is_file()
    assert (report.parent / "loss_curves.png").is_file() and "Parity" in report.read_text()


def test_pushed_model_serves_raw_examples_in_a_tensorflow_only_process(taxi_run, taxi_rows, taxi_cfg):
    root, _ = taxi_run
    version = root / "serving" / "1"
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


def test_worse_model_is_rejected_and_production_is_byte_identical(taxi_run):
    """Promotion scenario 2: one optimizer step of training; the gates against the champion refuse it."""
    root, _ = taxi_run
    before, champion = tree_digest(root / "serving"), registry(root).alias_version("champion").version
    proc = torchtfx("--data-dir", str(root / "data"), "--pipeline-root", str(root / "pipeline"),
                    "--serving-dir", str(root / "serving"), "--epochs", "1", "--batch-size", "100000")  # fmt: skip
    assert proc.returncode == REJECTED, proc.stderr[-3000:]
    assert "Candidate REJECTED" in proc.stderr
    assert "auc" in proc.stderr and "change gate: candidate - champion >= -0.01" in proc.stderr
    assert tree_digest(root / "serving") == before  # versions, models.config, batching: untouched
    assert registry(root).alias_version("champion").version == champion
    assert registry(root).alias_version("challenger").tags["rejected"] == "true"


def test_good_model_is_promoted_and_previous_points_to_the_former_champion(taxi_run):
    """Promotion scenario 3: a properly trained model (another seed) passes the change gates."""
    root, _ = taxi_run
    former = registry(root).alias_version("champion").version
    proc = torchtfx("--data-dir", str(root / "data"), "--pipeline-root", str(root / "pipeline"),
                    "--serving-dir", str(root / "serving"), "--epochs", "6", "--seed", "7")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    reg = registry(root)
    assert reg.alias_version("previous").version == former
    assert reg.serving_version("champion") == 2
    config = (root / "serving" / "models.config").read_text()
    assert 'key: "stable" value: 2' in config and "versions: 1" in config


def test_rollback_restores_the_former_champion_and_is_idempotent(taxi_run):
    """Promotion scenario 4: `torchtfx promote --rollback`, twice."""
    root, _ = taxi_run
    args = ("--pipeline-root", str(root / "pipeline"), "--serving-dir", str(root / "serving"))
    first = torchtfx("--rollback", *args, command="promote")
    assert first.returncode == 0 and "rolled back" in first.stdout, first.stderr[-2000:]
    assert registry(root).serving_version("champion") == 1
    assert 'key: "stable" value: 1' in (root / "serving" / "models.config").read_text()
    state = tree_digest(root / "serving")
    second = torchtfx("--rollback", *args, command="promote")
    assert second.returncode == 0 and "nothing to roll back" in second.stdout
    assert tree_digest(root / "serving") == state and registry(root).serving_version("champion") == 1


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
    assert not ran & {"Transform", "TorchTrainer", "Evaluator", "Promoter"}, ran
    assert tree_digest(serving) == before
