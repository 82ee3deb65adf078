"""The ONNX bridge on models that need it: each repair, the translator's op families, and the failures.

Real torch.onnx export, onnxruntime, onnx2tf and TensorFlow; the models are in ``bridge_models.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import tensorflow as tf
import torch
from onnx import TensorProto, helper

from tests.unit.components.torch_trainer.torch_to_onnx import bridge_models
from torchtfx.components.converter import repairs
from torchtfx.components.converter.ops import OPS
from torchtfx.components.converter.translator import (
    ConversionError,
    OnnxGraphModule,
    UnsupportedOpsError,
    unsupported_ops,
)
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.savedmodel.convert import convert_onnx, run_onnx2tf
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import TRACE_BATCH, _trace, export_onnx
from torchtfx.components.torch_trainer.torch_to_onnx.shape_checks import shape_failures

SPEC = ModelSpec(("a", "b", "c"), ("x", "y"), (11, 40))


def _split(n: int = 200) -> ArraySplit:
    rng = np.random.default_rng(0)
    categorical = np.stack([rng.integers(0, c, n) for c in SPEC.cardinalities], axis=1).astype(np.int64)
    return ArraySplit(rng.normal(size=(n, 3)).astype(np.float32), categorical, rng.integers(0, 2, n).astype(np.float32))


def _head(factory) -> ExportHead:
    torch.manual_seed(0)
    return ExportHead(factory(SPEC), "binary").eval()


def _translated_diff(graph: onnx.ModelProto, head: ExportHead, split: ArraySplit) -> float:
    """Max |TF translation - torch| at batch sizes 1, 7 and the whole split, inside one tf.function."""
    network = OnnxGraphModule(graph)
    specs = [tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([None, 2], tf.int64)]
    fn = tf.function(lambda d, c: network(d, c)[0], input_signature=specs, autograph=False)
    worst = 0.0
    for batch in (1, 7, len(split)):
        dense, categorical = split.dense[:batch], split.categorical[:batch]
        with torch.no_grad():
            want = head(torch.from_numpy(dense), torch.from_numpy(categorical)).numpy()
        worst = max(worst, float(np.max(np.abs(fn(dense, categorical).numpy() - want))))
    return worst


def test_a_batch_read_with_len_is_baked_by_the_exporter_and_repaired(tmp_path):
    head, split = _head(bridge_models.batch_from_len), _split()
    raw = _trace(head, split, TRACE_BATCH)
    assert set(shape_failures(raw, head, split)) == {1, 7}  # the declared dynamic axis is false
    report = export_onnx(head, split, tmp_path / "model.onnx")
    assert report.repairs == (repairs.BATCH_CONSTANTS,)
    graph = onnx.load(str(tmp_path / "model.onnx"))
    assert not shape_failures(graph, head, split)
    assert _translated_diff(graph, head, split) <= 1e-5


def test_a_dynamic_export_needs_no_repair(tmp_path):
    head = _head(bridge_models.einsum_bilinear)
    assert export_onnx(head, _split(), tmp_path / "model.onnx").repairs == ()


def test_gather_elements_translates_by_onnx_semantics(tmp_path):
    head, split = _head(bridge_models.gather_along_features), _split()
    export_onnx(head, split, tmp_path / "model.onnx")
    graph = onnx.load(str(tmp_path / "model.onnx"))
    assert "GatherElements" in {n.op_type for n in graph.graph.node} and not unsupported_ops(graph)
    assert _translated_diff(graph, head, split) <= 1e-5
    conversion = convert_onnx(tmp_path / "model.onnx", tmp_path / "work")
    assert (conversion.strategy, conversion.repairs) == ("translator", ())


def test_einsum_and_a_hand_written_layer_norm_translate(tmp_path):
    head, split = _head(bridge_models.einsum_bilinear), _split()
    export_onnx(head, split, tmp_path / "model.onnx")
    graph = onnx.load(str(tmp_path / "model.onnx"))
    assert {"Einsum", "ReduceMean", "Pow", "Sqrt"} <= {n.op_type for n in graph.graph.node}
    assert _translated_diff(graph, head, split) <= 1e-5


def test_the_translator_names_each_unsupported_op_and_its_nodes(tmp_path):
    with pytest.raises(UnsupportedOpsError, match=r"com\.example\.Frobnicate \(nodes my_frob\)"):
        OnnxGraphModule(onnx.load(str(_custom_op_graph(tmp_path / "custom.onnx"))))


def test_an_op_outside_the_translators_set_goes_to_onnx2tf(tmp_path, monkeypatch):
    """An op the translator lacks (CumSum taken out of its registry here) goes to the onnx2tf fallback, whose
    network the parity gate then judges."""
    monkeypatch.delitem(OPS, "CumSum")
    head, split = _head(bridge_models.cumulative_sum), _split()
    export_onnx(head, split, tmp_path / "model.onnx")
    conversion = convert_onnx(tmp_path / "model.onnx", tmp_path / "work")
    assert conversion.strategy == "onnx2tf"
    dense, categorical = split.dense[:5], split.categorical[:5]
    with torch.no_grad():
        want = head(torch.from_numpy(dense), torch.from_numpy(categorical)).numpy()
    got = conversion.network(tf.constant(dense), tf.constant(categorical))[0].numpy().reshape(-1)
    assert np.max(np.abs(got - want)) <= 1e-5


def _custom_op_graph(path: Path) -> Path:
    nodes = [
        helper.make_node("Relu", ["dense"], ["r"], name="relu"),
        helper.make_node("Frobnicate", ["r"], ["probabilities"], name="my_frob", domain="com.example"),
        helper.make_node("Identity", ["categorical"], ["ids"], name="ids"),
    ]
    inputs = [
        helper.make_tensor_value_info("dense", TensorProto.FLOAT, ["batch", 3]),
        helper.make_tensor_value_info("categorical", TensorProto.INT64, ["batch", 2]),
    ]
    outputs = [
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 3]),
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 2]),
    ]
    graph = helper.make_graph(nodes, "custom", inputs, outputs)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    onnx.save(helper.make_model(graph, opset_imports=opsets), str(path))
    return path


def test_a_failing_onnx2tf_raises_instead_of_exiting_the_process(tmp_path):
    """onnx2tf calls sys.exit(1) on a node it cannot convert; that must not end the executor's process."""
    path = _custom_op_graph(tmp_path / "custom.onnx")
    with pytest.raises(ConversionError, match=r"onnx2tf stopped \(exit code 1\).*Frobnicate"):
        run_onnx2tf(path, tmp_path / "work")


def _relu_graph(path: Path) -> Path:
    nodes = [
        helper.make_node("Relu", ["dense"], ["probabilities"], name="my_relu"),
        helper.make_node("Identity", ["categorical"], ["ids"], name="ids"),
    ]
    inputs = [
        helper.make_tensor_value_info("dense", TensorProto.FLOAT, ["batch", 3]),
        helper.make_tensor_value_info("categorical", TensorProto.INT64, ["batch", 2]),
    ]
    outputs = [
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 3]),
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 2]),
    ]
    graph = helper.make_graph(nodes, "relu", inputs, outputs)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_node_onnx2tf_fails_to_convert_is_named_with_its_op_and_error(tmp_path, monkeypatch):
    """onnx2tf's other sys.exit: a node whose conversion raises (as its NHWC guesses do on 3-D tensors). It
    prints the traceback and the node's name, then four lines of generic advice, and exits; the error must
    name the node, its op type and the error, not quote the advice."""

    def failing_relu(*args, **kwargs):
        raise ValueError("Dimensions must be equal, but are 3 and 4")

    monkeypatch.setattr(tf.nn, "relu", failing_relu)  # what onnx2tf's Relu conversion calls
    with pytest.raises(ConversionError) as err:
        run_onnx2tf(_relu_graph(tmp_path / "relu.onnx"), tmp_path / "work")
    assert str(err.value) == (
        "onnx2tf stopped (exit code 1) at node my_relu (op Relu): ValueError: Dimensions must be equal, but are 3 and 4"
    )


def test_an_op_neither_converter_has_fails_naming_op_node_and_what_was_tried(tmp_path):
    path = _custom_op_graph(tmp_path / "custom.onnx")
    with pytest.raises(ConversionError) as err:
        convert_onnx(path, tmp_path / "work")
    message = str(err.value)
    assert "com.example.Frobnicate (nodes my_frob)" in message
    assert "Repairs:" not in message and "onnx2tf stopped" in message
