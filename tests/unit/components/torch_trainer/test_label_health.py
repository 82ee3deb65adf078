"""Label health before training, per task, on the shipped dataset configs; and no NaN ever reaches ML
Metadata (a real sqlite store, as the local runner uses)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils, standard_artifacts

from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer import constants as keys
from torchtfx.components.torch_trainer import executor, flow
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.handoff.job import TrainResult
from torchtfx.components.torch_trainer.label_health import LabelHealthError, check_label_health
from torchtfx.components.torch_trainer.savedmodel.parity import ParityReport
from torchtfx.data.config.dataset import load_dataset_config


def test_a_binary_label_with_one_class_stops_naming_splits_counts_rule_and_fix(tiny_taxi):
    """A broken upstream join that set every label to 0."""
    zeros = {"train": np.zeros(4000, np.float32), "eval": np.zeros(2000, np.float32)}
    with pytest.raises(LabelHealthError) as err:
        check_label_health(zeros, tiny_taxi.layout, tiny_taxi.cfg)
    assert str(err.value) == (
        "Label 'big_tipper' of dataset 'taxi' cannot be trained on or evaluated: split 'train' has one class "
        "(4000 examples: class 0 (not big_tipper): 4000, class 1 (big_tipper): 0); split 'eval' has one class "
        "(2000 examples: class 0 (not big_tipper): 2000, class 1 (big_tipper): 0). A binary model needs both "
        "classes in every split: it learns nothing from one, and AUC is undefined. The label is column 'tips' "
        "greater 0.2 x fare (the label: section of the dataset config). Fix: check the data that fills column "
        "'tips' (a broken upstream join or filter can set every label to one value), or change the label rule; "
        "then rerun."
    )


def test_a_multiclass_split_missing_a_class_names_it(tiny_payment, caplog):
    train = np.array([0] * 50 + [1] * 40 + [2] * 3, np.float32)
    eval_ = np.array([0] * 20 + [1] * 10, np.float32)
    with pytest.raises(LabelHealthError) as err:
        check_label_health({"train": train, "eval": eval_}, tiny_payment.layout, tiny_payment.cfg)
    message = str(err.value)
    assert "split 'eval' has no examples of class 2 (No Charge) (30 examples: class 0 (Cash): 20, " in message
    assert "split 'train'" not in message and "the 3 most frequent values of column 'payment_type'" in message
    with caplog.at_level(logging.WARNING):
        check_label_health({"train": train, "eval": np.append(eval_, [2, 2])}, tiny_payment.layout, tiny_payment.cfg)
    assert "few eval examples of class 2 (No Charge): 2; its metrics will be noisy" in caplog.text


def test_a_constant_regression_target_stops(tiny_tips):
    target = {"train": np.linspace(0, 3, 500, dtype=np.float32), "eval": np.full(200, 0.0, np.float32)}
    with pytest.raises(LabelHealthError, match=r"split 'eval' has a constant target \(200 examples, every one is 0\)"):
        check_label_health(target, tiny_tips.layout, tiny_tips.cfg)


def test_the_shipped_samples_are_healthy(tiny_taxi, tiny_payment, tiny_tips):
    for tiny in (tiny_taxi, tiny_payment, tiny_tips):
        half = len(tiny.arrays.label) // 2
        check_label_health({"train": tiny.arrays.label[:half], "eval": tiny.arrays.label[half:]}, tiny.layout, tiny.cfg)


def _artifact(cls, uri, splits=None):
    artifact = cls()
    artifact.uri = str(uri)
    if splits:
        artifact.split_names = artifact_utils.encode_split_names(splits)
    return artifact


def _outcome(metrics: dict[str, float], refused: dict[str, int] | None = None) -> flow.TrainOutcome:
    result = TrainResult(
        best_epoch=1,
        epochs_run=1,
        eval_loss=0.5,
        eval_metrics=metrics,
        train_examples=10,
        eval_examples=5,
        world_size=2,
        device="cpu",
        seconds=1.0,
        examples_per_second=10.0,
        onnx_max_abs_diff=0.0,
        mlflow_run_id=None,
    )
    return flow.TrainOutcome(
        result, ParityReport(1e-7, 1e-8, 5, 1e-5), None, {}, "translator; repairs: none", refused=refused or {}
    )


def _published(tmp_path, monkeypatch, outcome: flow.TrainOutcome) -> metadata_store_pb2.Artifact:
    """The executor's publish path for ``outcome``; the Model artifact as a real sqlite ML Metadata store keeps it."""
    monkeypatch.setattr(flow, "run", lambda request: outcome)
    model = _artifact(standard_artifacts.Model, tmp_path / "TorchTrainer" / "model" / "3")
    inputs = {
        keys.EXAMPLES_KEY: [_artifact(standard_artifacts.Examples, tmp_path / "eg", ["train", "eval"])],
        keys.TRANSFORM_GRAPH_KEY: [_artifact(standard_artifacts.TransformGraph, tmp_path / "graph")],
    }
    outputs = {keys.MODEL_KEY: [model], keys.MODEL_RUN_KEY: [_artifact(standard_artifacts.ModelRun, tmp_path / "r")]}
    properties = {
        contracts.DATASET_CONFIG_KEY: load_dataset_config("taxi").to_json(),
        keys.HPARAMS_KEY: TrainerHParams().to_json(),
        contracts.MLFLOW_TRACKING_URI_KEY: f"sqlite:///{tmp_path / 'mlflow.db'}",
        keys.MLFLOW_EXPERIMENT_KEY: "x",
        keys.PARITY_TOLERANCE_KEY: 1e-5,
    }
    context = base_executor.BaseExecutor.Context(tmp_dir=str(tmp_path / "tmp"), unique_id="3")
    executor.Executor(context).Do(inputs, outputs, properties)
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri, config.sqlite.connection_mode = str(tmp_path / "metadata.sqlite"), 3
    store = metadata_store.MetadataStore(config)
    model.type_id = store.put_artifact_type(model.artifact_type)
    [artifact_id] = store.put_artifacts([model.mlmd_artifact])
    [stored] = store.get_artifacts_by_id([artifact_id])
    return stored


def test_a_nan_metric_is_never_written_to_ml_metadata(tmp_path, monkeypatch, caplog):
    """The executor's publish path with a NaN eval AUC (what a one-class eval split produced), stored in a real
    sqlite ML Metadata store: it used to fail with 'no such column: nan'."""
    with caplog.at_level(logging.WARNING):
        stored = _published(tmp_path, monkeypatch, _outcome({"auc": float("nan"), "loss_ratio": 0.25}))
    recorded = {k: v.double_value for k, v in stored.custom_properties.items() if v.HasField("double_value")}
    assert recorded == {contracts.EVAL_METRIC_PROPERTY_PREFIX + "loss_ratio": 0.25}
    assert json.loads(stored.custom_properties[contracts.PARITY_PROPERTY].string_value) == pytest.approx(1e-7)
    assert "Eval metric auc is nan; not recorded on the Model artifact" in caplog.text
    assert contracts.LABEL_REFUSED_PROPERTY not in stored.custom_properties  # no row could be refused


def test_rows_refused_for_their_label_reach_the_model_artifact_and_the_run_summary(tmp_path, monkeypatch):
    from torchtfx.pipeline.reporting.summary import RunSummary

    stored = _published(tmp_path, monkeypatch, _outcome({"auc": 0.9}, refused={"train": 7, "eval": 3}))
    summary = RunSummary("run-1", [], {contracts.TRAINER_ID: {"model": [stored]}})
    assert summary.label_refused == {"train": 7, "eval": 3}
    assert summary.refused_line == "Rows refused for their label (neither trained on nor evaluated): eval 3, train 7"


def test_a_rare_train_class_gets_a_hint_to_balance_the_class_weights_unless_they_are(tiny_payment, caplog):
    """Under 5% of the train split (RARE_CLASS_SHARE): the unweighted loss barely rewards predicting it."""
    skewed = {"train": np.array([0] * 500 + [1] * 450 + [2] * 20, np.float32), "eval": np.repeat([0, 1, 2], 20)}
    even = {"train": np.repeat([0, 1, 2], 100).astype(np.float32), "eval": np.repeat([0, 1, 2], 20)}
    hint = "set `class_weights: balanced` (--class-weights balanced"
    with caplog.at_level(logging.WARNING):
        check_label_health(skewed, tiny_payment.layout, tiny_payment.cfg)
    assert "rare in the train split: class 2 (No Charge): 20 of 970 (2.1%)" in caplog.text and hint in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        check_label_health(even, tiny_payment.layout, tiny_payment.cfg)
        check_label_health(skewed, tiny_payment.layout, tiny_payment.cfg, class_weights="balanced")
    assert "class_weights" not in caplog.text
