"""Pooling: MaxPool (with its Indices), AveragePool, LpPool, their Global forms, MaxUnpool, Col2Im, MaxRoiPool.

Windows run channels last (see :mod:`.conv`) on an input padded by hand: TF's own ``SAME`` pads only the way
ONNX's ``SAME_UPPER`` does, and ``ceil_mode`` needs pads TF has no name for. TF's pooling kernels have no
dilations and, for 3-D, only float32: other cases slide the window as strided slices, axis by axis.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import tensorflow as tf

from torchtfx.components.converter.ops.conv import (
    Dim,
    auto_pad,
    dims,
    geometry,
    maximum,
    pad_spatial,
    same_pads,
    to_first,
    to_last,
)
from torchtfx.components.converter.ops.registry import op


def _ge(a: Dim, b: Dim) -> Dim:
    return int(a >= b) if isinstance(a, int) and isinstance(b, int) else tf.cast(a >= b, tf.int32)


def pool_pads(node, sizes: list[Dim], kernel, strides, dilations, pads) -> tuple[list, list]:
    """``(pads, extra)``: the begin and end pad per spatial axis, and what ``ceil_mode`` adds at the end so
    that the last window fits (torch's rule: a window that starts past the input and its begin pad is
    dropped)."""
    n, mode = len(sizes), auto_pad(node)
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        return same_pads(mode, sizes, kernel, strides, dilations), [0] * n
    if mode == "VALID":
        return [(0, 0)] * n, [0] * n
    pairs = [(pads[i], pads[i + n]) for i in range(n)]
    if not node.attr("ceil_mode", 0):
        return pairs, [0] * n
    extra = []
    for size, (b, e), k, s, d in zip(sizes, pairs, kernel, strides, dilations, strict=True):
        span = (k - 1) * d + 1
        out = (size + b + e - span + s - 1) // s + 1
        out = out - _ge((out - 1) * s, size + b)  # the last window starts inside the input or its begin pad
        extra.append(maximum((out - 1) * s + span - (size + b + e), 0))
    return pairs, extra


def _slide(x: tf.Tensor, axis: int, k: int, s: int, d: int, combine) -> tf.Tensor:
    """A 1-D window along ``axis`` (VALID), its ``k`` taps as strided slices joined by ``combine``."""
    size = dims(x, axis)[0]
    out = (size - (k - 1) * d - 1) // s + 1
    result = None
    for j in range(k):
        index = [slice(None)] * x.shape.rank
        index[axis] = slice(j * d, j * d + (out - 1) * s + 1, s)
        tap = x[tuple(index)]
        result = tap if result is None else combine(result, tap)
    return result


def window(x: tf.Tensor, kind: str, kernel: list[int], strides: list[int], dilations: list[int]) -> tf.Tensor:
    """Max (``kind="max"``) or sum (``"sum"``) of each VALID window of a padded, channels-last ``x``."""
    n = len(kernel)
    native = all(d == 1 for d in dilations) and (n < 3 or x.dtype in (tf.float32, tf.float16))
    if native and (kind == "max" or x.dtype.is_floating):
        y = tf.cast(x, tf.float32) if n == 3 else x  # the 3-D CPU kernels are float32 only
        if kind == "max":
            y = tf.nn.max_pool(y, kernel, strides, "VALID")
        else:
            y = tf.nn.avg_pool(y, kernel, strides, "VALID") * math.prod(kernel)
        return tf.cast(y, x.dtype)
    combine = tf.maximum if kind == "max" else tf.add
    for axis, (k, s, d) in enumerate(zip(kernel, strides, dilations, strict=True)):
        x = _slide(x, axis + 1, k, s, d, combine)
    return x


def _lowest(dtype: tf.DType):
    return -np.inf if dtype.is_floating else dtype.min


def _setup(node, x: tf.Tensor):
    n = x.shape.rank - 2
    kernel = list(node.attr("kernel_shape"))
    strides, dilations, pads = geometry(node, n, kernel)
    pairs, extra = pool_pads(node, dims(x), kernel, strides, dilations, pads)
    return kernel, strides, dilations, pairs, extra


def _padded(x_last: tf.Tensor, pairs, extra, value) -> tf.Tensor:
    return pad_spatial(x_last, [(b, e + x) for (b, e), x in zip(pairs, extra, strict=True)], value)


@op("MaxPool")
def _max_pool(node, x):
    kernel, strides, dilations, pairs, extra = _setup(node, x[0])
    padded = _padded(to_last(x[0]), pairs, extra, _lowest(x[0].dtype))
    if len(node.proto.output) < 2 or not node.proto.output[1]:
        return [to_first(window(padded, "max", kernel, strides, dilations))]
    values, indices = _arg_max(x[0], padded, kernel, strides, dilations, pairs, extra, node.attr("storage_order", 0))
    return [values, indices]


def _arg_max(x, padded, kernel, strides, dilations, pairs, extra, storage_order: int):
    """MaxPool's values and Indices: each window's first maximum, its index into the flattened
    ``[N, C, *spatial]`` input (spatial axes column-major for ``storage_order=1``)."""
    sizes = dims(x)
    axes = range(len(sizes)) if storage_order else range(len(sizes) - 1, -1, -1)
    position, step = 0, 1
    for axis in axes:  # the flat spatial position of every input pixel, -1 on the pads
        shape = [1] * (len(sizes) + 2)
        shape[axis + 1] = -1
        position = position + tf.reshape(tf.range(tf.cast(sizes[axis], tf.int64)) * step, shape)
        step = step * tf.cast(sizes[axis], tf.int64)
    position = _padded(position, pairs, extra, -1)
    outs = [
        (tf.shape(padded, tf.int64)[i + 1] - (k - 1) * d - 1) // s + 1
        for i, (k, s, d) in enumerate(zip(kernel, strides, dilations, strict=True))
    ]
    best, where = None, None
    for offset in itertools.product(*[range(k) for k in kernel]):
        taps = zip(offset, outs, strides, dilations, strict=True)
        index = [slice(None), *[slice(j * d, j * d + (o - 1) * s + 1, s) for j, o, s, d in taps], slice(None)]
        value, at = padded[tuple(index)], position[tuple(index)]
        if best is None:
            best, where = value, tf.broadcast_to(at, tf.shape(value, tf.int64))
            continue
        better = value > best
        best, where = tf.where(better, value, best), tf.where(better, at, where)
    channels = tf.shape(x, tf.int64)[1]
    plane = tf.range(tf.shape(x, tf.int64)[0])[:, None] * channels + tf.range(channels)[None]
    plane = tf.reshape(plane, tf.concat([tf.shape(plane), tf.ones([len(sizes)], tf.int32)], 0))
    return to_first(best), to_first(where) + plane * step


@op("AveragePool")
def _average_pool(node, x):
    kernel, strides, dilations, pairs, extra = _setup(node, x[0])
    total = window(_padded(to_last(x[0]), pairs, extra, 0), "sum", kernel, strides, dilations)
    unpadded = all(isinstance(p, int) and p == 0 for p in [*itertools.chain(*pairs), *extra])
    if node.attr("count_include_pad", 0) or unpadded:
        # ONNX's reference counts the pixels ceil_mode adds too (onnxruntime and torch do not)
        return [to_first(total / math.prod(kernel))]
    ones = tf.ones(tf.stack([1, *[tf.cast(d, tf.int32) for d in dims(x[0])], 1]), x[0].dtype)
    count = window(_padded(ones, pairs, extra, 0), "sum", kernel, strides, dilations)
    return [to_first(total / count)]


@op("LpPool")
def _lp_pool(node, x):
    kernel, strides, dilations, pairs, extra = _setup(node, x[0])
    p = node.attr("p", 2)
    powered = tf.abs(to_last(x[0])) ** p
    total = window(_padded(powered, pairs, extra, 0), "sum", kernel, strides, dilations)
    return [to_first(total ** (1.0 / p))]


@op("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(node, x):
    axes = list(range(2, x[0].shape.rank))
    if node.op_type == "GlobalAveragePool":
        return [tf.reduce_mean(x[0], axes, keepdims=True)]
    if node.op_type == "GlobalMaxPool":
        return [tf.reduce_max(x[0], axes, keepdims=True)]
    p = node.attr("p", 2)
    return [tf.reduce_sum(tf.abs(x[0]) ** p, axes, keepdims=True) ** (1.0 / p)]


@op("MaxUnpool")
def _max_unpool(node, x):
    data, indices, output_shape = [*x, None][:3]
    n = data.shape.rank - 2
    kernel = list(node.attr("kernel_shape"))
    strides, _, pads = geometry(node, n, kernel)
    if output_shape is None:
        sizes = [
            (size - 1) * s - pads[i] - pads[i + n] + k
            for i, (size, s, k) in enumerate(zip(dims(data), strides, kernel, strict=True))
        ]
        output_shape = tf.stack([tf.cast(d, tf.int64) for d in [*dims(data, 0)[:2], *sizes]])
    # Indices address the flattened output_shape, as MaxPool's address its input: onnxruntime (its #2193) and
    # torch. ONNX's reference and test_maxunpool_export_with_output_shape read them in the shape inferred without
    # output_shape and pad that instead, which misplaces a MaxPool's indices (onnx/onnx#2398).
    output_shape = tf.cast(output_shape, tf.int64)
    flat = tf.zeros(tf.reduce_prod(output_shape)[None], data.dtype)
    flat = tf.tensor_scatter_nd_update(flat, tf.reshape(tf.cast(indices, tf.int64), [-1, 1]), tf.reshape(data, [-1]))
    return [tf.reshape(flat, output_shape)]


@op("Col2Im")
def _col2im(node, x):
    data, image_shape, block_shape = x
    n = block_shape.shape[0]
    image = tf.cast(image_shape, tf.int64)
    block = tf.cast(block_shape, tf.int64)
    strides, dilations = (tf.constant(node.attr(k, [1] * n), tf.int64) for k in ("strides", "dilations"))
    pads = tf.constant(node.attr("pads", [0] * 2 * n), tf.int64)
    padded = image + pads[:n] + pads[n:]
    outs = (padded - (block - 1) * dilations - 1) // strides + 1
    taps = tf.stack(tf.unravel_index(tf.range(tf.reduce_prod(block)), block), 0)  # [n, K], row-major
    spots = tf.stack(tf.unravel_index(tf.range(tf.reduce_prod(outs)), outs), 0)  # [n, L]
    coords = taps[:, :, None] * dilations[:, None, None] + spots[:, None, :] * strides[:, None, None]
    place = tf.reshape(tf.tensordot(tf.math.cumprod(padded, reverse=True, exclusive=True), coords, 1), [-1])
    batch, rows = tf.shape(data, tf.int64)[0], tf.shape(data, tf.int64)[1]
    channels = rows // tf.reduce_prod(block)
    columns = tf.transpose(tf.reshape(data, tf.stack([batch, channels, -1])), [2, 0, 1])  # [K * L, N, C]
    summed = tf.math.unsorted_segment_sum(columns, place, tf.reduce_prod(padded))
    y = tf.reshape(tf.transpose(summed, [1, 2, 0]), tf.concat([[batch, channels], padded], 0))
    index = [slice(None)] * 2 + [slice(pads[i], pads[i] + image[i]) for i in range(n)]
    return [y[tuple(index)]]


def _roi_bins(start: tf.Tensor, end: tf.Tensor, bins: int, size: Dim) -> tf.Tensor:
    """``[R, bins, size]``: which pixels each of a ROI's bins holds along one axis (Caffe's ROI pooling)."""
    step = tf.maximum(end - start + 1, 1) / bins
    edges = tf.range(bins + 1, dtype=step.dtype)[None] * step[:, None]
    lo = tf.clip_by_value(tf.floor(edges[:, :-1]) + start[:, None], 0, tf.cast(size, step.dtype))
    hi = tf.clip_by_value(tf.math.ceil(edges[:, 1:]) + start[:, None], 0, tf.cast(size, step.dtype))
    pixel = tf.range(tf.cast(size, step.dtype))[None, None]
    return (pixel >= lo[..., None]) & (pixel < hi[..., None])


@op("MaxRoiPool")
def _max_roi_pool(node, x):
    data, rois = x
    pooled_h, pooled_w = node.attr("pooled_shape")
    height, width = dims(data)
    # corners rounded half away from zero (std::round), as onnxruntime does
    corners = tf.cast(rois[:, 1:], tf.float32) * node.attr("spatial_scale", 1.0)
    corners = tf.sign(corners) * tf.floor(tf.abs(corners) + 0.5)
    rows = _roi_bins(corners[:, 1], corners[:, 3], pooled_h, height)  # [R, ph, H]
    cols = _roi_bins(corners[:, 0], corners[:, 2], pooled_w, width)  # [R, pw, W]
    feats = tf.gather(data, tf.cast(rois[:, 0], tf.int32))  # [R, C, H, W]
    lowest = tf.constant(_lowest(data.dtype), data.dtype)
    per_col = tf.stack(
        [tf.reduce_max(tf.where(cols[:, j, None, None, :], feats, lowest), -1) for j in range(pooled_w)], -1
    )  # [R, C, H, pw]
    pooled = tf.stack(
        [tf.reduce_max(tf.where(rows[:, i, None, :, None], per_col, lowest), 2) for i in range(pooled_h)], 2
    )  # [R, C, ph, pw]
    filled = tf.reduce_any(rows, -1)[:, None, :, None] & tf.reduce_any(cols, -1)[:, None, None, :]
    return [tf.where(filled, pooled, tf.zeros_like(pooled))]  # an empty bin is 0
