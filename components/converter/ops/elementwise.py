"""Elementwise operators: arithmetic, comparisons, logic, activations, casts."""

from __future__ import annotations

import tensorflow as tf

from torchtfx.components.converter.ops.registry import DTYPES, OPS, op, unary

for _name, _fn in {
    "Identity": tf.identity, "Sqrt": tf.sqrt, "Erf": tf.math.erf, "Relu": tf.nn.relu, "Sigmoid": tf.sigmoid,
    "Tanh": tf.tanh, "Exp": tf.exp, "Log": tf.math.log, "Neg": tf.negative, "Abs": tf.abs, "Floor": tf.floor,
    "Ceil": tf.math.ceil, "Reciprocal": tf.math.reciprocal, "Not": tf.logical_not, "Softplus": tf.nn.softplus,
    "Sign": tf.sign,
}.items():  # fmt: skip
    OPS[_name] = unary(_fn)
for _name, _fn in {
    "Add": tf.add, "Sub": tf.subtract, "Mul": tf.multiply, "Equal": tf.equal, "Less": tf.less,
    "Greater": tf.greater, "LessOrEqual": tf.less_equal, "GreaterOrEqual": tf.greater_equal,
    "And": tf.logical_and, "Or": tf.logical_or,
}.items():  # fmt: skip
    OPS[_name] = lambda node, x, fn=_fn: [fn(x[0], x[1])]


@op("Div")
def _div(node, x):
    a, b = x
    return [tf.truncatediv(a, b) if a.dtype.is_integer else a / b]


@op("Pow")
def _pow(node, x):
    return [tf.pow(x[0], tf.cast(x[1], x[0].dtype))]


@op("LeakyRelu")
def _leaky_relu(node, x):
    return [tf.nn.leaky_relu(x[0], node.attr("alpha", 0.01))]


@op("Elu")
def _elu(node, x):
    alpha = node.attr("alpha", 1.0)
    return [tf.where(x[0] > 0, x[0], alpha * (tf.exp(x[0]) - 1))]


@op("Gelu")
def _gelu(node, x):
    return [tf.nn.gelu(x[0], approximate=node.attr("approximate", b"none") in (b"tanh", "tanh"))]


@op("HardSigmoid")
def _hard_sigmoid(node, x):
    return [tf.clip_by_value(node.attr("alpha", 0.2) * x[0] + node.attr("beta", 0.5), 0.0, 1.0)]


@op("Where")
def _where(node, x):
    return [tf.where(*x)]


@op("Cast")
def _cast(node, x):
    dtype = DTYPES[node.attr("to")]
    return [tf.cast(x[0], node.float_dtype if dtype == tf.float32 else dtype)]


@op("Clip")
def _clip(node, x):
    data, low, high = ([*x, None, None])[:3]
    low, high = node.attr("min", low), node.attr("max", high)
    data = data if low is None else tf.maximum(data, tf.cast(low, data.dtype))
    return [data if high is None else tf.minimum(data, tf.cast(high, data.dtype))]


def _variadic(fn):
    def handler(node, x):
        out = x[0]
        for t in x[1:]:
            out = fn(out, t)
        return [out]

    return handler


OPS.update(Min=_variadic(tf.minimum), Max=_variadic(tf.maximum), Sum=_variadic(tf.add))
