"""Convolution and pooling handlers against onnxruntime on what ONNX's backend suite leaves out: unknown batch
and spatial sizes at trace time (as a SavedModel's signature has them), reduced-precision (float16) networks,
depthwise 1-D and strided cases TF's Eigen kernels refuse, MaxPool's Indices fed to MaxUnpool."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import tensorflow as tf
from onnx import TensorProto, helper, numpy_helper

from torchtfx.components.converter.translator import OnnxGraphModule

RNG = np.random.default_rng(0)


def _model(nodes, inputs: dict[str, np.ndarray], weights: dict[str, np.ndarray], outputs: dict[str, int]):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), None) for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, t, None) for k, t in outputs.items()],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def _compare(model, inputs: dict[str, np.ndarray], unknown: str = "batch", half: bool = False, tol: float = 1e-4):
    """The translation traced with the batch (``unknown="batch"``) or every axis of the first input unknown,
    run, against onnxruntime's outputs."""
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)
    network = OnnxGraphModule(model, compute_dtype=tf.float16 if half else tf.float32, fuse=False)
    specs = []
    for index, value in enumerate(inputs.values()):
        shape = list(value.shape)
        if index == 0:
            shape = [None] * len(shape) if unknown == "all" else [None, *shape[1:]]
        specs.append(tf.TensorSpec(shape, tf.as_dtype(value.dtype)))
    traced = tf.function(lambda *xs: network(*xs), input_signature=specs, autograph=False)
    for want, got in zip(expected, traced(*inputs.values()), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs"),
    [
        # depthwise 1-D with a multiplier and a stride (Eigen's depthwise kernel wants equal strides)
        ((2, 4, 9), (8, 1, 3), {"group": 4, "strides": [2], "pads": [1, 2]}),
        ((2, 4, 7, 7), (4, 1, 3, 3), {"group": 4, "strides": [2, 1], "auto_pad": "SAME_LOWER"}),
        # 3-D grouped and dilated (Eigen's Conv3D has neither)
        ((1, 4, 6, 6, 6), (6, 2, 3, 3, 3), {"group": 2, "dilations": [2, 1, 2], "pads": [1, 0, 2, 0, 1, 1]}),
    ],
)
def test_conv_with_unknown_batch(x_shape, w_shape, attrs):
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    model = _model(
        [node], {"x": _normal(*x_shape)}, {"w": _normal(*w_shape), "b": _normal(w_shape[0])}, {"y": TensorProto.FLOAT}
    )
    _compare(model, {"x": _normal(*x_shape)})


@pytest.mark.parametrize(
    "attrs",
    [
        {"group": 2, "strides": [2, 2], "dilations": [2, 1], "output_padding": [1, 0], "pads": [1, 0, 0, 2]},
        {"strides": [2, 3], "auto_pad": "SAME_UPPER"},
        {"strides": [2, 2], "output_shape": [10, 9]},
    ],
)
def test_conv_transpose_with_unknown_sizes(attrs):
    x = _normal(2, 4, 4, 5)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    group = attrs.get("group", 1)
    model = _model([node], {"x": x}, {"w": _normal(4, 6 // group, 3, 3), "b": _normal(6)}, {"y": TensorProto.FLOAT})
    _compare(model, {"x": x}, unknown="all")


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices_with_dilations_and_ceil_mode(storage_order):
    x = _normal(2, 3, 8, 7)
    node = helper.make_node(
        "MaxPool",
        ["x"],
        ["y", "i"],
        kernel_shape=[3, 2],
        strides=[2, 2],
        dilations=[1, 2],
        pads=[1, 0, 1, 1],
        ceil_mode=1,
        storage_order=storage_order,
    )
    _compare(_model([node], {"x": x}, {}, {"y": TensorProto.FLOAT, "i": TensorProto.INT64}), {"x": x}, "all")


def test_max_unpool_inverts_max_pool_of_an_odd_size():
    """The indices address the flattened ``output_shape`` input, as MaxPool's address its input."""
    x = _normal(2, 3, 5, 5)
    window = {"kernel_shape": [2, 2], "strides": [2, 2]}
    nodes = [
        helper.make_node("MaxPool", ["x"], ["v", "i"], **window),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("MaxUnpool", ["v", "i", "shape"], ["y"], **window),
    ]
    _compare(_model(nodes, {"x": x}, {}, {"y": TensorProto.FLOAT}), {"x": x})


@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_and_lp_pool_with_pads(count_include_pad):
    x = _normal(2, 3, 7, 6)
    nodes = [
        helper.make_node(
            "AveragePool",
            ["x"],
            ["a"],
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 1, 0, 1],
            count_include_pad=count_include_pad,
        ),
        helper.make_node("LpPool", ["x"], ["l"], kernel_shape=[2, 3], pads=[0, 1, 1, 0], p=3),
    ]
    _compare(_model(nodes, {"x": x}, {}, {"a": TensorProto.FLOAT, "l": TensorProto.FLOAT}), {"x": x}, "all")


def test_float16_network_of_3d_convolution_and_pooling():
    """float16 Conv3D, MaxPool3D and AvgPool3D have no TF CPU kernel: the network still runs in float16."""
    x = _normal(2, 2, 6, 6, 6)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 6, dilations=[2, 1, 1]),
        helper.make_node("MaxPool", ["c"], ["m"], kernel_shape=[2, 2, 2], strides=[2, 2, 2], ceil_mode=1),
        helper.make_node("AveragePool", ["c"], ["a"], kernel_shape=[3, 3, 3], pads=[1] * 6),
        helper.make_node("GlobalAveragePool", ["a"], ["g"]),
    ]
    model = _model(nodes, {"x": x}, {"w": _normal(3, 2, 3, 3, 3)}, {"m": TensorProto.FLOAT, "g": TensorProto.FLOAT})
    _compare(model, {"x": x}, half=True, tol=2e-2)


def test_conv_integer_with_zero_points():
    x = RNG.integers(0, 256, (2, 3, 6, 6)).astype(np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 0, 0, 1], strides=[2, 1])
    weights = {
        "w": RNG.integers(0, 256, (4, 3, 3, 3)).astype(np.uint8),
        "xz": np.array(9, np.uint8),
        "wz": np.array(130, np.uint8),
    }
    _compare(_model([node], {"x": x}, weights, {"y": TensorProto.INT32}), {"x": x})


def test_max_roi_pool_and_col2im():
    x = _normal(2, 3, 10, 10)
    rois = np.array([[0, 1, 1, 5, 6], [1, 0, 0, 9, 9], [0, 3.6, 2.4, 3.6, 8.2], [1, -2, -3, 20, 20]], np.float32)
    nodes = [
        helper.make_node("MaxRoiPool", ["x", "rois"], ["r"], pooled_shape=[3, 2], spatial_scale=0.75),
        helper.make_node("Reshape", ["x", "cols_shape"], ["cols"]),
        helper.make_node(
            "Col2Im", ["cols", "image", "block"], ["c"], strides=[1, 2], dilations=[2, 1], pads=[1, 0, 0, 1]
        ),
    ]
    weights = {
        "cols_shape": np.array([-1, 12, 25], np.int64),
        "image": np.array([6, 10], np.int64),
        "block": np.array([2, 2], np.int64),
    }
    model = _model(nodes, {"x": x, "rois": rois}, weights, {"r": TensorProto.FLOAT, "c": TensorProto.FLOAT})
    _compare(model, {"x": x, "rois": rois})
