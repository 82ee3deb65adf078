"""A failed training run's log outlives the outputs TFX deletes: real torchrun workers that diverge in epoch 2,
the Trainer's flow around them, the run's outputs removed as TFX removes them."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests import helpers
from torchtfx.components.shared.contracts import TRAIN_LOG_FILE
from torchtfx.components.torch_trainer import flow
from torchtfx.components.torch_trainer.cluster.launch import launch
from torchtfx.components.torch_trainer.handoff.constants import CHECKPOINT_META_FILE
from torchtfx.components.torch_trainer.handoff.errors import TrainingFailedError
from torchtfx.components.torch_trainer.run_logs import RunLogs, default_log_root, log_root_for, run_log_dir


def _request(tmp_path: Path, job, log_dir: str) -> flow.TrainRequest:
    return flow.TrainRequest(
        dataset=None,
        hparams=job.hparams,
        split_uris={"eval": ""},
        transform_graph_uri="",
        model_uri=str(tmp_path / "model"),
        serving_dir="",
        run_uri=job.run_dir,
        work_dir=str(tmp_path / "work"),
        mlflow_tracking_uri="",
        mlflow_experiment="",
        mlflow_run_name="",
        mlflow_tags={},
        parity_tolerance=1e-5,
        log_dir=log_dir,
    )


def test_a_failed_training_names_a_log_that_still_exists_with_the_last_checkpoint(tmp_path, tiny_taxi, monkeypatch):
    path = tmp_path / "late.py"
    # Finite for the first epoch (5 steps per rank), NaN from epoch 2 on: one checkpoint exists when it fails.
    source = helpers.diverging_model_source(finite_steps=7)
    path.write_text(source)
    model = {"factory": f"{path}:build", "source": source}
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, model=model, batch_size=64)
    log_dir = run_log_dir(log_root_for(str(tmp_path / "root")), "2026-12-04T10:00:00.5", "7")

    def train_only(request, staging, logs):  # the flow's training step, without Transform's output to read
        (tmp_path / "work").mkdir()
        launch(job, tmp_path / "work" / "job.json", logs.open_path(), logs.shown_log)

    monkeypatch.setattr(flow, "_run_steps", train_only)
    with pytest.raises(TrainingFailedError) as err:
        flow.run(_request(tmp_path, job, log_dir))
    shutil.rmtree(job.run_dir)  # what TFX does with a failed execution's outputs
    shown = Path(re.search(r"full log: (\S+)", str(err.value)).group(1))
    assert shown == tmp_path / "root" / "logs" / "2026-12-04T10:00:00.5" / TRAIN_LOG_FILE
    assert "Training diverged at epoch 2" in shown.read_text()
    summary = json.loads((shown.parent / CHECKPOINT_META_FILE).read_text())
    assert summary["last_completed_epoch"] == 1 and [h["epoch"] for h in summary["history"]] == [1]


def test_a_successful_run_moves_its_log_into_the_model_run_artifact(tmp_path):
    logs = RunLogs(str(tmp_path / "logs" / "run-1"), tmp_path / "run")
    logs.open_path().write_text("epoch 1/1\n")
    logs.keep_success()
    assert (tmp_path / "run" / TRAIN_LOG_FILE).read_text() == "epoch 1/1\n"
    assert not (tmp_path / "logs" / "run-1").exists()


def test_a_run_that_fails_before_training_leaves_no_log_folder(tmp_path):
    logs = RunLogs(str(tmp_path / "logs" / "run-1"), tmp_path / "run")
    logs.keep_failure(tmp_path / "run")
    assert not (tmp_path / "logs").exists()


def test_remote_pipeline_roots(tmp_path, caplog):
    """gs:// is written with tf.io.gfile after a failure; s3:// and minio:// cannot be (TensorFlow 2.16): the
    message then names the step's local file and a warning says why."""
    gcs = RunLogs("gs://bucket/root/logs/run-1", tmp_path / "run")
    assert gcs.kept and gcs.shown_log == "gs://bucket/root/logs/run-1/train.log"
    assert gcs.open_path() == tmp_path / "run" / TRAIN_LOG_FILE
    s3 = RunLogs("s3://bucket/root/logs/run-1", tmp_path / "run")
    assert not s3.kept and s3.shown_log == str(tmp_path / "run" / TRAIN_LOG_FILE)
    assert "s3://bucket/root/logs/run-1 cannot be written from this step" in caplog.text


def test_log_folders_follow_the_pipeline_root():
    assert default_log_root("/runs/local/TorchTrainer/model/12") == "/runs/local/logs"
    assert default_log_root("gs://b/root/TorchTrainer/model/12/") == "gs://b/root/logs"
    assert log_root_for("gs://b/root/") == "gs://b/root/logs" and log_root_for("") == ""
    assert run_log_dir("/r/logs", "unknown", "pod-abc") == "/r/logs/pod-abc"
    assert run_log_dir("/r/logs", "a/b c", "1") == "/r/logs/a_b_c"
