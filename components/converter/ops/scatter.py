"""Element-wise index operators and writes into or around a tensor: gather/scatter by elements, scatters,
padding, triangular and diagonal masks."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from torchtfx.components.converter.ops.registry import DTYPES, op, static


def _element_coordinates(indices: tf.Tensor, axis: int, size) -> tf.Tensor:
    """The full coordinates ([..., rank]) that ``GatherElements``/``ScatterElements`` index: each element's own
    position with ``indices`` (ONNX's negatives counted from ``size``) along ``axis``."""
    indices = tf.cast(indices, tf.int64)
    indices = tf.where(indices < 0, indices + tf.cast(size, tf.int64), indices)
    dims = tf.shape(indices, tf.int64)
    grids = tf.meshgrid(*(tf.range(dims[i]) for i in range(indices.shape.rank)), indexing="ij")
    grids[axis] = indices
    return tf.stack(grids, axis=-1)


@op("GatherElements")
def _gather_elements(node, x):
    data, indices = x
    axis = node.attr("axis", 0) % data.shape.rank
    return [tf.gather_nd(data, _element_coordinates(indices, axis, tf.shape(data)[axis]))]


def _scatter_nd(data: tf.Tensor, coordinates: tf.Tensor, updates: tf.Tensor, reduction: str) -> tf.Tensor:
    """ONNX ``ScatterND`` on non-negative ``coordinates`` ([..., k]) with ``reduction``."""
    if reduction == "none":
        return tf.tensor_scatter_nd_update(data, coordinates, updates)
    if reduction == "add":
        return tf.tensor_scatter_nd_add(data, coordinates, updates)
    if reduction == "max":
        return tf.tensor_scatter_nd_max(data, coordinates, updates)
    if reduction == "min":
        return tf.tensor_scatter_nd_min(data, coordinates, updates)
    if reduction != "mul":
        raise ValueError(f"unknown scatter reduction {reduction!r}")
    # TF has no multiplying scatter: the product of the updates to each of the [prod(shape[:k]), ...] slices
    # (1 where none lands) times the data.
    depth = coordinates.shape[-1]
    shape = tf.shape(data, tf.int64)
    strides = tf.math.cumprod(shape[:depth], exclusive=True, reverse=True)
    slot = tf.reshape(tf.reduce_sum(coordinates * strides, -1), [-1])
    slices = tf.concat([[-1], shape[depth:]], 0)
    product = tf.math.unsorted_segment_prod(tf.reshape(updates, slices), slot, tf.reduce_prod(shape[:depth]))
    return tf.reshape(tf.reshape(data, slices) * product, shape)


def _reduction(node) -> str:
    value = node.attr("reduction", b"none")
    return value.decode() if isinstance(value, bytes) else value


@op("ScatterElements", "Scatter")
def _scatter_elements(node, x):
    data, indices, updates = x
    axis = node.attr("axis", 0) % data.shape.rank
    coordinates = _element_coordinates(indices, axis, tf.shape(data)[axis])
    return [_scatter_nd(data, coordinates, updates, _reduction(node))]


@op("ScatterND")
def _scatter_nd_op(node, x):
    data, indices, updates = x
    depth = indices.shape[-1]
    if depth is None:
        raise ValueError("ScatterND needs the last dimension of its indices known")
    indices = tf.cast(indices, tf.int64)
    known = static(indices)
    if known is None or np.any(known < 0):
        indices = tf.where(indices < 0, indices + tf.shape(data, tf.int64)[:depth], indices)
    return [_scatter_nd(data, indices, updates, _reduction(node))]


def _diagonal_offsets(shape: tf.Tensor) -> tf.Tensor:
    """``j - i`` over the last two dimensions of ``shape`` ([..., n, m] -> [n, m])."""
    return tf.range(shape[-1])[None, :] - tf.range(shape[-2])[:, None]


@op("Trilu")
def _trilu(node, x):
    data, k = x[0], (x[1] if len(x) > 1 else None)
    k = tf.constant(0, tf.int64) if k is None else tf.cast(tf.reshape(k, []), tf.int64)
    offsets = _diagonal_offsets(tf.shape(data, tf.int64))
    keep = offsets >= k if node.attr("upper", 1) else offsets <= k
    return [tf.where(keep, data, tf.zeros([], data.dtype))]


@op("EyeLike")
def _eye_like(node, x):
    dtype = node.attr("dtype")
    dtype = x[0].dtype if dtype is None else DTYPES[dtype]
    dtype = node.float_dtype if dtype == tf.float32 else dtype
    return [tf.cast(tf.equal(_diagonal_offsets(tf.shape(x[0], tf.int64)), node.attr("k", 0)), dtype)]


def _pad_widths(node, x) -> tf.Tensor:
    """The pads as a [rank, 2] (begin, end) int64 tensor, from the attribute (opset < 11) or the inputs."""
    data = x[0]
    rank = data.shape.rank
    if node.opset < 11:
        pads = node.attr("pads", node.attr("paddings"))
        return tf.constant(np.reshape(pads, [2, rank]).T, tf.int64)
    pads, axes = tf.cast(x[1], tf.int64), (x[3] if len(x) > 3 else None)
    if axes is None:
        return tf.transpose(tf.reshape(pads, [2, rank]))
    axes_v = static(axes)
    if axes_v is not None:
        where = tf.constant([[int(a) % rank] for a in np.atleast_1d(axes_v)], tf.int64)
    else:
        where = tf.math.floormod(tf.cast(tf.reshape(axes, [-1]), tf.int64), rank)[:, None]
    return tf.scatter_nd(where, tf.transpose(tf.reshape(pads, [2, -1])), tf.constant([rank, 2], tf.int64))


def _pad_constant(data: tf.Tensor, widths: tf.Tensor, value) -> tf.Tensor:
    static_widths = static(widths)
    if static_widths is None or np.any(static_widths < 0):
        # Negative pads crop.
        crop = tf.maximum(-widths, 0)
        data = tf.slice(data, crop[:, 0], tf.shape(data, tf.int64) - crop[:, 0] - crop[:, 1])
        widths = tf.maximum(widths, 0)
    return tf.pad(data, widths, constant_values=value)


def _pad_indices(widths: tf.Tensor, size: tf.Tensor, mode: str) -> tf.Tensor:
    """The source positions of an axis of ``size`` padded by ``widths`` (begin, end) in ``mode``."""
    positions = tf.range(-widths[0], size + widths[1])
    if mode == "edge":
        return tf.clip_by_value(positions, 0, size - 1)
    if mode == "wrap":
        return tf.math.floormod(positions, size)
    period = tf.maximum(2 * (size - 1), 1)  # reflect: mirrored about the first and last values
    folded = tf.math.floormod(positions, period)
    return tf.where(folded >= size, period - folded, folded)


@op("Pad")
def _pad(node, x):
    data = x[0]
    mode = node.attr("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    widths = _pad_widths(node, x)
    if mode == "constant":
        if node.opset < 11:
            value = tf.constant(node.attr("value", 0.0), data.dtype)
        else:
            given = x[2] if len(x) > 2 and x[2] is not None else None
            value = tf.zeros([], data.dtype) if given is None else tf.cast(tf.reshape(given, []), data.dtype)
        return [_pad_constant(data, widths, value)]
    if mode not in ("edge", "reflect", "wrap"):
        raise ValueError(f"unknown Pad mode {mode!r}")
    static_widths = static(widths)
    shape = tf.shape(data, tf.int64)
    for axis in range(data.shape.rank):
        if static_widths is None or np.any(static_widths[axis] != 0):
            data = tf.gather(data, _pad_indices(widths[axis], shape[axis], mode), axis=axis)
    return [data]
