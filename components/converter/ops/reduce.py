"""Reductions over axes: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare.

Axes come from the ``axes`` attribute (ReduceSum before opset 13, the others before 18) or from the optional
second input, whose values may only be known at run time; the output rank then follows from its static length.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import numpy as np
import tensorflow as tf

from torchtfx.components.converter.ops.registry import Node, op, static

Axis: TypeAlias = list[int] | tf.Tensor


def _logsumexp(x: tf.Tensor, axis: Axis) -> tf.Tensor:
    # Shift by the finite maximum only: an empty set (max -inf) or an all -inf slice gives log(0) = -inf, not nan.
    top = tf.reduce_max(x, axis, keepdims=True)
    top = tf.where(tf.math.is_finite(top), top, tf.zeros_like(top))
    return tf.math.log(tf.reduce_sum(tf.exp(x - top), axis, keepdims=True)) + top


def _abs(x: tf.Tensor) -> tf.Tensor:
    return x if x.dtype.is_unsigned else tf.abs(x)


# Each kernel reduces with keepdims=True; the caller drops the reduced dimensions when asked.
_KERNELS: dict[str, Callable[[tf.Tensor, Axis], tf.Tensor]] = {
    "ReduceSum": lambda x, a: tf.reduce_sum(x, a, keepdims=True),
    "ReduceMean": lambda x, a: tf.reduce_mean(x, a, keepdims=True),
    "ReduceMax": lambda x, a: tf.reduce_max(x, a, keepdims=True),
    "ReduceMin": lambda x, a: tf.reduce_min(x, a, keepdims=True),
    "ReduceProd": lambda x, a: tf.reduce_prod(x, a, keepdims=True),
    "ReduceL1": lambda x, a: tf.reduce_sum(_abs(x), a, keepdims=True),
    "ReduceL2": lambda x, a: tf.sqrt(tf.reduce_sum(tf.square(x), a, keepdims=True)),
    "ReduceSumSquare": lambda x, a: tf.reduce_sum(tf.square(x), a, keepdims=True),
    "ReduceLogSum": lambda x, a: tf.math.log(tf.reduce_sum(x, a, keepdims=True)),
    "ReduceLogSumExp": _logsumexp,
}
_BOOL = {"ReduceMax": tf.reduce_any, "ReduceMin": tf.reduce_all}
# Computed in float64 for integer inputs (numpy's reference accumulates in float, then casts back).
_FLOAT_ONLY = {"ReduceMean", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"}


def _kernel(name: str, x: tf.Tensor, axes: Axis) -> tf.Tensor:
    if x.dtype == tf.bool and name in _BOOL:
        return _BOOL[name](x, axes, keepdims=True)
    if x.dtype == tf.float16 and name not in _BOOL:
        # A float16 network still sums, squares and multiplies in float32: squares overflow float16 at 256.
        return tf.cast(_KERNELS[name](tf.cast(x, tf.float32), axes), tf.float16)
    if x.dtype.is_integer and name in _FLOAT_ONLY:
        return tf.cast(_KERNELS[name](tf.cast(x, tf.float64), axes), x.dtype)
    return _KERNELS[name](x, axes)


def _drop_dims(reduced: tf.Tensor, axes: tf.Tensor, count: int) -> tf.Tensor:
    """``reduced`` (keepdims) without the ``count`` dimensions listed, at run time, in ``axes``."""
    rank = reduced.shape.rank
    axes = tf.math.floormod(tf.cast(axes, tf.int32), rank)
    listed = tf.reduce_any(tf.equal(tf.range(rank)[:, None], axes[None, :]), axis=1)
    out = tf.reshape(reduced, tf.boolean_mask(tf.shape(reduced), tf.logical_not(listed)))
    out.set_shape([None] * (rank - count))
    return out


def _reduce_runtime_axes(node: Node, data: tf.Tensor, axes: tf.Tensor, keepdims: bool) -> tf.Tensor:
    """Axes known only at run time. An empty axes list means all axes (or none with noop_with_empty_axes)."""
    count = axes.shape[0] if axes.shape.rank == 1 else None
    if count is not None:
        reduced = _kernel(node.op_type, data, axes)
        return reduced if keepdims else _drop_dims(reduced, axes, count)
    if not keepdims:
        raise ValueError(f"{node.op_type} with keepdims=0 needs axes of a known length to know its output rank")
    empty = tf.equal(tf.size(axes), 0)
    if node.attr("noop_with_empty_axes", 0):
        return tf.cond(empty, lambda: data, lambda: _kernel(node.op_type, data, axes))
    everything = tf.range(data.shape.rank, dtype=axes.dtype)
    return _kernel(node.op_type, data, tf.cond(empty, lambda: everything, lambda: tf.identity(axes)))


@op(*_KERNELS)
def _reduce(node: Node, x: list) -> list:
    data, given = x[0], (x[1] if len(x) > 1 else None)
    keepdims = bool(node.attr("keepdims", 1))
    axes = node.attr("axes")
    if axes is None and given is not None:
        value = static(given)
        if value is None and given.shape.num_elements() != 0:
            return [_reduce_runtime_axes(node, data, given, keepdims)]
        axes = [] if value is None else [int(a) for a in np.atleast_1d(value)]
    rank = data.shape.rank
    if not axes:
        if node.attr("noop_with_empty_axes", 0):
            return [data]
        axes = range(rank)
    axes = sorted({a % rank for a in axes}) if rank else []
    reduced = _kernel(node.op_type, data, axes)
    return [reduced if keepdims else tf.squeeze(reduced, axes)]
