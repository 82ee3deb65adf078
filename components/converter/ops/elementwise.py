"""Elementwise operators: arithmetic, comparisons, logic, bitwise, casts, activations.

TF lacks some kernels ONNX types need (``Pow`` on unsigned ints, ``TruncateMod`` below int32, ``MatrixDeterminant``
on float16): those compute in a wider dtype and cast back, exact for them; ``Abs``/``Sign`` of unsigned ints need
no kernel.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from torchtfx.components.converter.ops.registry import DTYPES, OPS, op, static, unary

_UNSIGNED = (tf.uint8, tf.uint16, tf.uint32, tf.uint64)
# Selu's defaults, float32 values as ONNX states them.
_SELU_ALPHA, _SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875


def _wide(dtype: tf.DType) -> tf.DType:
    """A dtype holding every value of ``dtype`` that TF's arithmetic kernels all accept."""
    if dtype == tf.float16:
        return tf.float32
    if dtype in (tf.int8, tf.int16, tf.uint8, tf.uint16):
        return tf.int32
    return tf.int64 if dtype == tf.uint32 else dtype


def _in_wide(fn):
    """``fn`` computed in :func:`_wide` of its first input's dtype, the result cast back."""

    def wrapped(*xs):
        dtype = xs[0].dtype
        wide = _wide(dtype)
        return tf.cast(fn(*(tf.cast(x, wide) for x in xs)), dtype)

    return wrapped


def _legacy_broadcast(node, a: tf.Tensor, b: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Opset < 7 binary ops with ``broadcast=1, axis=k``: ``b``'s dims line up with ``a``'s from axis ``k``."""
    axis = node.attr("axis")
    if node.opset >= 7 or not node.attr("broadcast", 0) or axis is None:
        return a, b
    axis = axis % a.shape.rank if a.shape.rank else 0
    trailing = a.shape.rank - axis - b.shape.rank
    return a, (tf.reshape(b, tf.concat([tf.shape(b), tf.ones([trailing], tf.int32)], 0)) if trailing > 0 else b)


def _binary(fn):
    def handler(node, x):
        return [fn(*_legacy_broadcast(node, x[0], x[1]))]

    return handler


def _abs(x: tf.Tensor) -> tf.Tensor:
    return x if x.dtype in _UNSIGNED else tf.abs(x)


def _sign(x: tf.Tensor) -> tf.Tensor:
    return tf.cast(x > 0, x.dtype) if x.dtype in _UNSIGNED else tf.sign(x)


def _det(x: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.linalg.det(tf.cast(x, tf.float32)), x.dtype) if x.dtype == tf.float16 else tf.linalg.det(x)


for _name, _fn in {
    "Identity": tf.identity,
    "Sqrt": tf.sqrt,
    "Erf": tf.math.erf,
    "Exp": tf.exp,
    "Log": tf.math.log,
    "Neg": tf.negative,
    "Abs": _abs,
    "Floor": tf.floor,
    "Ceil": tf.math.ceil,
    "Reciprocal": tf.math.reciprocal,
    "Not": tf.logical_not,
    "Sign": _sign,
    "Round": tf.round,
    "IsNaN": tf.math.is_nan,
    "Det": _det,
    "Sin": tf.sin,
    "Cos": tf.cos,
    "Tan": tf.tan,
    "Asin": tf.asin,
    "Acos": tf.acos,
    "Atan": tf.atan,
    "Sinh": tf.sinh,
    "Cosh": tf.cosh,
    "Asinh": tf.asinh,
    "Acosh": tf.acosh,
    "Atanh": tf.atanh,
    "BitwiseNot": tf.bitwise.invert,
}.items():
    OPS[_name] = unary(_fn)
for _name, _fn in {
    "Add": tf.add,
    "Sub": tf.subtract,
    "Mul": tf.multiply,
    "Equal": tf.equal,
    "Less": tf.less,
    "Greater": tf.greater,
    "LessOrEqual": tf.less_equal,
    "GreaterOrEqual": tf.greater_equal,
    "And": tf.logical_and,
    "Or": tf.logical_or,
    "Xor": tf.math.logical_xor,
    "BitwiseAnd": tf.bitwise.bitwise_and,
    "BitwiseOr": tf.bitwise.bitwise_or,
    "BitwiseXor": tf.bitwise.bitwise_xor,
}.items():
    OPS[_name] = _binary(_fn)


@op("Div")
def _div(node, x):
    a, b = _legacy_broadcast(node, *x)
    return [tf.truncatediv(a, b) if a.dtype.is_integer else a / b]


@op("Mod")
def _mod(node, x):
    a, b = x
    # The reference computes C's fmod for floats whatever fmod says (the spec requires fmod=1 there).
    if node.attr("fmod", 0) or a.dtype.is_floating:
        if a.dtype in _UNSIGNED:  # no negative operand: truncated and floored remainders agree
            return [tf.math.floormod(a, b)]
        return [_in_wide(tf.truncatemod)(a, b)]
    return [tf.math.floormod(a, b)]


@op("Pow")
def _pow(node, x):
    base, exponent = _legacy_broadcast(node, *x)
    if base.dtype.is_floating:
        wide = tf.float64 if tf.float64 in (base.dtype, exponent.dtype) else _wide(base.dtype)
        return [tf.cast(tf.pow(tf.cast(base, wide), tf.cast(exponent, wide)), base.dtype)]
    if exponent.dtype.is_floating:  # an integer base: numpy's float power, truncated back to the base's type
        return [tf.cast(tf.pow(tf.cast(base, tf.float64), tf.cast(exponent, tf.float64)), base.dtype)]
    wide = tf.int64 if base.dtype in _UNSIGNED else base.dtype
    return [tf.cast(tf.pow(tf.cast(base, wide), tf.cast(exponent, wide)), base.dtype)]


@op("BitShift")
def _bit_shift(node, x):
    data, shift = x
    left = node.attr("direction", b"") in (b"LEFT", "LEFT")
    out = (tf.bitwise.left_shift if left else tf.bitwise.right_shift)(data, shift)
    # TF clamps a shift to the type's width - 1; numpy and onnxruntime shift every bit out (0).
    bits = data.dtype.size * 8
    known = static(shift)
    if known is not None and np.all(known < bits):
        return [out]
    return [tf.where(shift < tf.cast(bits, shift.dtype), out, tf.zeros([], data.dtype))]


@op("IsInf")
def _is_inf(node, x):
    positive, negative = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    data = x[0]
    if positive and negative:
        return [tf.math.is_inf(data)]
    if positive or negative:
        return [tf.equal(data, tf.cast(np.inf if positive else -np.inf, data.dtype))]
    return [tf.zeros_like(data, tf.bool)]


@op("Where")
def _where(node, x):
    return [tf.where(*x)]


@op("Cast")
def _cast(node, x):
    dtype = DTYPES[node.attr("to")]
    return [_cast_to(x[0], node.float_dtype if dtype == tf.float32 else dtype)]


@op("CastLike")
def _cast_like(node, x):
    return [_cast_to(x[0], x[1].dtype)]


def _cast_to(x: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    if x.dtype == dtype:
        return x
    if dtype == tf.bool:
        return tf.not_equal(x, tf.zeros([], x.dtype))
    return tf.cast(x, dtype)


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


@op("Mean")
def _mean(node, x):
    total = _variadic(tf.add)(node, x)[0]
    return [total / tf.cast(len(x), total.dtype)]


for _name, _fn in {
    "Relu": tf.nn.relu,
    "Sigmoid": tf.sigmoid,
    "Tanh": tf.tanh,
    "Softplus": tf.nn.softplus,
    "Softsign": tf.nn.softsign,
    "Mish": lambda x: x * tf.tanh(tf.nn.softplus(x)),
}.items():
    OPS[_name] = unary(_fn)


@op("LeakyRelu")
def _leaky_relu(node, x):
    data = x[0]
    return [tf.where(data >= 0, data, node.attr("alpha", 0.01) * data)]


@op("Elu")
def _elu(node, x):
    alpha = node.attr("alpha", 1.0)
    return [tf.where(x[0] > 0, x[0], alpha * (tf.exp(x[0]) - 1))]


@op("Selu")
def _selu(node, x):
    alpha, gamma = node.attr("alpha", _SELU_ALPHA), node.attr("gamma", _SELU_GAMMA)
    return [tf.where(x[0] > 0, gamma * x[0], gamma * (alpha * tf.exp(x[0]) - alpha))]


@op("Celu")
def _celu(node, x):
    alpha = node.attr("alpha", 1.0)
    return [tf.nn.relu(x[0]) + tf.minimum(tf.zeros([], x[0].dtype), alpha * (tf.exp(x[0] / alpha) - 1))]


@op("ThresholdedRelu")
def _thresholded_relu(node, x):
    return [tf.where(x[0] > node.attr("alpha", 1.0), x[0], tf.zeros([], x[0].dtype))]


@op("Shrink")
def _shrink(node, x):
    data = x[0]
    bias, lambd = node.attr("bias", 0.0), node.attr("lambd", 0.5)
    # An integer input computes in float (the reference's numpy promotion), cast back at the end.
    wide = data if data.dtype.is_floating else tf.cast(data, tf.float64)
    out = tf.where(wide < -lambd, wide + bias, tf.where(wide > lambd, wide - bias, tf.zeros([], wide.dtype)))
    return [tf.cast(out, data.dtype)]


@op("HardSigmoid")
def _hard_sigmoid(node, x):
    return [tf.clip_by_value(node.attr("alpha", 0.2) * x[0] + node.attr("beta", 0.5), 0.0, 1.0)]


@op("HardSwish")
def _hard_swish(node, x):
    return [x[0] * tf.clip_by_value(x[0] / 6 + 0.5, 0.0, 1.0)]


@op("Gelu")
def _gelu(node, x):
    return [tf.nn.gelu(x[0], approximate=node.attr("approximate", b"none") in (b"tanh", "tanh"))]


@op("PRelu")
def _prelu(node, x):
    data, slope = x
    slope = _per_channel(node, data, tf.cast(slope, data.dtype))
    return [tf.where(data > 0, data, data * slope)]


def _per_channel(node, data: tf.Tensor, slope: tf.Tensor) -> tf.Tensor:
    """``slope`` shaped to broadcast against ``data``. Opset < 7 has no numpy broadcasting: a 1-D slope of more
    than one value holds one value per channel (axis 1), as torch's ``PReLU`` exports it. Later opsets
    broadcast numpy's way; where that cannot line up a 1-D slope, it goes on the one axis of its size (the
    reference implementation's fallback)."""
    rank = data.shape.rank
    if slope.shape.rank != 1 or rank < 2 or slope.shape[0] == 1:
        return slope
    if node.opset < 7:
        return tf.reshape(slope, [-1] + [1] * (rank - 2))
    size, last = slope.shape[0], data.shape[-1]
    if size is None or last is None or last == size:
        return slope
    matches = [axis for axis, dim in enumerate(data.shape) if dim == size]
    if len(matches) != 1:
        return slope  # numpy broadcasting (which then fails with a clear message where the shapes disagree)
    return tf.reshape(slope, [-1] + [1] * (rank - 1 - matches[0]))
