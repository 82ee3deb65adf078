"""The FP16 drift gate in the Trainer's flow, on a real TFT graph: the default model's float16 variant is
measured on every eval row and served; a model built to be precision-sensitive (large logits that nearly
cancel, so float16 rounds the decision away) is refused with its flip count, and FP32 stays in place."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import torch
from torch import nn

from tests import helpers
from tests.unit.components.torch_trainer.served_models import NearlyCancelling, export_and_serve, train_briefly
from torchtfx.components.torch_trainer import flow
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.modeling.zoo import mlp
from torchtfx.components.torch_trainer.savedmodel.precision import drift_figures
from torchtfx.data.config.serving_precision import DriftLimits, ServingConfig


def _request(tiny, root, precision: str) -> flow.TrainRequest:
    return flow.TrainRequest(
        dataset=tiny.cfg,
        hparams=TrainerHParams(serving=ServingConfig(precision=precision)),
        split_uris={"eval": str(tiny.examples_dir)},
        transform_graph_uri="",
        model_uri=str(root),
        serving_dir=str(root / "Format-Serving"),
        run_uri=str(root / "run"),
        work_dir=str(root / "work"),
        mlflow_tracking_uri="",
        mlflow_experiment="",
        mlflow_run_name="",
        mlflow_tags={},
        parity_tolerance=1e-5,
    )


def _fp32_model(tiny, model: nn.Module, root):
    """The Trainer's state after parity: the ONNX file and the FP32 SavedModel in Format-Serving."""
    export_and_serve(tiny, model, root / "export" / "model.onnx", root / "Format-Serving")
    return root / "export"


def _arrays(tiny, root):
    """The Trainer's materialized splits (only eval is read, and only for a routed model's figures)."""
    tiny.arrays.save(root / "arrays" / "eval")
    return root / "arrays"


def test_the_default_model_s_fp16_variant_is_measured_on_every_eval_row_and_served(tiny_taxi, tmp_path):
    torch.manual_seed(0)
    model = mlp.build(tiny_taxi.layout.model_spec(), hidden_units=(32, 16), dropout=0.0, max_embedding_dim=8)
    # Trained, as the Trainer's model is: an untrained network puts most rows at p close to 0.5, where float16's
    # rounding flips decisions that a trained one keeps away from the threshold.
    model = train_briefly(model, tiny_taxi)
    export_dir = _fp32_model(tiny_taxi, model, tmp_path)
    fp32 = tf.saved_model.load(str(tmp_path / "Format-Serving"))
    before = helpers.tree_digest(tmp_path / "Format-Serving")

    outcome = flow.reduced_precision(
        _request(tiny_taxi, tmp_path, "fp16"),
        tiny_taxi.tft_output,
        tiny_taxi.layout,
        export_dir,
        _arrays(tiny_taxi, tmp_path),
    )

    drift = outcome.drift
    print("default mlp fp16:", drift.summary())
    assert outcome.served == "fp16" and drift.passed and drift.examples == 800
    assert 0 < drift.max_abs_diff <= DriftLimits().max_abs_diff  # float16 did round: it is not a copy of FP32
    assert helpers.tree_digest(tmp_path / "Format-Serving") != before  # the variant is what will be pushed
    assert not (tmp_path / "Format-Serving.fp32").exists()
    rows = [r.numpy() for r in tf.data.TFRecordDataset(str(tiny_taxi.examples_path), compression_type="GZIP")][:64]
    served = tf.saved_model.load(str(tmp_path / "Format-Serving")).signatures["serving_default"]
    p16 = served(examples=tf.constant(rows))["probabilities"].numpy()
    p32 = fp32.signatures["serving_default"](examples=tf.constant(rows))["probabilities"].numpy()
    assert p16.dtype == np.float32 and np.abs(p16 - p32).max() <= drift.max_abs_diff + 1e-7
    assert '"served": "fp16"' in outcome.to_json() and "fp16_flip_rate" in drift.to_metrics()
    assert drift.routing_decisions == 0 and "routing" not in drift.summary()  # an MLP routes nothing


def test_a_precision_sensitive_model_is_refused_with_its_flip_count_and_fp32_stays(tiny_taxi, tmp_path, caplog):
    torch.manual_seed(0)
    export_dir = _fp32_model(tiny_taxi, NearlyCancelling(tiny_taxi.layout.model_spec()), tmp_path)
    before = helpers.tree_digest(tmp_path / "Format-Serving")

    outcome = flow.reduced_precision(
        _request(tiny_taxi, tmp_path, "fp16"),
        tiny_taxi.tft_output,
        tiny_taxi.layout,
        export_dir,
        _arrays(tiny_taxi, tmp_path),
    )

    print(outcome.reason)
    assert outcome.served == "fp32" and not outcome.drift.passed
    flips = outcome.drift.flips
    assert flips > 100, outcome.drift.summary()  # the logits below 0 all became p = 0.5 >= the threshold
    assert f"{flips} of 800 decisions flip at p >= 0.5" in outcome.reason
    assert helpers.tree_digest(tmp_path / "Format-Serving") == before  # FP32 untouched: it is what is served
    assert f"{flips} of 800 decisions flip" in caplog.text and "serving the FP32 model" in caplog.text


def test_fp32_asks_for_nothing(tiny_taxi, tmp_path):
    outcome = flow.reduced_precision(
        _request(tiny_taxi, tmp_path, "fp32"), tiny_taxi.tft_output, tiny_taxi.layout, tmp_path, tmp_path / "arrays"
    )
    assert outcome == flow.FP32 and not (tmp_path / "work").exists()


@pytest.mark.parametrize(
    ("task", "reference", "variant", "violation"),
    [
        ("binary", [0.49, 0.7, 0.2, 0.9], [0.51, 0.7, 0.2, 0.9], "1 of 4 decisions flip at p >= 0.5 (25.00%"),
        (
            "multiclass",
            [[0.5, 0.4, 0.1], [0.2, 0.7, 0.1]],
            [[0.4, 0.5, 0.1], [0.2, 0.7, 0.1]],
            "1 of 2 rows change their top class",
        ),
        ("regression", [10.0, 1.0, 0.0, 5.0], [10.0, 1.2, 0.0, 5.0], "max relative error 0.05"),
    ],
)
def test_drift_figures_per_task_name_the_exceeded_limit(task, reference, variant, violation):
    report = drift_figures(np.array(reference), np.array(variant), task, DriftLimits(), "float16 network (CPU)")
    assert not report.passed and any(violation in v for v in report.violations), report.violations
    same = drift_figures(np.array(reference), np.array(reference), task, DriftLimits(), "float16 network (CPU)")
    assert same.passed and same.max_abs_diff == 0.0
