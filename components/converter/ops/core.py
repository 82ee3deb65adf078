"""The core of a network: matrix products, normalization, softmax, constants (opset 13-17 as torch exports them)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from onnx import numpy_helper

from torchtfx.components.converter.ops.registry import op


@op("Dropout")
def _dropout(node, x):
    return [x[0], tf.ones_like(x[0], tf.bool)]


@op("Softmax", "LogSoftmax")
def _softmax(node, x):
    fn = tf.nn.softmax if node.op_type == "Softmax" else tf.nn.log_softmax
    return [fn(x[0], axis=node.attr("axis", -1))]


@op("Gemm")
def _gemm(node, x):
    a, b, c = ([*x, None])[:3]
    y = tf.matmul(a, b, transpose_a=bool(node.attr("transA", 0)), transpose_b=bool(node.attr("transB", 0)))
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    y = y if alpha == 1.0 else alpha * y
    return [y if c is None else y + (c if beta == 1.0 else beta * c)]


@op("MatMul")
def _matmul(node, x):
    a, b = x
    if a.shape.rank == 1:
        return [tf.squeeze(tf.matmul(a[None, :], b), -2)]
    if b.shape.rank == 1:
        return [tf.squeeze(tf.matmul(a, b[:, None]), -1)]
    return [tf.matmul(a, b)]


@op("Einsum")
def _einsum(node, x):
    equation = node.attr("equation")
    return [tf.einsum((equation.decode() if isinstance(equation, bytes) else equation).replace(" ", ""), *x)]


@op("LayerNormalization")
def _layer_norm(node, x):
    data, scale, bias = ([*x, None])[:3]
    axis = node.attr("axis", -1) % data.shape.rank
    axes = list(range(axis, data.shape.rank))
    mean = tf.reduce_mean(data, axes, keepdims=True)
    centered = data - mean
    inv_std = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axes, keepdims=True) + node.attr("epsilon", 1e-5))
    y = centered * inv_std * scale
    return [y if bias is None else y + bias, mean, inv_std]


@op("BatchNormalization")
def _batch_norm(node, x):
    data, scale, bias, mean, var = x[:5]
    shape = [-1] + [1] * (data.shape.rank - 2)  # parameters run along axis 1 (channels)
    factor = tf.reshape(scale * tf.math.rsqrt(var + node.attr("epsilon", 1e-5)), shape)
    return [(data - tf.reshape(mean, shape)) * factor + tf.reshape(bias, shape)]


@op("ConstantOfShape")
def _constant_of_shape(node, x):
    value = node.attr("value")
    fill = numpy_helper.to_array(value).reshape(-1)[0] if value is not None else np.float32(0)
    return [tf.fill(tf.cast(x[0], tf.int64), node.constant(np.asarray(fill)))]


@op("Constant")
def _constant(node, x):
    if "value" in node.attrs:
        return [node.constant(numpy_helper.to_array(node.proto.attribute[0].t))]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):  # fmt: skip
        if key in node.attrs:
            return [node.constant(np.array(node.attrs[key], dtype))]
    raise ValueError(f"Constant without a supported value attribute: {sorted(node.attrs)}")
