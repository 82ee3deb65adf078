"""Elementwise handlers on cases ONNX's backend suite leaves out: unknown batch dimensions, dtypes TF has no
kernel for (computed wider and cast back), opset 6's broadcasting, a float16 network; compared with
onnxruntime, or numpy or ONNX's reference implementation where onnxruntime has no kernel."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import tensorflow as tf
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from torchtfx.components.converter.translator import OnnxGraphModule

_F, _I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(node: onnx.NodeProto, inputs: list[tuple[str, int, list]], out_type: int, opset: int = 18):
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(node.output[0], out_type, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _translated(model, feeds: list[np.ndarray], dtype=tf.float32) -> np.ndarray:
    """The model traced with every input's first dimension unknown (its values unknown too), then run."""
    network = OnnxGraphModule(model, compute_dtype=dtype, fuse=False)
    specs = [tf.TensorSpec([None, *a.shape[1:]] if a.ndim else [], tf.as_dtype(a.dtype)) for a in feeds]
    traced = tf.function(lambda *xs: network(*xs), input_signature=specs, autograph=False)
    return np.asarray(traced(*feeds)[0])


def _onnxruntime(model, feeds: list[np.ndarray]) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: a for i, a in zip(model.graph.input, feeds, strict=True)})[0]


def _binary_case(op_type: str, a: np.ndarray, b: np.ndarray, **attrs):
    elem = helper.np_dtype_to_tensor_dtype
    node = helper.make_node(op_type, ["a", "b"], ["y"], **attrs)
    inputs = [("a", elem(a.dtype), [None, *a.shape[1:]]), ("b", elem(b.dtype), list(b.shape))]
    return _model(node, inputs, elem(a.dtype)), [a, b]


def _assert_like_onnxruntime(model, feeds: list[np.ndarray], rtol: float = 1e-6) -> None:
    got, want = _translated(model, feeds), _onnxruntime(model, feeds)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_of_mixed_signs_in_every_signed_int_type(dtype, fmod):
    a = np.array([[-7, 7, -7, 7, 0], [5, -5, 6, -6, 9]], dtype)
    b = np.array([3, 3, -3, -3, 4], dtype)
    _assert_like_onnxruntime(*_binary_case("Mod", a, b, fmod=fmod))


@pytest.mark.parametrize("base_dtype", [np.int32, np.int64])
def test_pow_of_an_integer_base_with_a_float_exponent_truncates(base_dtype):
    base = np.array([[2, 3, 4], [5, 9, 10]], base_dtype)
    _assert_like_onnxruntime(*_binary_case("Pow", base, np.array([0.5, 1.5, -1.0], np.float32)))


def test_pow_of_unsigned_ints_and_float_base_with_int_exponent():
    base = np.array([[2, 3, 4], [5, 6, 7]], np.uint8)
    assert _translated(*_binary_case("Pow", base, np.array([2, 2, 1], np.uint8))).tolist() == [[4, 9, 4], [25, 36, 7]]
    _assert_like_onnxruntime(*_binary_case("Pow", np.array([[1.5, -2.0]], np.float32), np.array([3, 2], np.int64)))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_arithmetic_on_unsigned_ints(dtype):
    a, b = np.array([[200, 3, 9]], dtype), np.array([7, 5, 9], dtype)  # 200 * 7 and 3 - 5 wrap around
    for op_type in ("Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "BitShift"):
        case = _binary_case(op_type, a, b, **({"direction": "LEFT"} if op_type == "BitShift" else {}))
        # onnxruntime has no Max/Min kernel for uint8 and uint16: ONNX's reference implementation instead.
        expected = ReferenceEvaluator(case[0]).run(None, dict(zip("ab", case[1], strict=True)))[0]
        np.testing.assert_array_equal(_translated(*case), expected, err_msg=op_type)


def test_prelu_with_a_per_channel_slope_and_unknown_batch():
    node = helper.make_node("PRelu", ["x", "slope"], ["y"])
    model = _model(node, [("x", _F, [None, 3, 4]), ("slope", _F, [3, 1])], _F)
    x = np.random.default_rng(0).normal(size=(5, 3, 4)).astype(np.float32)
    _assert_like_onnxruntime(model, [x, np.array([[0.1], [0.2], [-0.3]], np.float32)])


def test_opset_6_prelu_and_add_broadcast_along_a_middle_axis():
    x = np.random.default_rng(1).normal(size=(2, 3, 4)).astype(np.float32)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    prelu = _model(helper.make_node("PRelu", ["x", "s"], ["y"]), [("x", _F, [None, 3, 4]), ("s", _F, [3])], _F, 6)
    np.testing.assert_allclose(_translated(prelu, [x, slope]), np.where(x > 0, x, x * slope[:, None]), rtol=1e-6)
    add = helper.make_node("Add", ["x", "s"], ["y"], broadcast=1, axis=1)
    model = _model(add, [("x", _F, [None, 3, 4]), ("s", _F, [3])], _F, 6)
    np.testing.assert_allclose(_translated(model, [x, slope]), x + slope[:, None], rtol=1e-6)


@pytest.mark.parametrize("to", [TensorProto.BOOL, TensorProto.INT32, TensorProto.UINT8, TensorProto.FLOAT16])
def test_cast_from_float(to):
    node = helper.make_node("Cast", ["x"], ["y"], to=to)
    x = np.array([[0.0, -0.0, 2.7, -2.7], [0.5, 1e-30, 250.9, 3.0]], np.float32)
    _assert_like_onnxruntime(_model(node, [("x", _F, [None, 4])], to), [x])


def test_clip_of_int8_with_bounds_at_run_time_and_min_omitted():
    x = np.array([[-128, -3, 0, 5, 127]], np.int8)
    for names in (["x", "lo", "hi"], ["x", "", "hi"]):
        node = helper.make_node("Clip", names, ["y"])
        inputs = [("x", TensorProto.INT8, [None, 5])] + [(n, TensorProto.INT8, []) for n in names[1:] if n]
        feeds = [x] + [np.array(v, np.int8) for n, v in zip(names[1:], (-4, 4), strict=True) if n]
        _assert_like_onnxruntime(_model(node, inputs, TensorProto.INT8), feeds)


def test_is_inf_one_sign_and_shrink_of_ints():
    x = np.array([[np.inf, -np.inf, np.nan, 1.0]], np.float32)
    model = _model(helper.make_node("IsInf", ["x"], ["y"], detect_positive=0), [("x", _F, [None, 4])], TensorProto.BOOL)
    assert _translated(model, [x]).tolist() == [[False, True, False, False]]
    shrink = helper.make_node("Shrink", ["x"], ["y"], bias=1.5, lambd=1.0)
    model = _model(shrink, [("x", TensorProto.INT32, [None, 5])], TensorProto.INT32)
    _assert_like_onnxruntime(model, [np.array([[-3, -1, 0, 1, 4]], np.int32)])


def test_det_of_a_batch_of_unknown_size():
    model = _model(helper.make_node("Det", ["x"], ["y"]), [("x", _F, [None, 3, 3])], _F)
    x = np.random.default_rng(2).normal(size=(4, 3, 3)).astype(np.float32)
    _assert_like_onnxruntime(model, [x], rtol=1e-4)


@pytest.mark.parametrize("op_type", ["Selu", "Celu", "HardSwish", "Mish", "Softsign", "Elu", "ThresholdedRelu"])
def test_activations_in_a_float16_network(op_type):
    model = _model(helper.make_node(op_type, ["x"], ["y"]), [("x", _F, [None, 6])], _F)
    x = np.array([[-4.0, -1.0, -0.25, 0.0, 0.75, 3.5]], np.float32)
    got = _translated(model, [x], dtype=tf.float16)
    assert got.dtype == np.float32  # cast back on exit
    np.testing.assert_allclose(got, _onnxruntime(model, [x]), rtol=2e-3, atol=2e-3)
