"""The network-core, normalization and loss handlers on small ONNX graphs that ONNX's own suite leaves out:
traced with an unknown batch dimension, compared with onnxruntime (or ONNX's reference evaluator)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import tensorflow as tf
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from torchtfx.components.converter.translator import OnnxGraphModule

_ELEM = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.bool_): TensorProto.BOOL,
}


def _model(node: onnx.NodeProto, inputs: dict[str, np.ndarray], outputs: int, opset: int, types=()) -> onnx.ModelProto:
    """One node over graph inputs (batch dimension unknown); ``outputs`` outputs of unknown shape, of ``types``
    (default: the first input's)."""
    first = _ELEM[next(iter(inputs.values())).dtype] if inputs else TensorProto.FLOAT
    types = list(types) + [first] * (outputs - len(types))
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(k, _ELEM[v.dtype], ["N", *v.shape[1:]] if v.ndim else [])
            for k, v in inputs.items()
        ],
        [helper.make_tensor_value_info(name, t, None) for name, t in zip(node.output[:outputs], types, strict=True)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _translated(model: onnx.ModelProto, inputs: dict[str, np.ndarray], dtype=tf.float32) -> list[np.ndarray]:
    module = OnnxGraphModule(model, compute_dtype=dtype, fuse=False)
    specs = [tf.TensorSpec([None, *v.shape[1:]] if v.ndim else [], tf.as_dtype(v.dtype)) for v in inputs.values()]
    traced = tf.function(lambda *xs: module(*xs), input_signature=specs, autograph=False)
    return [np.asarray(t) for t in traced(*inputs.values())]


def _check(node, inputs, outputs=1, opset=17, reference=False, rtol=1e-5, types=()):
    model = _model(node, inputs, outputs, opset, types)
    if reference:
        want = ReferenceEvaluator(model).run(None, inputs)
    else:
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = session.run(None, inputs)
    got = _translated(model, inputs)
    for w, g in zip(want, got, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6)


def _f(*shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize(("opset", "axis"), [(11, 1), (11, 0), (11, -2), (13, 1)])
def test_softmax_family_coerces_to_2d_before_opset_13_and_runs_along_one_axis_after(op, opset, axis):
    _check(helper.make_node(op, ["x"], ["y"], axis=axis), {"x": _f(3, 4, 5)}, opset=opset)


def test_hardmax_picks_the_first_of_equal_maxima():
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2]], np.float32)
    _check(helper.make_node("Hardmax", ["x"], ["y"]), {"x": x}, opset=13)


@pytest.mark.parametrize("bias_shape", [(1, 4), (3, 1), (4,), ()])
def test_gemm_broadcasts_its_bias_with_a_transposed_a(bias_shape):
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)
    # a is [K, M]: the unknown leading dim is the contracted one
    _check(node, {"a": _f(5, 3), "b": _f(5, 4, seed=1), "c": _f(*bias_shape, seed=2)}, opset=13)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((4,), (4,)),
        ((4,), (2, 4, 3)),
        ((2, 1, 3, 4), (4,)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((2, 3, 4), (4, 5)),  # a linear layer's [batch, length, k] @ [k, n]: one 2-D product over the rows
        ((2, 1, 3, 4), (4, 5)),
        ((0, 3, 4), (4, 5)),  # an empty batch keeps its shape
    ],
)
def test_matmul_promotes_vectors_and_broadcasts_batch_dims(a, b):
    _check(helper.make_node("MatMul", ["a", "b"], ["y"]), {"a": _f(*a), "b": _f(*b, seed=1)}, rtol=1e-4)


def test_a_linear_layer_over_rows_keeps_the_static_dims_it_knows():
    from torchtfx.components.converter.ops.core import rows_matmul

    traced = tf.function(lambda a: rows_matmul(a, tf.ones([4, 5])), autograph=False)
    concrete = traced.get_concrete_function(tf.TensorSpec([None, None, 4], tf.float32))
    assert concrete.structured_outputs.shape.as_list() == [None, None, 5]


@pytest.mark.parametrize("opset", [7, 9])
def test_batch_normalization_of_old_opsets_spatial_and_per_activation(opset):
    attrs = {"spatial": 0} if opset == 7 else {}
    param = (3, 2) if opset == 7 else (3,)
    var = np.abs(_f(*param, seed=4)) + 0.5
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3, **attrs)
    inputs = {"x": _f(2, 3, 2), "s": _f(*param, seed=1), "b": _f(*param, seed=2), "m": _f(*param, seed=3), "v": var}
    _check(node, inputs, opset=opset)


def test_instance_lrn_mvn_and_lp_normalization_with_an_unknown_batch():
    x = _f(2, 6, 3, 3)
    _check(
        helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3),
        {"x": x, "s": _f(6, seed=1), "b": _f(6, seed=2)},
        rtol=1e-4,
    )
    _check(helper.make_node("LRN", ["x"], ["y"], size=3, alpha=0.1, beta=0.6, bias=2.0), {"x": x}, rtol=1e-4)
    _check(helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 2]), {"x": x}, rtol=1e-4)
    x[0, :, 0, 0] = 0  # a zero norm gives zeros, as onnxruntime's
    for p in (1, 2):
        _check(helper.make_node("LpNormalization", ["x"], ["y"], axis=1, p=p), {"x": x}, rtol=1e-4)


def test_lrn_of_an_even_size_sums_one_more_channel_after_than_before():
    x = _f(2, 5, 3)
    node = helper.make_node("LRN", ["x"], ["y"], size=4, alpha=0.1, beta=0.6, bias=2.0)
    (got,) = _translated(_model(node, {"x": x}, 1, 13), {"x": x})
    padded = np.pad(x**2, [(0, 0), (1, 2), (0, 0)])  # channels c-1 .. c+2
    square_sum = sum(padded[:, k : k + 5] for k in range(4))
    np.testing.assert_allclose(got, x / (2.0 + 0.1 / 4 * square_sum) ** 0.6, rtol=1e-5)


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization_scales_per_group_in_opset_18_and_per_channel_in_21(opset):
    scale_size = 2 if opset == 18 else 6
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-3)
    inputs = {"x": _f(2, 6, 4), "s": _f(scale_size, seed=1), "b": _f(scale_size, seed=2)}
    _check(node, inputs, opset=opset, reference=True, rtol=1e-4)


def test_layer_normalization_of_float16_data_stashes_its_statistics_in_float32():
    x = _f(2, 3, 4).astype(np.float16)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv_std"], axis=1)
    inputs = {"x": x, "s": _f(3, 4, seed=1).astype(np.float16), "b": _f(3, 4, seed=2).astype(np.float16)}
    types = [TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.FLOAT]
    y, mean, inv_std = _translated(_model(node, inputs, 3, 17, types), inputs)
    assert (y.dtype, mean.dtype, inv_std.dtype) == (np.float16, np.float32, np.float32)
    assert mean.shape == inv_std.shape == (2, 1, 1)
    _check(node, inputs, outputs=3, rtol=2e-3, types=types)


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_losses_ignore_a_negative_index_over_n_d_inputs(op, reduction, weighted):
    target = np.random.default_rng(5).integers(0, 4, (3, 2, 5))
    target[0, 0, :2] = -1
    inputs = {"x": _f(3, 4, 2, 5), "t": target.astype(np.int64)}
    if weighted:
        inputs["w"] = np.abs(_f(4, seed=6))
    outputs = ["loss", "log_prob"] if op == "SoftmaxCrossEntropyLoss" else ["loss"]
    node = helper.make_node(op, list(inputs), outputs, reduction=reduction, ignore_index=-1)
    _check(node, inputs, outputs=len(outputs), rtol=1e-4)


def test_dropout_with_training_mode_false_from_the_graph_is_the_identity():
    inputs = {"x": _f(4, 3), "r": np.float32(0.3), "t": np.bool_(False)}
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"])
    y, mask = _translated(_model(node, inputs, 2, 13, [TensorProto.FLOAT, TensorProto.BOOL]), inputs)
    np.testing.assert_array_equal(y, inputs["x"])
    assert mask.dtype == np.bool_ and mask.all()


def test_dropout_in_training_mode_zeroes_and_rescales():
    inputs = {"x": np.ones((64, 64), np.float32), "r": np.float32(0.25), "t": np.bool_(True)}
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"])
    y, mask = _translated(_model(node, inputs, 2, 13, [TensorProto.FLOAT, TensorProto.BOOL]), inputs)
    np.testing.assert_allclose(y[mask], 1 / 0.75)
    assert (y[~mask] == 0).all() and 0.15 < 1 - mask.mean() < 0.35


def test_a_sparse_constant_is_densified():
    values = helper.make_tensor("v", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    want = np.array([[0, 1, 0], [0, 2, 3]], np.float32)
    for indices in (
        helper.make_tensor("i", TensorProto.INT64, [3], [1, 4, 5]),
        helper.make_tensor("i", TensorProto.INT64, [3, 2], [0, 1, 1, 1, 1, 2]),
    ):
        sparse = helper.make_sparse_tensor(values, indices, [2, 3])
        model = _model(helper.make_node("Constant", [], ["y"], sparse_value=sparse), {}, 1, 13)
        np.testing.assert_array_equal(_translated(model, {})[0], want)


def test_a_float16_network_translates_a_gemm_row_bias():
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1)
    inputs = {"a": _f(5, 3), "b": _f(5, 4, seed=1), "c": _f(1, 4, seed=2)}
    model = _model(node, inputs, 1, 13)
    (half,) = _translated(model, inputs, tf.float16)
    (full,) = _translated(model, inputs)
    assert half.dtype == np.float32  # float32 outputs are cast back on exit
    np.testing.assert_allclose(half, full, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    ("equation", "shapes", "reference"),
    [
        ("...a,ac->...c", [(2, 3, 4, 8), (8, 5)], False),  # tf.einsum with oneDNN was off by ~13 on this one
        ("...a,bac->b...c", [(3, 13, 1, 4, 8), (1, 8, 5)], False),  # tab-transformer-pytorch's residual streams
        # Ellipses of different ranks and a size-1 dimension, broadcast (onnxruntime's shape inference refuses
        # them with the batch dimension symbolic: ONNX's reference evaluator, numpy's einsum, decides).
        ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 6)], True),
        ("...ij,...jk", [(2, 1, 4, 5), (3, 5, 6)], True),  # implicit output
    ],
)
def test_einsum_spells_out_ellipses_that_tf_einsum_gets_wrong(equation, shapes, reference):
    inputs = {f"x{i}": _f(*shape, seed=i) for i, shape in enumerate(shapes)}
    _check(helper.make_node("Einsum", list(inputs), ["y"], equation=equation), inputs, opset=17, reference=reference)
