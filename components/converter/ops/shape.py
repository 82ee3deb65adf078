"""Shape operators: reshape, transpose, (un)squeeze, slice, split, concat, expand, tile, shape, range."""

from __future__ import annotations

import tensorflow as tf

from torchtfx.components.converter.ops.registry import BIG, ints, op, static


@op("Concat")
def _concat(node, x):
    return [tf.concat([t for t in x if t is not None], axis=node.attr("axis"))]


@op("Reshape")
def _reshape(node, x):
    data, shape = x
    value = static(shape)
    if not node.attr("allowzero", 0) and (value is None or 0 in value):
        # ONNX: 0 copies the input's dimension at that position.
        if value is not None:
            dims = tf.shape(data, tf.int64)
            shape = tf.stack([dims[i] if v == 0 else tf.constant(v, tf.int64) for i, v in enumerate(value)])
        elif shape.shape.is_fully_defined():
            dims = tf.shape(data, tf.int64)[: shape.shape[0]]
            dims = tf.pad(dims, [[0, tf.maximum(0, shape.shape[0] - tf.size(dims))]])
            shape = tf.where(tf.equal(shape, 0), dims, shape)
    return [tf.reshape(data, shape)]


@op("Flatten")
def _flatten(node, x):
    data, axis = x[0], node.attr("axis", 1)
    dims = tf.shape(data, tf.int64)
    return [tf.reshape(data, tf.stack([tf.reduce_prod(dims[:axis]), tf.reduce_prod(dims[axis:])]))]


@op("Transpose")
def _transpose(node, x):
    perm = node.attr("perm")
    return [tf.transpose(x[0], perm=list(perm) if perm is not None else None)]


@op("Unsqueeze")
def _unsqueeze(node, x):
    data = x[0]
    axes = list(node.attr("axes")) if node.attr("axes") is not None else ints(x[1], "Unsqueeze axes")
    rank = data.shape.rank + len(axes)
    for axis in sorted(a % rank for a in axes):
        data = tf.expand_dims(data, axis)
    return [data]


@op("Squeeze")
def _squeeze(node, x):
    axes = node.attr("axes")
    if axes is None and len(x) > 1 and x[1] is not None:
        axes = ints(x[1], "Squeeze axes")
    return [tf.squeeze(x[0], axis=[a % x[0].shape.rank for a in axes] if axes is not None else None)]


def _clamp(v: int) -> int | None:
    return None if v >= BIG or v <= -BIG else v


@op("Slice")
def _slice(node, x):
    data, starts, ends, axes, steps = (x + [None] * 5)[:5]
    rank = data.shape.rank
    values = [static(t) for t in (starts, ends, axes, steps)]
    given = [t is not None for t in (starts, ends, axes, steps)]
    if any(g and v is None for g, v in zip(given, values, strict=True)):
        return [_dynamic_slice(data, starts, ends, axes, steps)]
    axes_v = [a % rank for a in (values[2] if axes is not None else range(len(values[0])))]
    steps_v = values[3] if steps is not None else [1] * len(axes_v)
    index = [slice(None)] * rank
    for axis, start, end, step in zip(axes_v, values[0], values[1], steps_v, strict=True):
        index[axis] = slice(_clamp(int(start)), _clamp(int(end)), int(step))
    return [data[tuple(index)]]


def _dynamic_slice(data, starts, ends, axes, steps):
    rank = data.shape.rank
    count = tf.shape(starts)[0]
    axes = tf.range(count, dtype=tf.int64) if axes is None else tf.math.floormod(tf.cast(axes, tf.int64), rank)
    steps = tf.ones([count], tf.int64) if steps is None else tf.cast(steps, tf.int64)
    where = axes[:, None]
    begin = tf.tensor_scatter_nd_update(tf.zeros([rank], tf.int64), where, tf.cast(starts, tf.int64))
    end = tf.tensor_scatter_nd_update(tf.shape(data, tf.int64), where, tf.cast(ends, tf.int64))
    stride = tf.tensor_scatter_nd_update(tf.ones([rank], tf.int64), where, steps)
    return tf.strided_slice(data, begin, end, stride)


@op("Split")
def _split(node, x):
    data, sizes = x[0], (x[1] if len(x) > 1 else None)
    sizes = node.attr("split") or (ints(sizes, "Split sizes") if sizes is not None else None)
    return list(tf.split(data, sizes or len(node.proto.output), axis=node.attr("axis", 0)))


@op("Expand")
def _expand(node, x):
    data, shape = x
    return [tf.broadcast_to(data, tf.broadcast_dynamic_shape(tf.shape(data, tf.int64), tf.cast(shape, tf.int64)))]


@op("Tile")
def _tile(node, x):
    return [tf.tile(x[0], x[1])]


@op("Shape")
def _shape(node, x):
    start, end = node.attr("start", 0), node.attr("end")
    if x[0].shape.is_fully_defined():
        return [tf.constant(x[0].shape.as_list()[start:end], tf.int64)]
    return [tf.shape(x[0], tf.int64)[start:end]]


@op("Size")
def _size(node, x):
    return [tf.size(x[0], tf.int64)]


@op("Range")
def _range(node, x):
    if x[0].dtype == tf.float16:
        # TF 2.16 has no float16 Range: tf.range asserts on the dtype, and the raw op has no CPU kernel
        # ("No OpKernel was registered to support Op 'Range' ... Tidx=DT_HALF"); count in float32.
        return [tf.cast(tf.range(*(tf.cast(t, tf.float32) for t in x[:3])), tf.float16)]
    return [tf.range(x[0], x[1], x[2])]
