"""Quantization and signal handlers on cases ONNX's backend suite leaves out: unknown batch dimensions, values
known only at run time (DFT lengths, STFT steps), per-channel and grouped QLinearConv, saturation, TF-IDF
weighting, a float16 network; compared with onnxruntime, or ONNX's reference implementation."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import tensorflow as tf
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from torchtfx.components.converter.translator import OnnxGraphModule

_RNG = np.random.default_rng(0)


def _model(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int = 21, batch: tuple[str, ...] = ()):
    """A one-node model over ``feeds``; the inputs named in ``batch`` get an unknown first dimension."""
    elem = helper.np_dtype_to_tensor_dtype
    inputs = [
        helper.make_tensor_value_info(name, elem(a.dtype), [None, *a.shape[1:]] if name in batch else list(a.shape))
        for name, a in feeds.items()
    ]
    outputs = [onnx.ValueInfoProto(name=name) for name in node.output]
    graph = helper.make_graph([node], "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _translated(model, feeds: dict[str, np.ndarray], batch: tuple[str, ...] = (), dtype=tf.float32) -> list:
    """The model traced over unknown input values (and unknown first dims of ``batch``), then run."""
    network = OnnxGraphModule(model, compute_dtype=dtype, fuse=False)
    specs = [
        tf.TensorSpec([None, *a.shape[1:]] if name in batch else a.shape, tf.as_dtype(a.dtype))
        for name, a in feeds.items()
    ]
    traced = tf.function(lambda *xs: network(*xs), input_signature=specs, autograph=False)
    return [np.asarray(t) for t in traced(*feeds.values())]


def _onnxruntime(model, feeds: dict[str, np.ndarray]) -> list:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _check(node, feeds, batch=(), opset=21, reference=_onnxruntime, rtol=1e-6, atol=0.0) -> list:
    model = _model(node, feeds, opset, batch)
    got, want = _translated(model, feeds, batch), reference(model, feeds)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got


def _reference(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


def test_quantize_per_axis_rounds_half_to_even_and_saturates():
    x = np.array([[0.5, 1.5, 2.5, -0.5, -1.5], [300.0, -300.0, 7.25, 0.0, 1e6]], np.float32)[:, :, None]
    x = np.concatenate([x, 2 * x], axis=2)  # [2, 5, 2]: channel 1, doubled, has scale 2
    feeds = {"x": x, "s": np.array([1.0, 2.0], np.float32), "z": np.array([3, -4], np.int8)}
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=-1)
    y = _check(node, feeds, batch=("x",))[0]
    assert y[0, :, 0].tolist() == [3, 5, 5, 3, 1] and y[1, :2, 0].tolist() == [127, -128]


@pytest.mark.parametrize("dtype", [np.uint16, np.int16])
def test_quantize_to_16_bits_with_an_unknown_batch(dtype):
    feeds = {
        "x": _RNG.normal(0, 3000, (4, 6)).astype(np.float32),
        "s": np.array(0.125, np.float32),
        "z": np.array(7, dtype),
    }
    _check(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"]), feeds, batch=("x",))


def test_blocked_quantize_and_dequantize_with_a_partial_last_block():
    x = _RNG.normal(size=(3, 5)).astype(np.float32)
    scale = np.abs(_RNG.normal(size=(3, 3))).astype(np.float32) / 50
    zero = _RNG.integers(-5, 5, (3, 3)).astype(np.int8)
    attrs = {"axis": 1, "block_size": 2}
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], **attrs)
    q = _check(node, {"x": x, "s": scale, "z": zero}, reference=_reference)[0]
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], **attrs)
    _check(node, {"q": q, "s": scale, "z": zero}, reference=_reference)


def test_dequantize_per_channel_and_int32():
    feeds = {
        "q": _RNG.integers(0, 255, (3, 4, 2)).astype(np.uint8),
        "s": np.float32([0.5, 0.1, 2, 3]),
        "z": np.uint8([0, 128, 3, 255]),
    }
    _check(helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]), feeds, batch=("q",))
    feeds = {"q": np.int32([[-(2**20), 7, 123456]]), "s": np.array(0.001, np.float32)}
    _check(helper.make_node("DequantizeLinear", ["q", "s"], ["y"]), feeds, batch=("q",))


def test_dynamic_quantize_with_an_unknown_batch():
    feeds = {"x": _RNG.normal(2, 3, (5, 7)).astype(np.float32)}
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zero"])
    _check(node, feeds, batch=("x",), opset=11)


def test_qlinear_matmul_saturates_like_onnxruntime():
    a, b = _RNG.integers(-128, 127, (2, 3, 40)).astype(np.int8), _RNG.integers(-128, 127, (40, 5)).astype(np.int8)
    feeds = {
        "a": a,
        "sa": np.array(0.02, np.float32),
        "za": np.array(3, np.int8),
        "b": b,
        "sb": np.array(0.03, np.float32),
        "zb": np.array(-2, np.int8),
        "sy": np.array(0.05, np.float32),
        "zy": np.array(1, np.int8),
    }
    node = helper.make_node("QLinearMatMul", list(feeds), ["y"])
    y = _check(node, feeds, batch=("a",))[0]
    assert (y == 127).any() and (y == -128).any()


def test_matmul_integer_with_per_column_zero_points_past_float32_exactness():
    # K = 600: sums of up to 600 * 255 * 255 exceed float32's exact integers
    a, b = _RNG.integers(0, 255, (2, 3, 600)).astype(np.uint8), _RNG.integers(0, 255, (600, 4)).astype(np.uint8)
    feeds = {"a": a, "b": b, "za": np.array(1, np.uint8), "zb": np.uint8([0, 255, 7, 128])}
    _check(helper.make_node("MatMulInteger", list(feeds), ["y"]), feeds, batch=("a",), opset=10)


def test_qlinear_conv_grouped_per_channel_strided_with_bias():
    feeds = {
        "x": _RNG.integers(0, 255, (2, 4, 9, 8)).astype(np.uint8),
        "sx": np.array(0.02, np.float32),
        "zx": np.array(120, np.uint8),
        "w": _RNG.integers(-128, 127, (6, 2, 3, 3)).astype(np.int8),
        "sw": np.float32([0.01, 0.02, 0.03, 0.01, 0.02, 0.03]),
        "zw": np.zeros(6, np.int8),
        "sy": np.array(0.3, np.float32),
        "zy": np.array(100, np.uint8),
        "bias": _RNG.integers(-500, 500, 6).astype(np.int32),
    }
    node = helper.make_node("QLinearConv", list(feeds), ["y"], group=2, strides=[2, 1], pads=[1, 0, 2, 1])
    _check(node, feeds, batch=("x",), opset=10)
    node = helper.make_node("QLinearConv", list(feeds), ["y"], group=2, auto_pad="SAME_LOWER", strides=[2, 3])
    _check(node, feeds, opset=10)


@pytest.mark.parametrize(("inverse", "onesided", "axis", "length"), [(0, 1, 1, 8), (0, 0, -2, 3), (1, 0, 1, None)])
def test_dft_with_length_and_axis_known_at_run_time(inverse, onesided, axis, length):
    feeds = {"x": _RNG.normal(size=(2, 6, 5, 1 if onesided else 2)).astype(np.float32)}
    if length is not None:
        feeds["n"] = np.array(length, np.int64)
    feeds["axis"] = np.array(axis, np.int64)
    inputs = ["x", "n" if length is not None else "", "axis"]
    node = helper.make_node("DFT", inputs, ["y"], inverse=inverse, onesided=onesided)
    _check(node, feeds, batch=("x",), opset=20, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("complex_input", [False, True])
def test_stft_with_step_known_at_run_time(complex_input):
    feeds = {
        "x": _RNG.normal(size=(3, 50, 2 if complex_input else 1)).astype(np.float32),
        "step": np.array(7, np.int64),
        "window": np.hanning(12).astype(np.float32),
    }
    node = helper.make_node("STFT", list(feeds), ["y"], onesided=0 if complex_input else 1)
    # onnxruntime's STFT misreads a complex signal
    reference = _reference if complex_input else _onnxruntime
    _check(node, feeds, batch=("x",), opset=17, reference=reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op_type", ["HannWindow", "HammingWindow", "BlackmanWindow"])
def test_windows_in_double(op_type):
    node = helper.make_node(op_type, ["n"], ["y"], output_datatype=TensorProto.DOUBLE, periodic=0)
    _check(node, {"n": np.array(9, np.int64)}, opset=17, atol=1e-7)  # onnxruntime computes in float32


def test_mel_weight_matrix_from_run_time_values():
    feeds = {
        "bins": np.array(10, np.int64),
        "n": np.array(64, np.int64),
        "rate": np.array(16000, np.int64),
        "low": np.array(20, np.float32),
        "high": np.array(7000, np.float32),
    }
    _check(helper.make_node("MelWeightMatrix", list(feeds), ["y"]), feeds, opset=17, reference=_reference)


@pytest.mark.parametrize("mode", ["IDF", "TFIDF"])
def test_tfidf_weighting_with_unigrams_and_skipped_bigrams(mode):
    node = helper.make_node(
        "TfIdfVectorizer",
        ["x"],
        ["y"],
        mode=mode,
        min_gram_length=1,
        max_gram_length=2,
        max_skip_count=2,
        ngram_counts=[0, 3],
        ngram_indexes=[0, 1, 2, 3, 2],
        pool_int64s=[2, 3, 5, 2, 3, 5, 4],
        weights=[0.5, 2.0, 3.0, 4.0, 9.0],
    )
    feeds = {"x": np.array([[2, 3, 5, 4, 3, 3], [5, 0, 4, 2, 1, 3]], np.int32)}
    _check(node, feeds, batch=("x",), opset=9)


def test_quantize_round_trip_in_a_float16_network():
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("s", TensorProto.FLOAT, [], [0.01]), helper.make_tensor("z", TensorProto.UINT8, [], [128])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    feeds = {"x": np.array([[0.3, -1.27, 1.1], [0.005, 0.017, 5.0]], np.float32)}
    got = _translated(model, feeds, ("x",), dtype=tf.float16)[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _onnxruntime(model, feeds)[0], rtol=1e-3)
