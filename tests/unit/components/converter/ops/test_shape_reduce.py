"""Shape and reduction handlers on cases ONNX's backend suite leaves out: unknown batch dimensions together with
axes, sizes, shapes and repeats that arrive at run time, empty-set reductions, integer overflow of a mean and a
float16 network; compared with onnxruntime (or numpy where onnxruntime has no kernel for the case)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import tensorflow as tf
from onnx import helper, numpy_helper

from torchtfx.components.converter.translator import OnnxGraphModule


def _model(node: onnx.NodeProto, feeds: dict[str, np.ndarray], outputs: int = 1, opset: int = 18):
    """A one-node model; its outputs ``y0``, ``y1``... have the first input's type (int64 for Shape)."""
    types = {n: helper.np_dtype_to_tensor_dtype(a.dtype) for n, a in feeds.items()}
    inputs = [helper.make_tensor_value_info(n, types[n], a.shape) for n, a in feeds.items()]
    out_type = onnx.TensorProto.INT64 if node.op_type == "Shape" else types[node.input[0]]
    outs = [helper.make_tensor_value_info(f"y{i}", out_type, None) for i in range(outputs)]
    graph = helper.make_graph([node], "g", inputs, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _translated(model, feeds: dict[str, np.ndarray], unknown: dict[str, list], dtype=tf.float32):
    """The model traced over unknown input values, with the dimensions ``unknown`` gives (``None``: unknown) for
    the inputs it names and the exact shape for the others; returns the outputs and their traced shapes."""
    network = OnnxGraphModule(model, compute_dtype=dtype, fuse=False)
    specs = [tf.TensorSpec(unknown.get(n, a.shape), tf.as_dtype(a.dtype)) for n, a in feeds.items()]
    traced = tf.function(lambda *xs: network(*xs), autograph=False).get_concrete_function(*specs)
    return [np.asarray(t) for t in traced(*feeds.values())], [o.shape for o in traced.structured_outputs]


def _onnxruntime(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _assert_like_onnxruntime(node, feeds: dict[str, np.ndarray], unknown: dict[str, list], outputs=1, opset=18):
    model = _model(node, feeds, outputs, opset)
    got, traced = _translated(model, feeds, unknown)
    for value, shape, want in zip(got, traced, _onnxruntime(model, feeds), strict=True):
        assert shape.rank == want.ndim
        assert value.dtype == want.dtype and value.shape == want.shape
        np.testing.assert_allclose(value, want, rtol=1e-5)


X = np.random.default_rng(0).normal(size=(3, 4, 5)).astype(np.float32)


@pytest.mark.parametrize("name", ["ReduceSum", "ReduceLogSumExp", "ReduceL2", "ReduceMax"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_over_axes_known_at_run_time(name, keepdims):
    node = helper.make_node(name, ["x", "axes"], ["y0"], keepdims=keepdims)
    feeds = {"x": np.abs(X), "axes": np.array([-1, 0], np.int64)}
    _assert_like_onnxruntime(node, feeds, {"x": [None, 4, 5]})


def test_reduce_with_axes_of_unknown_length_keeping_dims():
    node = helper.make_node("ReduceMean", ["x", "axes"], ["y0"], keepdims=1)
    for axes in (np.array([2], np.int64), np.zeros([0], np.int64)):
        _assert_like_onnxruntime(node, {"x": X, "axes": axes}, {"x": [None, 4, 5], "axes": [None]})


def test_reduce_with_empty_axes_and_noop_returns_the_input():
    node = helper.make_node("ReduceSumSquare", ["x", "axes"], ["y0"], noop_with_empty_axes=1)
    feeds = {"x": X, "axes": np.zeros([0], np.int64)}
    _assert_like_onnxruntime(node, feeds, {"x": [None, 4, 5]})
    _assert_like_onnxruntime(node, feeds, {"x": [None, 4, 5], "axes": [None]})


@pytest.mark.parametrize(
    ("name", "dtype", "want"),
    [
        ("ReduceMax", np.float32, -np.inf),
        ("ReduceMin", np.float32, np.inf),
        ("ReduceProd", np.float32, 1),
        ("ReduceLogSum", np.float32, -np.inf),
        ("ReduceLogSumExp", np.float32, -np.inf),
        ("ReduceL2", np.float32, 0),
        ("ReduceMax", np.int32, np.iinfo(np.int32).min),
        ("ReduceSum", np.int64, 0),
    ],
)
def test_reductions_of_an_empty_set(name, dtype, want):
    node = helper.make_node(name, ["x", "axes"], ["y0"], keepdims=0)
    feeds = {"x": np.zeros([2, 0, 3], dtype), "axes": np.array([1], np.int64)}
    (got,), _ = _translated(_model(node, feeds), feeds, {"x": [None, 0, 3]})
    np.testing.assert_array_equal(got, np.full([2, 3], want, dtype))


def test_integer_mean_does_not_overflow_its_type():
    node = helper.make_node("ReduceMean", ["x"], ["y0"], axes=[1], keepdims=0)
    feeds = {"x": np.full([2, 4], 200, np.uint8)}
    (got,), _ = _translated(_model(node, feeds, opset=13), feeds, {"x": [None, 4]})
    np.testing.assert_array_equal(got, np.full([2], 200, np.uint8))


def test_float16_network_sums_squares_beyond_float16_range():
    # 300**2 overflows float16 (max 65504), the L2 norm itself (~600) does not.
    node = helper.make_node("ReduceL2", ["x", "axes"], ["y0"], keepdims=0)
    feeds = {"x": np.full([2, 4], 300, np.float32), "axes": np.array([1], np.int64)}
    (got,), _ = _translated(_model(node, feeds), feeds, {"x": [None, 4]}, dtype=tf.float16)
    np.testing.assert_allclose(got, np.full([2], 600, np.float32), rtol=1e-3)


def test_unsqueeze_and_squeeze_with_axes_known_at_run_time():
    unsqueeze = helper.make_node("Unsqueeze", ["x", "axes"], ["y0"])
    _assert_like_onnxruntime(unsqueeze, {"x": X, "axes": np.array([4, 0, -3], np.int64)}, {"x": [None, 4, None]})
    squeeze = helper.make_node("Squeeze", ["x", "axes"], ["y0"])
    feeds = {"x": X.reshape(3, 1, 4, 1, 5), "axes": np.array([-2, 1], np.int64)}
    _assert_like_onnxruntime(squeeze, feeds, {"x": [None, 1, 4, 1, None]})
    squeeze_all = helper.make_node("Squeeze", ["x"], ["y0"])
    _assert_like_onnxruntime(squeeze_all, {"x": feeds["x"]}, {"x": [None, 1, 4, 1, None]})


def test_split_with_sizes_at_run_time_and_uneven_num_outputs_over_an_unknown_dimension():
    sizes = helper.make_node("Split", ["x", "sizes"], ["y0", "y1"], axis=-1)
    _assert_like_onnxruntime(sizes, {"x": X, "sizes": np.array([1, 4], np.int64)}, {"x": [None, 4, 5]}, 2)
    uneven = helper.make_node("Split", ["x"], ["y0", "y1", "y2"], axis=2, num_outputs=3)
    _assert_like_onnxruntime(uneven, {"x": X}, {"x": [None, 4, None]}, 3)


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps"),
    [([-1, 10], [-100, -(2**63)], [0, 2], [-1, -2]), ([1, -3], [2**62, 4], [-1, 1], [2, 1])],
)
def test_slice_with_everything_at_run_time_clamps_like_onnx(starts, ends, axes, steps):
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y0"])
    values = {"starts": starts, "ends": ends, "axes": axes, "steps": steps}
    feeds = {"x": X, **{k: np.array(v, np.int64) for k, v in values.items()}}
    _assert_like_onnxruntime(node, feeds, {"x": [None, 4, 5]})


def test_reshape_with_zero_and_minus_one_at_run_time():
    node = helper.make_node("Reshape", ["x", "shape"], ["y0"])
    _assert_like_onnxruntime(node, {"x": X, "shape": np.array([0, -1, 2, 2], np.int64)}, {"x": [None, 4, 5]})


@pytest.mark.parametrize("axis", [0, -1, -3, 3])
def test_flatten_over_an_unknown_batch(axis):
    _assert_like_onnxruntime(helper.make_node("Flatten", ["x"], ["y0"], axis=axis), {"x": X}, {"x": [None, 4, 5]})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back_over_an_unknown_batch(mode):
    x = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)
    node = helper.make_node("DepthToSpace", ["x"], ["y0"], blocksize=2, mode=mode)
    _assert_like_onnxruntime(node, {"x": x}, {"x": [None, 8, None, 3]})
    node = helper.make_node("SpaceToDepth", ["x"], ["y0"], blocksize=2)
    _assert_like_onnxruntime(node, {"x": x.reshape(2, 2, 4, 6)}, {"x": [None, 2, 4, None]})


def test_center_crop_pad_with_the_shape_at_run_time():
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y0"], axes=[-2, -1])
    _assert_like_onnxruntime(node, {"x": X, "shape": np.array([7, 2], np.int64)}, {"x": [None, 4, 5]})


def test_tile_expand_shape_and_range_with_values_at_run_time():
    tile = helper.make_node("Tile", ["x", "repeats"], ["y0"])
    _assert_like_onnxruntime(tile, {"x": X, "repeats": np.array([2, 1, 3], np.int64)}, {"x": [None, 4, 5]})
    expand = helper.make_node("Expand", ["x", "shape"], ["y0"])
    _assert_like_onnxruntime(expand, {"x": X[:, :1], "shape": np.array([2, 1, 1, 5], np.int64)}, {"x": [None, 1, 5]})
    shape = helper.make_node("Shape", ["x"], ["y0"], start=-2, end=100)
    _assert_like_onnxruntime(shape, {"x": X}, {"x": [None, None, 5]})
    for dtype in (np.int16, np.int32, np.float64):
        limits = {"s": np.array(5, dtype), "e": np.array(-4, dtype), "d": np.array(-2, dtype)}
        _assert_like_onnxruntime(helper.make_node("Range", ["s", "e", "d"], ["y0"]), limits, {})


@pytest.mark.parametrize(
    ("starts", "ends", "step"),
    [(2**63 - 1, 4, 1), (1, -(2**63), 1), (2**63 - 1, -(2**63), -1), (2**31 - 1, 2**31, 1), (-100, 100, 3)],
)
def test_constant_slice_bounds_beyond_int32_clamp_like_onnx(starts, ends, step):
    values = {"starts": [starts], "ends": [ends], "axes": [1], "steps": [step]}
    node = helper.make_node("Slice", ["x", *values], ["y0"])
    model = _model(node, {"x": X})
    model.graph.initializer.extend(numpy_helper.from_array(np.array(v, np.int64), k) for k, v in values.items())
    got, _ = _translated(model, {"x": X}, {"x": [None, 4, 5]})
    np.testing.assert_array_equal(got[0], _onnxruntime(model, {"x": X})[0])
