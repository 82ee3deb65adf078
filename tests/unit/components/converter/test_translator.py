"""The translator's own rules around the operators: sizes kept exact in float16 networks, and unsupported ops
found inside control-flow bodies."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from onnx import TensorProto, helper

from torchtfx.components.converter.translator import OnnxGraphModule, UnsupportedOpsError, unsupported_ops


def test_a_float16_network_keeps_resize_scales_exact():
    """A scale of 1/3 in float16 is 0.33325: floor(6 * scale) would give 1 row, not 2."""
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 1 / 3, 1 / 3])
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [scales],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    x = tf.constant(np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6))
    full, half = OnnxGraphModule(model)(x)[0], OnnxGraphModule(model, compute_dtype=tf.float16)(x)[0]
    assert full.shape == half.shape == (1, 1, 2, 2)
    np.testing.assert_allclose(half.numpy(), full.numpy())


def test_an_unsupported_op_inside_a_loop_body_is_named_before_tracing():
    value = helper.make_tensor_value_info
    nodes = [
        helper.make_node("Frobnicate", ["v"], ["v_out"], name="inner", domain="com.example"),
        helper.make_node("Identity", ["cond"], ["cond_out"]),
    ]
    inputs = [
        value("i", TensorProto.INT64, []),
        value("cond", TensorProto.BOOL, []),
        value("v", TensorProto.FLOAT, [2]),
    ]
    outputs = [value("cond_out", TensorProto.BOOL, []), value("v_out", TensorProto.FLOAT, [2])]
    body = helper.make_graph(nodes, "body", inputs, outputs)
    loop = helper.make_node("Loop", ["n", "", "v0"], ["v"], body=body)
    graph = helper.make_graph(
        [loop],
        "g",
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    assert unsupported_ops(model) == {"com.example.Frobnicate": ["inner"]}
    with pytest.raises(UnsupportedOpsError, match="Frobnicate"):
        OnnxGraphModule(model)
