"""Reductions over axes."""

from __future__ import annotations

import tensorflow as tf

from torchtfx.components.converter.ops.registry import ints, op

_REDUCE = {"ReduceMean": tf.reduce_mean, "ReduceSum": tf.reduce_sum, "ReduceMax": tf.reduce_max,
           "ReduceMin": tf.reduce_min, "ReduceProd": tf.reduce_prod}  # fmt: skip


@op(*_REDUCE)
def _reduce(node, x):
    axes = node.attr("axes")
    if axes is None and len(x) > 1 and x[1] is not None:
        axes = ints(x[1], f"{node.op_type} axes")
    if not axes and node.attr("noop_with_empty_axes", 0):
        return [x[0]]
    return [_REDUCE[node.op_type](x[0], axis=list(axes) if axes else None, keepdims=bool(node.attr("keepdims", 1)))]
