"""Multiclass and regression end to end through ``torchtfx run``, as a user runs them: the shipped
``taxi_payment`` (payment type, 3 classes) and ``taxi_tips`` (tip in dollars, log1p target) datasets on a
small sample, gated by TFMA, promoted, served in a TensorFlow-only process; then a one-step candidate that
the change gate against the champion must refuse, naming the metric, with production untouched."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import helpers
from tests.e2e.test_pipeline import REJECTED, SAMPLE_ROWS, run_on
from torchtfx.components.shared.mlflow_client import Registry
from torchtfx.data.config.dataset import load_dataset_config

pytestmark = pytest.mark.e2e


def _run(root: Path, dataset: str, *args: str):
    # No TF Serving reads these folders: the labels move at once (as `make run` does), so the second run on a root
    # is not refused for the first one's staged promotion.
    return run_on(root, "--dataset", dataset, "--confirm-labels", "immediate", *args)


def _registry(root: Path, dataset: str) -> Registry:
    return Registry(f"sqlite:///{root / 'pipeline' / 'mlflow' / 'mlflow.db'}", f"torchtfx-{dataset}")


@pytest.fixture(scope="module", params=["taxi_payment", "taxi_tips"])
def task_run(request, tmp_path_factory, taxi_csv):
    dataset = request.param
    root = tmp_path_factory.mktemp(dataset)
    rows = helpers.csv_rows(taxi_csv, SAMPLE_ROWS)
    helpers.write_sample(rows, root / "data", list(rows[0]))
    # The multiclass run also asks for FP16 serving: the drift gate measures the variant on the eval split.
    fp16 = ("--serving-precision", "fp16") if dataset == "taxi_payment" else ()
    proc = _run(root, dataset, "--epochs", "6", *fp16)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return dataset, root, rows, proc


def _requests(root: Path, rows, dataset: str) -> Path:
    cfg = load_dataset_config(dataset)
    schema = helpers.read_schema(cfg.schema_path)
    path = root / "requests.tfrecord"
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for row in rows[:32]:
            request = {k: v for k, v in row.items() if k not in cfg.label.raw_columns}  # no label when serving
            writer.write(helpers.row_to_example(request, schema).SerializeToString())
    return path


SERVE = {
    "taxi_payment": """
        out = serve(examples=batch)
        assert sorted(out) == ["classes", "probabilities"], sorted(out)
        probs, classes = out["probabilities"].numpy(), out["classes"].numpy()
        assert probs.shape == (32, 3) and classes.shape == (32, 3), (probs.shape, classes.shape)
        assert abs(probs.sum(axis=1) - 1).max() < 5e-3  # served in fp16 here: rows sum to 1 within its rounding
        print("classes", sorted(c.decode() for c in classes[0]))
    """,
    "taxi_tips": """
        out = serve(examples=batch)
        assert sorted(out) == ["predictions"], sorted(out)
        dollars = out["predictions"].numpy()
        assert dollars.shape == (32,) and (dollars > -1).all(), dollars
        print("mean predicted tip", float(dollars.mean()))
    """,
}


def test_each_task_runs_every_component_is_gated_and_promoted(task_run):
    dataset, root, _, proc = task_run
    summary = helpers.metadata(root / "pipeline")
    assert all(s.state == "COMPLETE" for s in summary.stages), summary.stages
    assert summary.task == ("multiclass" if dataset == "taxi_payment" else "regression")
    assert summary.blessed is True and summary.pushed_to
    assert summary.parity is not None
    assert (root / "serving" / "1" / "saved_model.pb").is_file()
    assert _registry(root, dataset).serving_version("champion") == 1
    assert f"{REJECTED_METRIC[dataset]}=" in proc.stdout  # the run report leads with the task's metrics
    drift = summary.precision_drift
    if dataset == "taxi_payment":  # asked for fp16: measured on every eval row, served only within the limits
        assert drift["requested"] == "fp16" and drift["drift"]["examples"] > 500
        assert summary.serving_precision == ("fp16" if drift["drift"]["passed"] else "fp32")
        assert "Serving precision:" in proc.stdout
    else:
        assert drift is None and summary.serving_precision == "fp32"


def test_the_pushed_model_serves_the_documented_outputs_in_a_tensorflow_only_process(task_run):
    dataset, root, rows, _ = task_run
    requests = _requests(root, rows, dataset)
    script = f"""
import sys
import tensorflow as tf
model = tf.saved_model.load({str(root / "serving" / "1")!r})
serve = model.signatures["serving_default"]
batch = tf.constant([r.numpy() for r in tf.data.TFRecordDataset({str(requests)!r})])
{textwrap.dedent(SERVE[dataset])}
leaked = [m for m in ("torch", "tensorflow_transform", "onnx2tf") if m in sys.modules]
assert not leaked, leaked
print("served")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "served" in proc.stdout
    if dataset == "taxi_payment":
        assert "classes ['Cash', 'Credit Card', 'No Charge']" in proc.stdout


REJECTED_METRIC = {"taxi_payment": "accuracy", "taxi_tips": "mean_squared_error"}


def test_a_worse_candidate_is_rejected_by_the_change_gate_naming_the_metric(task_run):
    dataset, root, _, _ = task_run
    before = helpers.tree_digest(root / "serving")
    champion = _registry(root, dataset).alias_version("champion").version
    proc = _run(root, dataset, "--epochs", "1", "--batch-size", "100000")  # one optimizer step
    assert proc.returncode == REJECTED, proc.stderr[-3000:]
    assert "Candidate REJECTED" in proc.stderr
    failed = [line for line in proc.stderr.splitlines() if "change gate" in line]
    assert any(REJECTED_METRIC[dataset] in line for line in failed), proc.stderr[-3000:]
    assert helpers.tree_digest(root / "serving") == before
    assert _registry(root, dataset).alias_version("champion").version == champion


def test_a_label_with_one_class_stops_before_training_naming_split_counts_and_fix(tmp_path, taxi_csv):
    """A broken upstream join set every tip to 0, so every `big_tipper` label is 0. It used to train every epoch
    at eval_auc=nan and then fail in ML Metadata with an SQL traceback ('no such column: nan')."""
    rows = [{**row, "tips": "0.0"} for row in helpers.csv_rows(taxi_csv, SAMPLE_ROWS)]
    helpers.write_sample(rows, tmp_path / "data", list(rows[0]))
    proc = _run(tmp_path, "taxi", "--epochs", "2")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "no such column" not in proc.stderr
    assert "Label 'big_tipper' of dataset 'taxi' cannot be trained on or evaluated: split 'train' has one class" in (
        proc.stderr
    )
    eval_counts = r"split 'eval' has one class \(\d+ examples: class 0 \(not big_tipper\): \d+, class 1 \("
    assert re.search(eval_counts, proc.stderr)
    assert "Fix: check the data that fills column 'tips'" in proc.stderr
    assert "epoch 1/" not in proc.stderr  # stopped before any training
    stages = {s.node: s.state for s in helpers.metadata(tmp_path / "pipeline").stages}
    assert stages["TorchTrainer"] == "FAILED" and "Promoter" not in stages, stages
    assert not (tmp_path / "serving").exists() or not any((tmp_path / "serving").iterdir())
