"""Indexing operators: gathers, scatters, top-k, arg-max, cumulative sums, one-hot, padding."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from torchtfx.components.converter.ops.registry import op, static


def _positive_indices(indices, size):
    value = static(indices)
    if value is not None and np.all(value >= 0):
        return indices
    return tf.where(indices < 0, indices + tf.cast(size, indices.dtype), indices)


@op("Gather")
def _gather(node, x):
    data, indices = x
    axis = node.attr("axis", 0) % data.shape.rank
    return [tf.gather(data, _positive_indices(indices, tf.shape(data, tf.int64)[axis]), axis=axis)]


@op("ArgMax", "ArgMin")
def _argmax(node, x):
    fn = tf.argmax if node.op_type == "ArgMax" else tf.argmin
    axis = node.attr("axis", 0)
    out = fn(x[0], axis=axis, output_type=tf.int64)
    return [tf.expand_dims(out, axis) if node.attr("keepdims", 1) else out]


@op("TopK")
def _top_k(node, x):
    data, k = x
    axis, largest = node.attr("axis", -1) % data.shape.rank, node.attr("largest", 1)
    moved = data if axis == data.shape.rank - 1 else tf.experimental.numpy.moveaxis(data, axis, -1)
    values, indices = tf.math.top_k(moved if largest else -moved, k=tf.cast(tf.reshape(k, []), tf.int32))
    values = values if largest else -values
    if axis != data.shape.rank - 1:
        values, indices = (tf.experimental.numpy.moveaxis(t, -1, axis) for t in (values, indices))
    return [values, tf.cast(indices, tf.int64)]
