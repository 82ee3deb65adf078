"""Multiclass and regression through the whole bridge: training loss, ONNX export, translator, the serving
signature's outputs per task, and the parity gate (all class probabilities; relative for regression)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import torch

from tests.unit.components.torch_trainer.served_models import export_and_serve, train_briefly
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.zoo import mlp
from torchtfx.components.torch_trainer.savedmodel.parity import ParityError, enforce, measure_parity
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import check_onnx


def _trained(tiny, steps: int = 40) -> torch.nn.Module:
    torch.manual_seed(0)
    model = mlp.build(tiny.layout.model_spec(), hidden_units=(16,), dropout=0.0, max_embedding_dim=4)
    return train_briefly(model, tiny, steps)


def _served(tiny, tmp_path):
    model = _trained(tiny)
    export_and_serve(tiny, model, tmp_path / "model.onnx", tmp_path / "serving")
    assert check_onnx(ExportHead.for_layout(model, tiny.layout), tmp_path / "model.onnx", tiny.arrays) < 1e-5
    return model, tf.saved_model.load(str(tmp_path / "serving")).signatures["serving_default"]


def _requests(tiny, count: int, drop: str) -> tf.Tensor:
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(tiny.examples_path), compression_type="GZIP")]
    stripped = []
    for record in records[:count]:
        example = tf.train.Example.FromString(record)
        del example.features.feature[drop]  # serving requests carry no label
        stripped.append(example.SerializeToString())
    return tf.constant(stripped)


def test_multiclass_serves_probabilities_and_class_strings_and_passes_parity(tiny_payment, tmp_path):
    model, serve = _served(tiny_payment, tmp_path)
    out = serve(examples=_requests(tiny_payment, 16, "payment_type"))
    assert sorted(out) == ["classes", "probabilities"]
    probs, classes = out["probabilities"].numpy(), out["classes"].numpy()
    assert probs.shape == (16, 3) and classes.shape == (16, 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert [c.decode() for c in classes[0]] == list(tiny_payment.layout.classes)
    report = measure_parity(str(tmp_path / "serving"), str(tiny_payment.examples_dir), model, tiny_payment.layout, 1e-5)
    assert report.examples == 1500 and report.max_relative_diff is None
    enforce(report)


def test_regression_serves_dollars_and_gates_parity_relative_to_scale(tiny_tips, tmp_path):
    model, serve = _served(tiny_tips, tmp_path)
    out = serve(examples=_requests(tiny_tips, 16, "tips"))
    assert sorted(out) == ["predictions"]
    dollars = out["predictions"].numpy()
    assert dollars.shape == (16,) and np.all(np.isfinite(dollars))
    # The network predicts log1p(tips); the served value is expm1 of it, in dollars.
    a = tiny_tips.arrays
    with torch.no_grad():
        log_pred = model(torch.from_numpy(a.dense[:5]), torch.from_numpy(a.categorical[:5])).numpy()
        head = ExportHead.for_layout(model, tiny_tips.layout)(
            torch.from_numpy(a.dense[:5]), torch.from_numpy(a.categorical[:5])
        )
    np.testing.assert_allclose(head.numpy(), np.expm1(log_pred), rtol=1e-5, atol=1e-6)
    report = measure_parity(str(tmp_path / "serving"), str(tiny_tips.examples_dir), model, tiny_tips.layout, 1e-5)
    assert report.max_relative_diff is not None and report.passed, report
    assert report.gated_diff == report.max_relative_diff


def test_regression_parity_refuses_a_conversion_that_is_off_by_a_relative_margin(tiny_tips, tmp_path):
    model, _ = _served(tiny_tips, tmp_path)
    with torch.no_grad():
        model.mlp[-1].bias.add_(0.01)  # every prediction about 1% off after expm1
    report = measure_parity(str(tmp_path / "serving"), str(tiny_tips.examples_dir), model, tiny_tips.layout, 1e-3)
    assert not report.passed and report.max_relative_diff > 1e-3
    with pytest.raises(ParityError, match="relative"):
        enforce(report)
