"""Indexing operators: gathers, selections, top-k, arg-max, cumulative sums, one-hot, unique values."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from torchtfx.components.converter.ops.registry import op, static


def _positive_indices(indices: tf.Tensor, size) -> tf.Tensor:
    """ONNX indices in ``[-size, size)`` as ``[0, size)``."""
    value = static(indices)
    if value is not None and np.all(value >= 0):
        return indices
    return tf.where(indices < 0, indices + tf.cast(size, indices.dtype), indices)


def _move_to_last(t: tf.Tensor, axis: int) -> tf.Tensor:
    return t if axis == t.shape.rank - 1 else tf.experimental.numpy.moveaxis(t, axis, -1)


def _move_from_last(t: tf.Tensor, axis: int) -> tf.Tensor:
    return t if axis == t.shape.rank - 1 else tf.experimental.numpy.moveaxis(t, -1, axis)


@op("Gather")
def _gather(node, x):
    data, indices = x
    axis = node.attr("axis", 0) % data.shape.rank
    return [tf.gather(data, _positive_indices(indices, tf.shape(data, tf.int64)[axis]), axis=axis)]


@op("GatherND")
def _gather_nd(node, x):
    data, indices = x
    batch_dims, depth = node.attr("batch_dims", 0), indices.shape[-1]
    if depth is None:
        raise ValueError("GatherND needs the last dimension of its indices known")
    indices = tf.cast(indices, tf.int64)
    known = static(indices)
    if known is None or np.any(known < 0):
        sizes = tf.shape(data, tf.int64)[batch_dims : batch_dims + depth]
        indices = tf.where(indices < 0, indices + sizes, indices)
    return [tf.gather_nd(data, indices, batch_dims=batch_dims)]


@op("ArgMax", "ArgMin")
def _argmax(node, x):
    data = x[0]
    fn = tf.argmax if node.op_type == "ArgMax" else tf.argmin
    axis = node.attr("axis", 0) % data.shape.rank
    if node.attr("select_last_index", 0):
        # TF picks the first of equal values; the first in the reversed axis is the last.
        out = tf.shape(data, tf.int64)[axis] - 1 - fn(tf.reverse(data, [axis]), axis=axis, output_type=tf.int64)
    else:
        out = fn(data, axis=axis, output_type=tf.int64)
    return [tf.expand_dims(out, axis) if node.attr("keepdims", 1) else out]


def _descending_key(t: tf.Tensor) -> tf.Tensor:
    """Values whose descending order is ``t``'s ascending order; ``~t`` for integers (no overflow at the
    type's minimum, and unsigned types work)."""
    return -t if t.dtype.is_floating else tf.bitwise.invert(t)


@op("TopK")
def _top_k(node, x):
    data = x[0]
    k = x[1] if node.opset >= 10 else tf.constant(node.attr("k"), tf.int64)
    axis, largest = node.attr("axis", -1) % data.shape.rank, node.attr("largest", 1)
    moved = _move_to_last(data, axis)
    # tf.math.top_k puts the lower index first among equal values, as ONNX asks.
    _, indices = tf.math.top_k(moved if largest else _descending_key(moved), k=tf.cast(tf.reshape(k, []), tf.int32))
    values = tf.gather(moved, indices, batch_dims=moved.shape.rank - 1)
    return [_move_from_last(values, axis), _move_from_last(tf.cast(indices, tf.int64), axis)]


@op("CumSum")
def _cumsum(node, x):
    data, axis = x
    exclusive, reverse = bool(node.attr("exclusive", 0)), bool(node.attr("reverse", 0))
    return [tf.math.cumsum(data, tf.reshape(axis, []), exclusive=exclusive, reverse=reverse)]


@op("OneHot")
def _one_hot(node, x):
    indices, depth, values = x
    depth = tf.cast(tf.reshape(depth, []), tf.int32)
    indices = tf.cast(indices, tf.int64)
    indices = tf.where(indices < 0, indices + tf.cast(depth, tf.int64), indices)
    values = tf.reshape(values, [2])
    axis = node.attr("axis", -1) % (indices.shape.rank + 1)
    return [tf.one_hot(indices, depth, on_value=values[1], off_value=values[0], axis=axis, dtype=values.dtype)]


@op("NonZero")
def _nonzero(node, x):
    data = x[0]
    return [tf.transpose(tf.where(tf.not_equal(data, tf.zeros([], data.dtype))))]


@op("Compress")
def _compress(node, x):
    data, condition = x
    axis = node.attr("axis")
    if axis is None:
        data, axis = tf.reshape(data, [-1]), 0
    # A condition shorter than the axis drops the slices past its end (numpy.compress).
    return [tf.gather(data, tf.where(tf.reshape(condition, [-1]))[:, 0], axis=axis % data.shape.rank)]


@op("ReverseSequence")
def _reverse_sequence(node, x):
    data, lengths = x
    batch_axis, time_axis = node.attr("batch_axis", 1), node.attr("time_axis", 0)
    return [tf.reverse_sequence(data, tf.cast(lengths, tf.int64), seq_axis=time_axis, batch_axis=batch_axis)]


def _lexicographic_ranks(rows: tf.Tensor) -> tf.Tensor:
    """The rank of each of the distinct ``rows`` ([n, c]) in lexicographic order, by pairwise comparison."""
    differ = tf.not_equal(rows[:, None, :], rows[None, :, :])
    first = tf.argmax(tf.cast(differ, tf.int32), axis=-1, output_type=tf.int32)  # first differing column
    a = tf.gather(rows, first, axis=1, batch_dims=1)  # rows[i, first[i, j]]
    # first is symmetric, so rows[j, first[i, j]] is a[j, i]: row j < row i.
    less = tf.logical_and(tf.reduce_any(differ, -1), tf.less(tf.transpose(a), a))
    return tf.reduce_sum(tf.cast(less, tf.int64), axis=1)


def _first_occurrences(rows: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``(first, inverse)``: the first index of each distinct row of ``rows`` ([n, c]) in order of appearance,
    and each row's position among them."""
    same = tf.reduce_all(tf.equal(rows[:, None, :], rows[None, :, :]), -1)
    first_of = tf.argmax(tf.cast(same, tf.int32), axis=1, output_type=tf.int64)  # first equal row of each row
    n = tf.shape(rows, tf.int64)[0]
    is_first = tf.equal(first_of, tf.range(n))
    first = tf.where(is_first)[:, 0]
    inverse = tf.gather(tf.cumsum(tf.cast(is_first, tf.int64)) - 1, first_of)
    return first, inverse


@op("Unique")
def _unique(node, x):
    data, axis = x[0], node.attr("axis")
    if axis is None:
        flat = tf.reshape(data, [-1])
        values, inverse = tf.unique(flat, out_idx=tf.int64)
        count = tf.shape(values, tf.int64)[0]
        first = tf.math.unsorted_segment_min(tf.range(tf.size(flat, tf.int64)), inverse, count)
        keys = values
    else:
        axis %= data.shape.rank
        rows = tf.reshape(tf.experimental.numpy.moveaxis(data, axis, 0), [tf.shape(data)[axis], -1])
        first, inverse = _first_occurrences(rows)
        count = tf.shape(first, tf.int64)[0]
        keys = tf.gather(rows, first)
    counts = tf.math.unsorted_segment_sum(tf.ones_like(inverse), inverse, count)
    if node.attr("sorted", 1):
        if axis is None:
            order = tf.cast(tf.argsort(keys, stable=True), tf.int64)
        else:
            order = tf.math.invert_permutation(_lexicographic_ranks(keys))
        first, counts = tf.gather(first, order), tf.gather(counts, order)
        inverse = tf.gather(tf.math.invert_permutation(order), inverse)
    y = tf.gather(tf.reshape(data, [-1]), first) if axis is None else tf.gather(data, first, axis=axis)
    return [y, first, inverse, counts]
