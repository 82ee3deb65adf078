"""Shape operators: reshape, flatten, transpose, (un)squeeze, slice, split, concat, expand, tile, shape, size,
range, depth/space rearrangements, center crop/pad.

Inputs that give axes, sizes or shapes may only be known at run time; the output rank then follows from their
static length, and the dimensions are computed with ``tf.shape``.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from torchtfx.components.converter.ops.registry import BIG, Node, op, static


def _dims(x: tf.Tensor) -> list[int | tf.Tensor]:
    """``x``'s dimensions, each a Python int where static, else a scalar int64 tensor."""
    dynamic = tf.shape(x, tf.int64)
    return [d if d is not None else dynamic[i] for i, d in enumerate(x.shape.as_list())]


def _int_list(t: tf.Tensor | None) -> list[int] | None:
    value = static(t)
    return None if value is None else [int(v) for v in np.atleast_1d(value)]


def _listed(rank: int, axes: tf.Tensor) -> tf.Tensor:
    """A [rank] bool mask of the positions listed (possibly negative) in the run-time ``axes``."""
    axes = tf.math.floormod(tf.cast(axes, tf.int64), rank)
    return tf.reduce_any(tf.equal(tf.range(rank, dtype=tf.int64)[:, None], axes[None, :]), axis=1)


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
            shape = tf.where(tf.equal(shape, 0), dims, tf.cast(shape, tf.int64))
    return [tf.reshape(data, shape)]


def _product(dims: list) -> int | tf.Tensor:
    if all(isinstance(d, int) for d in dims):
        return int(np.prod(dims, dtype=np.int64))
    return tf.reduce_prod(tf.stack([tf.cast(d, tf.int64) for d in dims]))


@op("Flatten")
def _flatten(node, x):
    dims = _dims(x[0])
    axis = node.attr("axis", 1)
    axis += len(dims) if axis < 0 else 0
    outer, inner = _product(dims[:axis]), _product(dims[axis:])
    return [tf.reshape(x[0], tf.stack([tf.cast(outer, tf.int64), tf.cast(inner, tf.int64)]))]


@op("Transpose")
def _transpose(node, x):
    perm = node.attr("perm")
    return [tf.transpose(x[0], perm=list(perm) if perm is not None else None)]


def _axes_of(node: Node, x: list) -> list[int] | tf.Tensor | None:
    """The ``axes`` attribute (older opsets) or input: a list if static, a tensor if known only at run time."""
    if node.attr("axes") is not None:
        return list(node.attr("axes"))
    given = x[1] if len(x) > 1 else None
    if given is None:
        return None
    value = _int_list(given)
    return value if value is not None else given


@op("Unsqueeze")
def _unsqueeze(node, x):
    data, axes = x[0], _axes_of(node, x)
    if axes is None:
        raise ValueError("Unsqueeze needs axes (the attribute before opset 13, the second input from 13)")
    if isinstance(axes, list):
        rank = data.shape.rank + len(axes)
        for axis in sorted(a % rank for a in axes):
            data = tf.expand_dims(data, axis)
        return [data]
    count = axes.shape[0] if axes.shape.rank == 1 else None
    if count is None:
        raise ValueError("Unsqueeze axes must be a constant or have a static length (it gives the output rank)")
    rank = data.shape.rank + count
    new = _listed(rank, axes)
    # The input's dimensions fill the positions that are not new, in order (the appended 1 keeps gather in range).
    source = tf.concat([tf.shape(data, tf.int64), [1]], 0)
    taken = tf.gather(source, tf.clip_by_value(tf.cumsum(1 - tf.cast(new, tf.int64)) - 1, 0, data.shape.rank))
    out = tf.reshape(data, tf.where(new, tf.ones_like(taken), taken))
    out.set_shape([None] * rank)
    return [out]


@op("Squeeze")
def _squeeze(node, x):
    data, axes = x[0], _axes_of(node, x)
    if axes is None:
        # Every dimension of size 1; one unknown at trace time (a batch) is taken as not 1, else the output rank
        # would depend on the data.
        axes = [i for i, d in enumerate(data.shape.as_list()) if d == 1]
    if isinstance(axes, list):
        return [tf.squeeze(data, axis=[a % data.shape.rank for a in axes])] if axes else [data]
    count = axes.shape[0] if axes.shape.rank == 1 else None
    if count is None:
        raise ValueError("Squeeze axes must be a constant or have a static length (it gives the output rank)")
    kept = tf.boolean_mask(tf.shape(data, tf.int64), tf.logical_not(_listed(data.shape.rank, axes)))
    out = tf.reshape(data, kept)
    out.set_shape([None] * (data.shape.rank - count))
    return [out]


def _clamp(v: int) -> int:
    # Into int32 range, where strided_slice clamps like Python; INT64_MIN as an end with a negative step still
    # means "through index 0" (-BIG + dim < 0 clamps to -1).
    return min(max(v, -BIG), BIG)


@op("Slice")
def _slice(node, x):
    if node.opset < 10:
        # Slice-1: starts, ends and axes are attributes, no steps.
        data, starts, ends = x[0], node.attr("starts"), node.attr("ends")
        axes = node.attr("axes") or range(len(starts))
        return [_static_slice(data, list(axes), starts, ends, [1] * len(starts))]
    data, starts, ends, axes, steps = (x + [None] * 5)[:5]
    starts_v, ends_v, axes_v, steps_v = (_int_list(t) for t in (starts, ends, axes, steps))
    # starts and ends are required inputs; axes and steps are optional (None: not given).
    known_later = (axes is not None and axes_v is None) or (steps is not None and steps_v is None)
    if starts_v is None or ends_v is None or known_later:
        return [_dynamic_slice(data, starts, ends, axes, steps)]
    count = len(starts_v)
    axes_v = list(range(count)) if axes_v is None else axes_v
    steps_v = [1] * count if steps_v is None else steps_v
    return [_static_slice(data, axes_v, starts_v, ends_v, steps_v)]


def _static_slice(data: tf.Tensor, axes: list[int], starts: list, ends: list, steps: list) -> tf.Tensor:
    index = [slice(None)] * data.shape.rank
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        index[axis % data.shape.rank] = slice(_clamp(int(start)), _clamp(int(end)), int(step))
    return data[tuple(index)]


def _dynamic_slice(data, starts, ends, axes, steps):
    # tf.strided_slice clamps out-of-range starts/ends like Python (and ONNX) slicing, also for negative steps.
    rank = data.shape.rank
    sliced = _int_list(axes) if axes is not None else list(range(starts.shape[0] or rank))
    count = tf.shape(starts)[0]
    axes = tf.range(count, dtype=tf.int64) if axes is None else tf.math.floormod(tf.cast(axes, tf.int64), rank)
    steps = tf.ones([count], tf.int64) if steps is None else tf.cast(steps, tf.int64)
    where = axes[:, None]
    begin = tf.tensor_scatter_nd_update(tf.zeros([rank], tf.int64), where, tf.cast(starts, tf.int64))
    end = tf.tensor_scatter_nd_update(tf.shape(data, tf.int64), where, tf.cast(ends, tf.int64))
    stride = tf.tensor_scatter_nd_update(tf.ones([rank], tf.int64), where, steps)
    out = tf.strided_slice(data, begin, end, stride)
    # TF infers no rank from run-time begin/end; the dimensions of axes that are not sliced stay as they are.
    dims = data.shape.as_list() if sliced is not None else [None] * rank
    for axis in sliced or []:
        dims[axis % rank] = None
    out.set_shape(dims)
    return out


@op("Split")
def _split(node, x):
    data, axis = x[0], node.attr("axis", 0) % x[0].shape.rank
    given = x[1] if len(x) > 1 else None
    count = node.attr("num_outputs") or len(node.proto.output)
    sizes = node.attr("split") or (_int_list(given) if given is not None else None)
    if sizes is None and given is not None:
        return list(tf.split(data, tf.cast(given, tf.int64), num=given.shape[0], axis=axis))
    if sizes is None:
        # ONNX: ceil(dim / count) per output, the last one taking what remains.
        dim = _dims(data)[axis]
        chunk = -(-dim // count) if isinstance(dim, int) else (dim + count - 1) // count
        sizes = [chunk] * (count - 1) + [dim - chunk * (count - 1)]
        if not isinstance(dim, int):
            sizes = tf.stack(sizes)
    return list(tf.split(data, sizes, num=len(sizes) if isinstance(sizes, list) else count, axis=axis))


@op("Expand")
def _expand(node, x):
    data, shape = x
    return [tf.broadcast_to(data, tf.broadcast_dynamic_shape(tf.shape(data, tf.int64), tf.cast(shape, tf.int64)))]


@op("Tile")
def _tile(node, x):
    return [tf.tile(x[0], tf.cast(x[1], tf.int64))]


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
    dtype = x[0].dtype
    if dtype not in (tf.int32, tf.int64, tf.float32, tf.float64):
        # TF 2.16 has Range kernels for these four only (float16 has none on CPU: "No OpKernel was registered to
        # support Op 'Range' ... Tidx=DT_HALF"); count in a wider type of the same kind.
        wide = tf.float32 if dtype.is_floating else tf.int64
        return [tf.cast(tf.range(*(tf.cast(t, wide) for t in x[:3])), dtype)]
    return [tf.range(x[0], x[1], x[2])]


@op("DepthToSpace")
def _depth_to_space(node, x):
    size, (b, c, h, w) = node.attr("blocksize"), _dims(x[0])
    depth = c // (size * size)
    if node.attr("mode", b"DCR") == b"CRD":
        split, perm = [b, depth, size, size, h, w], [0, 1, 4, 2, 5, 3]
    else:
        split, perm = [b, size, size, depth, h, w], [0, 3, 4, 1, 5, 2]
    moved = tf.transpose(tf.reshape(x[0], _shape_of(split)), perm)
    return [tf.reshape(moved, _shape_of([b, depth, h * size, w * size]))]


@op("SpaceToDepth")
def _space_to_depth(node, x):
    size, (b, c, h, w) = node.attr("blocksize"), _dims(x[0])
    split = tf.reshape(x[0], _shape_of([b, c, h // size, size, w // size, size]))
    moved = tf.transpose(split, [0, 3, 5, 1, 2, 4])
    return [tf.reshape(moved, _shape_of([b, c * size * size, h // size, w // size]))]


def _shape_of(dims: list) -> tf.Tensor:
    return tf.stack([tf.cast(d, tf.int64) for d in dims])


@op("CenterCropPad")
def _center_crop_pad(node, x):
    data, target = x
    rank = data.shape.rank
    axes = [a % rank for a in (node.attr("axes") or range(rank))]
    sizes = _int_list(target)
    dims = tf.shape(data, tf.int64)
    begin, size, pads = [0] * rank, [-1] * rank, [[0, 0]] * rank
    for i, axis in enumerate(axes):
        want = sizes[i] if sizes is not None else tf.cast(target[i], tf.int64)
        dim = data.shape[axis] if data.shape[axis] is not None and sizes is not None else dims[axis]
        # Crop (target < dim) or pad (target > dim) symmetrically, the odd element going to the end.
        begin[axis], size[axis] = _max0(dim - want) // 2, _min(want, dim)
        grow = _max0(want - dim)
        pads[axis] = [grow // 2, grow - grow // 2]
    cropped = tf.slice(data, _shape_of(begin), _shape_of(size))
    return [tf.pad(cropped, tf.stack([_shape_of(p) for p in pads]))]


def _max0(v: int | tf.Tensor) -> int | tf.Tensor:
    return max(v, 0) if isinstance(v, int) else tf.maximum(v, tf.constant(0, tf.int64))


def _min(a: int | tf.Tensor, b: int | tf.Tensor) -> int | tf.Tensor:
    return min(a, b) if isinstance(a, int) and isinstance(b, int) else tf.minimum(a, b)
