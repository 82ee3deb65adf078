"""ONNX export, conversion (translator), the serving SavedModel and the parity gate, on a real TFT graph."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import tensorflow as tf
import torch

from tests.unit.components.torch_trainer.served_models import train_briefly
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.zoo import mlp
from torchtfx.components.torch_trainer.savedmodel.convert import build_serving_model, convert_onnx, inlined_transform
from torchtfx.components.torch_trainer.savedmodel.parity import ParityError, enforce, measure_parity
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import check_onnx, export_onnx


def _trained_model(tiny_taxi, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = mlp.build(tiny_taxi.layout.model_spec(), hidden_units=(16,), dropout=0.0, max_embedding_dim=4)
    return train_briefly(model, tiny_taxi)


@pytest.fixture(scope="module")
def converted(tmp_path_factory, tiny_taxi):
    root = tmp_path_factory.mktemp("converted")
    model = _trained_model(tiny_taxi)
    export_onnx(ExportHead(model, "binary"), tiny_taxi.arrays, root / "model.onnx")
    network = convert_onnx(root / "model.onnx", root / "onnx2tf").network
    build_serving_model(network, tiny_taxi.tft_output, tiny_taxi.cfg, tiny_taxi.layout, root / "serving")
    return model, root


def test_onnxruntime_matches_torch(converted, tiny_taxi):
    model, root = converted
    assert check_onnx(ExportHead(model, "binary"), root / "model.onnx", tiny_taxi.arrays) < 1e-5


def test_onnx_check_is_batched_and_sees_every_batch(converted, tiny_taxi):
    model, root = converted
    model = ExportHead(model, "binary")
    whole = check_onnx(model, root / "model.onnx", tiny_taxi.arrays, batch_size=len(tiny_taxi.arrays))
    batched = check_onnx(model, root / "model.onnx", tiny_taxi.arrays, batch_size=97)  # last batch is partial
    assert batched == pytest.approx(whole, abs=1e-7)
    drifted = copy.deepcopy(model)
    with torch.no_grad():
        next(drifted.parameters()).add_(0.5)  # the ONNX file no longer matches this network
    assert check_onnx(drifted, root / "model.onnx", tiny_taxi.arrays, batch_size=97) > 1e-3


def test_converted_savedmodel_passes_the_parity_gate(converted, tiny_taxi):
    model, root = converted
    report = measure_parity(str(root / "serving"), str(tiny_taxi.examples_dir), model, tiny_taxi.layout, 1e-5)
    assert report.examples == 800
    assert report.max_abs_diff <= 1e-5
    enforce(report)


def test_parity_gate_fails_on_a_broken_conversion(tmp_path, converted, tiny_taxi):
    """A conversion that changed the numbers (here: a perturbed network) must be refused."""
    model, _ = converted
    broken = _trained_model(tiny_taxi)
    with torch.no_grad():
        broken.mlp[0].weight.add_(0.05)
    export_onnx(ExportHead(broken, "binary"), tiny_taxi.arrays, tmp_path / "broken.onnx")
    network = convert_onnx(tmp_path / "broken.onnx", tmp_path / "onnx2tf").network
    build_serving_model(network, tiny_taxi.tft_output, tiny_taxi.cfg, tiny_taxi.layout, tmp_path / "serving")
    report = measure_parity(str(tmp_path / "serving"), str(tiny_taxi.examples_dir), model, tiny_taxi.layout, 1e-5)
    assert not report.passed
    with pytest.raises(ParityError, match=r"differs from PyTorch by up to [0-9.e-]+ .* above the tolerance 1e-05"):
        enforce(report)


def test_serving_signature_takes_raw_examples_without_label(converted, tiny_taxi):
    _, root = converted
    loaded = tf.saved_model.load(str(root / "serving"))
    serve = loaded.signatures["serving_default"]
    assert list(serve.structured_input_signature[1]) == ["examples"]
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(tiny_taxi.examples_path), compression_type="GZIP")]
    stripped = []
    for record in records[:16]:
        example = tf.train.Example.FromString(record)
        del example.features.feature["tips"]  # serving requests carry no label
        stripped.append(example.SerializeToString())
    probs = serve(examples=tf.constant(stripped))["probabilities"].numpy()
    assert probs.shape == (16,) and np.all((probs >= 0) & (probs <= 1))
    transformed = loaded.signatures["transform_features"](examples=tf.constant(records[:4]))
    assert "big_tipper_xf" in transformed and "fare_xf" in transformed


def test_the_serving_signature_runs_transform_inline_with_the_parse(converted):
    """TFT's function cannot be inlined by TF's optimizer (its lookups have no control outputs), so TF Serving ran
    it as a call of its own: 69 us of the 273 us a batch-1 request took (tests/bench/results/README.md). Imported into
    ``serve``, the lookups sit in one function with the parse."""
    _, root = converted
    library = tf.saved_model.load(str(root / "serving")).signatures["serving_default"].graph.as_graph_def().library
    ops = [{node.op for node in function.node_def} for function in library.function]
    assert any({"ParseExampleV2", "LookupTableFindV2"} <= function_ops for function_ops in ops)


def test_a_transform_layer_tft_runs_another_way_is_called_as_tft_calls_it(caplog):
    class Layer:  # a TransformFeaturesLayer whose loader lacks TFT 1.16's internals
        _saved_model_loader = object()

        def __call__(self, features):
            return {"x_xf": features["x"] * 2}

    out = inlined_transform(Layer(), {"x": tf.constant([1.0])})
    assert out["x_xf"].numpy().tolist() == [2.0]
    assert "called as TFT's function, not inlined (AttributeError" in caplog.text
