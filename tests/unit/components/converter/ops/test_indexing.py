"""Indexing, scatter and padding handlers on cases ONNX's backend suite leaves out: unknown batch dimensions,
pads/k/axes arriving at run time, reductions with duplicate and negative indices, and a float16 network;
compared with onnxruntime (or numpy where onnxruntime refuses the case)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import tensorflow as tf
from onnx import TensorProto, helper

from torchtfx.components.converter.translator import OnnxGraphModule

_NP = {TensorProto.FLOAT: np.float32, TensorProto.INT64: np.int64, TensorProto.INT32: np.int32}


def _model(node: onnx.NodeProto, inputs: list[tuple[str, int, list]], outputs: list[tuple[str, int]], opset=18):
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _translated(model, feeds: list[np.ndarray], dtype=tf.float32) -> list[np.ndarray]:
    """The model traced with every input's first dimension unknown (its values unknown too), then run."""
    network = OnnxGraphModule(model, compute_dtype=dtype, fuse=False)
    specs = [tf.TensorSpec([None, *a.shape[1:]] if a.ndim else [], tf.as_dtype(a.dtype)) for a in feeds]
    traced = tf.function(lambda *xs: network(*xs), input_signature=specs, autograph=False)
    return [np.asarray(t) for t in traced(*feeds)]


def _onnxruntime(model, feeds: list[np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: a for i, a in zip(model.graph.input, feeds, strict=True)})


def _assert_like_onnxruntime(model, feeds: list[np.ndarray]) -> None:
    for got, want in zip(_translated(model, feeds), _onnxruntime(model, feeds), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_with_pads_and_axes_at_run_time(mode):
    node = helper.make_node("Pad", ["x", "pads", "value", "axes"], ["y"], mode=mode)
    inputs = [
        ("x", TensorProto.FLOAT, [None, 4, 5]),
        ("pads", TensorProto.INT64, [4]),
        ("value", TensorProto.FLOAT, []),
        ("axes", TensorProto.INT64, [2]),
    ]
    x = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    pads = np.array([1, 3, 2, 0] if mode != "constant" else [1, -2, 2, 3], np.int64)
    feeds = [x, pads, np.array(7.5, np.float32), np.array([1, -1], np.int64)]
    _assert_like_onnxruntime(_model(node, inputs, [("y", TensorProto.FLOAT)]), feeds)


@pytest.mark.parametrize("mode", ["reflect", "wrap", "edge"])
def test_pad_wider_than_the_axis_repeats_like_numpy(mode):
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)
    model = _model(
        node, [("x", TensorProto.FLOAT, [None, 3]), ("pads", TensorProto.INT64, [4])], [("y", TensorProto.FLOAT)]
    )
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = _translated(model, [x, np.array([0, 7, 1, 5], np.int64)])
    np.testing.assert_array_equal(got, np.pad(x, [(0, 1), (7, 5)], mode=mode))


def test_top_k_smallest_integers_with_ties_and_the_type_minimum():
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=1, largest=0)
    model = _model(
        node,
        [("x", TensorProto.INT32, [None, 6]), ("k", TensorProto.INT64, [1])],
        [("values", TensorProto.INT32), ("indices", TensorProto.INT64)],
    )
    low = np.iinfo(np.int32).min
    x = np.array([[3, 1, 1, low, 2, low], [0, 0, 0, 5, -1, 0]], np.int32)
    _assert_like_onnxruntime(model, [x, np.array([4], np.int64)])


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_slices_with_reductions(reduction):
    node = helper.make_node("ScatterND", ["data", "indices", "updates"], ["y"], reduction=reduction)
    model = _model(
        node,
        [
            ("data", TensorProto.FLOAT, [None, 3, 2]),
            ("indices", TensorProto.INT64, [None, 1]),
            ("updates", TensorProto.FLOAT, [None, 3, 2]),
        ],
        [("y", TensorProto.FLOAT)],
    )
    rng = np.random.default_rng(0)
    data, updates = rng.normal(size=(4, 3, 2)).astype(np.float32), rng.normal(size=(3, 3, 2)).astype(np.float32)
    # Duplicates only where the order of the writes cannot matter.
    indices = np.array([[1], [-1], [1]] if reduction != "none" else [[1], [-1], [0]], np.int64)
    _assert_like_onnxruntime(model, [data, indices, updates])


def test_scatter_elements_multiplies_duplicates_at_negative_indices():
    node = helper.make_node("ScatterElements", ["data", "indices", "updates"], ["y"], axis=1, reduction="mul")
    model = _model(
        node,
        [
            ("data", TensorProto.FLOAT, [None, 4]),
            ("indices", TensorProto.INT64, [None, 3]),
            ("updates", TensorProto.FLOAT, [None, 3]),
        ],
        [("y", TensorProto.FLOAT)],
    )
    data = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    indices = np.array([[0, -4, 3], [-1, 2, 2]], np.int64)
    _assert_like_onnxruntime(model, [data, indices, np.array([[2, 3, 4], [2, 3, 0.5]], np.float32)])


def test_gather_elements_and_gather_nd_batch_dims_with_negative_indices():
    nodes = [
        helper.make_node("GatherElements", ["x", "i"], ["a"], axis=-1),
        helper.make_node("GatherND", ["x", "j"], ["b"], batch_dims=1),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3, 4]),
            helper.make_tensor_value_info("i", TensorProto.INT64, [None, 3, 2]),
            helper.make_tensor_value_info("j", TensorProto.INT64, [None, 2, 2]),
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "ab"],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    i = np.array([[[0, -1], [2, -3], [-4, 3]]] * 2, np.int64)
    j = np.array([[[-1, 0], [1, -2]], [[0, 3], [-3, -4]]], np.int64)
    _assert_like_onnxruntime(model, [x, i, j])


def test_trilu_with_k_at_run_time_over_a_batch():
    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=0)
    model = _model(
        node, [("x", TensorProto.FLOAT, [None, 3, 5]), ("k", TensorProto.INT64, [])], [("y", TensorProto.FLOAT)]
    )
    x = np.arange(1, 31, dtype=np.float32).reshape(2, 3, 5)
    for k in (-1, 2, 9):
        _assert_like_onnxruntime(model, [x, np.array(k, np.int64)])


@pytest.mark.parametrize("op_type", ["ArgMax", "ArgMin"])
def test_arg_extremes_select_last_index_over_an_unknown_axis_size(op_type):
    node = helper.make_node(op_type, ["x"], ["y"], axis=0, keepdims=0, select_last_index=1)
    model = _model(node, [("x", TensorProto.FLOAT, [None, 3])], [("y", TensorProto.INT64)])
    x = np.array([[1, 5, 0], [1, 2, 0], [0, 5, 3]], np.float32)
    _assert_like_onnxruntime(model, [x])


def test_unique_rows_in_order_of_appearance():
    node = helper.make_node("Unique", ["x"], ["y", "first", "inverse", "counts"], axis=0, sorted=0)
    model = _model(
        node,
        [("x", TensorProto.INT64, [None, 2])],
        [("y", TensorProto.INT64)] + [(n, TensorProto.INT64) for n in ("first", "inverse", "counts")],
    )
    x = np.array([[3, 1], [0, 2], [3, 1], [0, 1], [0, 2]], np.int64)
    _assert_like_onnxruntime(model, [x])


def test_one_hot_with_depth_and_values_at_run_time():
    node = helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=0)
    model = _model(
        node,
        [("i", TensorProto.INT64, [None]), ("depth", TensorProto.FLOAT, []), ("values", TensorProto.FLOAT, [2])],
        [("y", TensorProto.FLOAT)],
    )
    feeds = [np.array([0, -1, 3, 7, -5], np.int64), np.array(4.0, np.float32), np.array([-1, 2], np.float32)]
    _assert_like_onnxruntime(model, feeds)


def test_float16_network_keeps_float32_eye_and_pad_values_in_float16():
    nodes = [
        helper.make_node("EyeLike", ["x"], ["eye"], k=1, dtype=TensorProto.FLOAT),
        helper.make_node("Pad", ["eye"], ["y"], mode="constant", pads=[0, 1, 0, 0], value=0.5),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    network = OnnxGraphModule(model, compute_dtype=tf.float16, fuse=False)
    graph_fn = tf.function(lambda x: network(x), autograph=False).get_concrete_function(tf.TensorSpec([3, 3], tf.int64))
    pads = [op for op in graph_fn.graph.get_operations() if op.type.startswith("Pad")]
    assert pads and all(op.outputs[0].dtype == tf.float16 for op in pads)
    (got,) = network(tf.zeros([3, 3], tf.int64))
    assert got.dtype == tf.float32
    np.testing.assert_array_equal(got.numpy(), np.pad(np.eye(3, k=1), [(0, 0), (1, 0)], constant_values=0.5))
