"""Quantization operators: (De)QuantizeLinear, DynamicQuantizeLinear and the integer MatMul/Conv forms."""

from __future__ import annotations

import tensorflow as tf

from torchtfx.components.converter.ops.registry import DTYPES, op

# Float32 sums integers exactly up to 2**24; past that the integer products go through float64.
_EXACT_F32 = 2**24


def _compute_dtype(*dtypes: tf.DType) -> tf.DType:
    return tf.float64 if tf.float64 in dtypes else tf.float32


def _broadcastable(p: tf.Tensor, x: tf.Tensor, axis: int, block_size: int = 0) -> tf.Tensor:
    """A scale or zero point ``p`` (scalar, 1-D along ``axis``, or blocked along it) shaped to broadcast with ``x``."""
    if p.shape.rank == 0:
        return p
    if p.shape.rank == 1 and p.shape[0] == 1:
        return tf.reshape(p, [])
    rank = x.shape.rank
    axis %= rank
    if block_size <= 0:
        shape = [1] * rank
        shape[axis] = -1
        return tf.reshape(p, shape)
    p = tf.repeat(p, block_size, axis=axis)
    # the last block may be partial: trim the repeated values to x's extent along axis
    index = [slice(None)] * axis + [slice(0, tf.shape(x)[axis])]
    return p[tuple(index)]


def _saturate(y: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """``y`` (float, already rounded) clipped to ``dtype``'s range and cast to it."""
    return tf.cast(tf.clip_by_value(y, float(dtype.min), float(dtype.max)), dtype)


@op("QuantizeLinear")
def _quantize_linear(node, x):
    data, scale, zero_point = ([*x, None, None])[:3]
    axis, block = node.attr("axis", 1), node.attr("block_size", 0)
    if zero_point is not None:
        dtype = zero_point.dtype
    else:
        dtype = DTYPES.get(node.attr("output_dtype", 0) or 2)
    if dtype not in (tf.uint8, tf.int8, tf.uint16, tf.int16):
        raise ValueError(f"QuantizeLinear to {dtype or node.attr('output_dtype')} is not supported")
    c = _compute_dtype(data.dtype, scale.dtype)
    # tf.round rounds half to even, as ONNX requires
    y = tf.round(tf.cast(data, c) / tf.cast(_broadcastable(scale, data, axis, block), c))
    if zero_point is not None:
        y += tf.cast(_broadcastable(zero_point, data, axis, block), c)
    return [_saturate(y, dtype)]


@op("DequantizeLinear")
def _dequantize_linear(node, x):
    data, scale, zero_point = ([*x, None, None])[:3]
    axis, block = node.attr("axis", 1), node.attr("block_size", 0)
    c = _compute_dtype(scale.dtype)
    y = tf.cast(data, c)
    if zero_point is not None:
        y -= tf.cast(_broadcastable(zero_point, data, axis, block), c)
    y *= tf.cast(_broadcastable(scale, data, axis, block), c)
    return [tf.cast(y, scale.dtype)]


@op("DynamicQuantizeLinear")
def _dynamic_quantize_linear(node, x):
    data = x[0]
    c = _compute_dtype(data.dtype)
    v = tf.cast(data, c)
    high = tf.maximum(tf.reduce_max(v), 0.0)
    low = tf.minimum(tf.reduce_min(v), 0.0)
    scale = tf.where(tf.equal(high, low), tf.ones([], c), high - low) / 255.0
    zero_point = tf.round(tf.clip_by_value(-low / scale, 0.0, 255.0))
    y = tf.clip_by_value(tf.round(v / scale) + zero_point, 0.0, 255.0)
    return [tf.cast(y, tf.uint8), tf.cast(scale, data.dtype), tf.cast(zero_point, tf.uint8)]


def _centered(q: tf.Tensor, zero_point: tf.Tensor | None, per_row: bool = False) -> tf.Tensor:
    """``q - zero_point`` in int32; a 1-D per-row zero point of a matrix operand applies along its rows."""
    q = tf.cast(q, tf.int32)
    if zero_point is None:
        return q
    zero_point = tf.cast(zero_point, tf.int32)
    if per_row and zero_point.shape.rank == 1 and zero_point.shape[0] != 1:
        zero_point = tf.reshape(zero_point, [-1, 1])
    elif zero_point.shape.rank == 1 and zero_point.shape[0] == 1:
        zero_point = tf.reshape(zero_point, [])
    return q - zero_point


def _exact_float(reduced: int | None) -> tf.DType:
    """The float dtype that sums ``reduced`` products of two 8-bit (zero-point-centred) values exactly."""
    return tf.float32 if reduced is not None and reduced * 255 * 255 <= _EXACT_F32 else tf.float64


def _int_matmul(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """``a @ b`` of int32 tensors, exactly: through float (integer MatMul has no GPU kernel in TF)."""
    if a.shape.rank == 1 or b.shape.rank == 1:
        # numpy's matmul semantics for vectors: promote to a matrix, then drop the added dim
        out = _int_matmul(a[None] if a.shape.rank == 1 else a, b[:, None] if b.shape.rank == 1 else b)
        if b.shape.rank == 1:
            out = out[..., 0]
        if a.shape.rank == 1:
            out = out[..., 0, :] if b.shape.rank > 1 else out[0]
        return out
    c = _exact_float(a.shape[-1])
    return tf.cast(tf.linalg.matmul(tf.cast(a, c), tf.cast(b, c)), tf.int32)


@op("MatMulInteger")
def _matmul_integer(node, x):
    a, b, a_zero, b_zero = ([*x, None, None])[:4]
    return [_int_matmul(_centered(a, a_zero, per_row=True), _centered(b, b_zero))]


def _requantize(acc: tf.Tensor, multiplier: tf.Tensor, zero_point: tf.Tensor | None, dtype: tf.DType) -> tf.Tensor:
    """``saturate(round(acc * multiplier) + zero_point)`` in ``dtype``, like ONNX's float64 reference."""
    y = tf.round(tf.cast(acc, tf.float64) * tf.cast(multiplier, tf.float64))
    if zero_point is not None:
        y += tf.cast(zero_point, tf.float64)
    return _saturate(y, dtype)


def _per_row(p: tf.Tensor) -> tf.Tensor:
    return tf.reshape(p, [-1, 1]) if p.shape.rank == 1 and p.shape[0] != 1 else p


@op("QLinearMatMul")
def _qlinear_matmul(node, x):
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = x
    acc = _int_matmul(_centered(a, a_zero, per_row=True), _centered(b, b_zero))
    # the multiplier in the scales' own precision, as the reference computes it
    multiplier = _per_row(a_scale) * b_scale / y_scale
    return [_requantize(acc, multiplier, y_zero, a.dtype if y_zero is None else y_zero.dtype)]


def _conv_pads(node, x: tf.Tensor, kernel: list[int], strides: list[int], dilations: list[int]) -> list[list[int]]:
    """ONNX's explicit (begin, end) spatial pads of a channels-last ``x``."""
    auto_pad = node.attr("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    n = len(kernel)
    if auto_pad in ("NOTSET", "VALID"):
        pads = node.attr("pads", [0] * 2 * n) if auto_pad == "NOTSET" else [0] * 2 * n
        return [[pads[i], pads[i + n]] for i in range(n)]
    dims = x.shape[1:-1]
    if any(d is None for d in dims):
        raise ValueError(f"QLinearConv auto_pad={auto_pad} needs static spatial dims, got {x.shape}")
    out = []
    for d, k, s, dil in zip(dims, kernel, strides, dilations, strict=True):
        total = max(0, (-(-d // s) - 1) * s + (k - 1) * dil + 1 - d)
        small, big = total // 2, total - total // 2
        out.append([small, big] if auto_pad == "SAME_UPPER" else [big, small])
    return out


def _integer_conv(node, x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    """The exact convolution (float-valued integers) of channels-first integer ``x`` and ONNX weights ``w``."""
    n = x.shape.rank - 2
    kernel = list(node.attr("kernel_shape", w.shape[2:]))
    strides = list(node.attr("strides", [1] * n))
    dilations = list(node.attr("dilations", [1] * n))
    group = node.attr("group", 1)
    c = _exact_float(None if w.shape[1:].num_elements() is None else w.shape[1:].num_elements())
    x = tf.transpose(tf.cast(x, c), [0, *range(2, n + 2), 1])
    x = tf.pad(x, [[0, 0], *_conv_pads(node, x, kernel, strides, dilations), [0, 0]])
    w = tf.transpose(tf.cast(w, c), [*range(2, n + 2), 1, 0])
    pairs = zip(tf.split(x, group, axis=-1), tf.split(w, group, axis=-1), strict=True)
    ys = [tf.nn.convolution(xg, wg, strides=strides, padding="VALID", dilations=dilations) for xg, wg in pairs]
    y = ys[0] if group == 1 else tf.concat(ys, axis=-1)
    return tf.transpose(y, [0, n + 1, *range(1, n + 1)])


def _centered_weights(w: tf.Tensor, zero_point: tf.Tensor | None) -> tf.Tensor:
    w = tf.cast(w, tf.int32)
    if zero_point is None:
        return w
    zero_point = tf.cast(zero_point, tf.int32)
    if zero_point.shape.rank == 1:
        zero_point = tf.reshape(zero_point, [-1] + [1] * (w.shape.rank - 1))
    return w - zero_point


@op("QLinearConv")
def _qlinear_conv(node, x):
    xq, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, bias = ([*x, None])[:9]
    acc = _integer_conv(node, _centered(xq, x_zero), _centered_weights(w, w_zero))
    spatial = [1] * (xq.shape.rank - 2)
    if bias is not None:
        acc += tf.reshape(tf.cast(bias, acc.dtype), [-1, *spatial])
    multiplier = x_scale * w_scale / y_scale
    if multiplier.shape.rank == 1:  # per-output-channel weight scales run along the channel axis
        multiplier = tf.reshape(multiplier, [-1, *spatial])
    return [_requantize(acc, multiplier, y_zero, xq.dtype if y_zero is None else y_zero.dtype)]
