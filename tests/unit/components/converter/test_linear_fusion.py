"""The translator's fusion of linear layers over a sequence (``linear_fusion.fuse_linear_layers``): real torch
exports give onnxruntime's outputs with the bias and the exact GELU fused; graphs off the pattern stay as they were."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import tensorflow as tf
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from torchtfx.components.converter.linear_fusion import fuse_linear_layers
from torchtfx.components.converter.ops import FUSED_DOMAIN
from torchtfx.components.converter.translator import OnnxGraphModule


def _export(module: nn.Module, tmp_path, width: int = 8) -> onnx.ModelProto:
    torch.manual_seed(0)
    path = tmp_path / "m.onnx"
    torch.onnx.export(
        module.eval(),
        (torch.randn(2, 5, width),),
        str(path),
        input_names=["x"],
        output_names=["y"],
        dynamic_axes={"x": {0: "batch", 1: "length"}},
        opset_version=17,
        dynamo=False,
    )
    return onnx.load(str(path))


def _fused_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.domain == FUSED_DOMAIN and n.op_type == "LinearRows"]


def _translated(model: onnx.ModelProto, x: np.ndarray, fuse: bool = True) -> np.ndarray:
    module = OnnxGraphModule(model, fuse=fuse)
    spec = tf.TensorSpec([None, None, x.shape[-1]], tf.float32)
    traced = tf.function(lambda t: module(t)[0], input_signature=[spec], autograph=False)
    return traced(tf.constant(x)).numpy()


def _onnxruntime(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("shape", [(1, 1, 8), (1, 16, 8), (3, 7, 8), (0, 4, 8)])
def test_a_feed_forward_block_fuses_both_layers_and_the_exact_gelu_and_keeps_onnxruntimes_outputs(tmp_path, shape):
    model = _export(nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8)), tmp_path)
    fused, count = fuse_linear_layers(model)
    assert count == 2 and [n.attribute[0].i for n in _fused_nodes(fused)] == [1, 0]  # gelu on the first only
    assert not {"Erf", "MatMul", "Add", "Div", "Mul"} & {n.op_type for n in fused.graph.node}
    x = np.random.default_rng(1).normal(size=shape).astype(np.float32)
    got = _translated(model, x)
    assert got.shape == shape
    np.testing.assert_allclose(got, _onnxruntime(model, x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, _translated(model, x, fuse=False), rtol=1e-5, atol=1e-6)


def test_the_tanh_gelu_and_a_relu_keep_their_own_ops_after_a_fused_bias(tmp_path):
    model = _export(nn.Sequential(nn.Linear(8, 16), nn.GELU(approximate="tanh"), nn.Linear(16, 4), nn.ReLU()), tmp_path)
    fused, count = fuse_linear_layers(model)
    assert count == 2 and [n.attribute[0].i for n in _fused_nodes(fused)] == [0, 0]
    assert {"Tanh", "Relu"} <= {n.op_type for n in fused.graph.node}
    x = np.random.default_rng(2).normal(size=(2, 3, 8)).astype(np.float32)
    np.testing.assert_allclose(_translated(model, x), _onnxruntime(model, x), rtol=1e-5, atol=1e-5)


def _graph(nodes: list, initializers: dict[str, np.ndarray], outputs: list[str]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


W, B = np.ones((4, 5), np.float32), np.ones(5, np.float32)


@pytest.mark.parametrize(
    ("nodes", "initializers", "outputs"),
    [
        # the product is read twice: by the Add and as a graph output
        (
            [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
            {"w": W, "b": B},
            ["y", "m"],
        ),
        # a [1, n] bias broadcasts differently from BiasAdd's [n]: left alone
        (
            [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
            {"w": W, "b": B[None]},
            ["y"],
        ),
        # a bias of the wrong width
        (
            [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
            {"w": W, "b": B[:4]},
            ["y"],
        ),
        # no bias: the MatMul alone (translated over rows by core.py)
        ([helper.make_node("MatMul", ["x", "w"], ["y"])], {"w": W}, ["y"]),
        # a 3-D weight is a batched product, not a linear layer
        (
            [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
            {"w": W[None], "b": B},
            ["y"],
        ),
    ],
)
def test_graphs_off_the_pattern_are_left_as_they_were(nodes, initializers, outputs):
    model = _graph(nodes, initializers, outputs)
    fused, count = fuse_linear_layers(model)
    assert count == 0 and fused is model
