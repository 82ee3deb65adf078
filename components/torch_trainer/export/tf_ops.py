"""ONNX operators as TensorFlow ops, by ONNX semantics (opset 13-17): no layout guessing.

Each handler takes the node (for its attributes) and its inputs as tensors (``None`` for an omitted
optional input) and returns the node's outputs in order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf
from onnx import helper, numpy_helper

Handler = Callable[["Node", list], list]
OPS: dict[str, Handler] = {}
# The translator's own fused nodes (translator.fuse_embedding_lookups), never in a user's graph.
FUSED_DOMAIN = "torchtfx"
FUSED_OPS: dict[str, Handler] = {}
_BIG = 2**31 - 1

_DTYPES = {1: tf.float32, 2: tf.uint8, 3: tf.int8, 5: tf.int16, 6: tf.int32, 7: tf.int64, 9: tf.bool, 10: tf.float16,
           11: tf.float64}  # fmt: skip


class Node:
    """An ONNX node; ``float_dtype`` is what the graph's float32 computes in (float16: a reduced-precision
    network, whose constants and ``Cast(to=FLOAT)`` results are float16 too)."""

    def __init__(self, proto, float_dtype: tf.DType = tf.float32) -> None:
        self.proto, self.name, self.op_type = proto, proto.name, proto.op_type
        self.attrs = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
        self.float_dtype = float_dtype

    def attr(self, key: str, default=None):
        return self.attrs.get(key, default)

    def constant(self, value: np.ndarray) -> tf.Tensor:
        """``value`` as a tensor, float32 values in :attr:`float_dtype`."""
        if value.dtype == np.float32 and self.float_dtype != tf.float32:
            value = value.astype(self.float_dtype.as_numpy_dtype)
        return tf.constant(value)


def op(*names: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for name in names:
            OPS[name] = fn
        return fn

    return register


def static(t) -> np.ndarray | None:
    return None if t is None else tf.get_static_value(t)


def _ints(t, what: str) -> list[int]:
    value = static(t)
    if value is None:
        raise ValueError(f"{what} must be a constant")
    return [int(v) for v in np.atleast_1d(value)]


def _unary(fn):
    return lambda node, x: [fn(x[0])]


for _name, _fn in {
    "Identity": tf.identity, "Sqrt": tf.sqrt, "Erf": tf.math.erf, "Relu": tf.nn.relu, "Sigmoid": tf.sigmoid,
    "Tanh": tf.tanh, "Exp": tf.exp, "Log": tf.math.log, "Neg": tf.negative, "Abs": tf.abs, "Floor": tf.floor,
    "Ceil": tf.math.ceil, "Reciprocal": tf.math.reciprocal, "Not": tf.logical_not, "Softplus": tf.nn.softplus,
    "Sign": tf.sign,
}.items():  # fmt: skip
    OPS[_name] = _unary(_fn)
for _name, _fn in {
    "Add": tf.add, "Sub": tf.subtract, "Mul": tf.multiply, "Equal": tf.equal, "Less": tf.less,
    "Greater": tf.greater, "LessOrEqual": tf.less_equal, "GreaterOrEqual": tf.greater_equal,
    "And": tf.logical_and, "Or": tf.logical_or,
}.items():  # fmt: skip
    OPS[_name] = lambda node, x, fn=_fn: [fn(x[0], x[1])]


@op("Div")
def _div(node, x):
    a, b = x
    return [tf.truncatediv(a, b) if a.dtype.is_integer else a / b]


@op("Pow")
def _pow(node, x):
    return [tf.pow(x[0], tf.cast(x[1], x[0].dtype))]


@op("Dropout")
def _dropout(node, x):
    return [x[0], tf.ones_like(x[0], tf.bool)]


@op("LeakyRelu")
def _leaky_relu(node, x):
    return [tf.nn.leaky_relu(x[0], node.attr("alpha", 0.01))]


@op("Elu")
def _elu(node, x):
    alpha = node.attr("alpha", 1.0)
    return [tf.where(x[0] > 0, x[0], alpha * (tf.exp(x[0]) - 1))]


@op("Gelu")
def _gelu(node, x):
    return [tf.nn.gelu(x[0], approximate=node.attr("approximate", b"none") in (b"tanh", "tanh"))]


@op("HardSigmoid")
def _hard_sigmoid(node, x):
    return [tf.clip_by_value(node.attr("alpha", 0.2) * x[0] + node.attr("beta", 0.5), 0.0, 1.0)]


@op("Softmax", "LogSoftmax")
def _softmax(node, x):
    fn = tf.nn.softmax if node.op_type == "Softmax" else tf.nn.log_softmax
    return [fn(x[0], axis=node.attr("axis", -1))]


@op("Gemm")
def _gemm(node, x):
    a, b, c = ([*x, None])[:3]
    y = tf.matmul(a, b, transpose_a=bool(node.attr("transA", 0)), transpose_b=bool(node.attr("transB", 0)))
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    y = y if alpha == 1.0 else alpha * y
    return [y if c is None else y + (c if beta == 1.0 else beta * c)]


@op("MatMul")
def _matmul(node, x):
    a, b = x
    if a.shape.rank == 1:
        return [tf.squeeze(tf.matmul(a[None, :], b), -2)]
    if b.shape.rank == 1:
        return [tf.squeeze(tf.matmul(a, b[:, None]), -1)]
    return [tf.matmul(a, b)]


@op("Einsum")
def _einsum(node, x):
    equation = node.attr("equation")
    return [tf.einsum((equation.decode() if isinstance(equation, bytes) else equation).replace(" ", ""), *x)]


@op("LayerNormalization")
def _layer_norm(node, x):
    data, scale, bias = ([*x, None])[:3]
    axis = node.attr("axis", -1) % data.shape.rank
    axes = list(range(axis, data.shape.rank))
    mean = tf.reduce_mean(data, axes, keepdims=True)
    centered = data - mean
    inv_std = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axes, keepdims=True) + node.attr("epsilon", 1e-5))
    y = centered * inv_std * scale
    return [y if bias is None else y + bias, mean, inv_std]


@op("BatchNormalization")
def _batch_norm(node, x):
    data, scale, bias, mean, var = x[:5]
    shape = [-1] + [1] * (data.shape.rank - 2)  # parameters run along axis 1 (channels)
    factor = tf.reshape(scale * tf.math.rsqrt(var + node.attr("epsilon", 1e-5)), shape)
    return [(data - tf.reshape(mean, shape)) * factor + tf.reshape(bias, shape)]


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
    axes = list(node.attr("axes")) if node.attr("axes") is not None else _ints(x[1], "Unsqueeze axes")
    rank = data.shape.rank + len(axes)
    for axis in sorted(a % rank for a in axes):
        data = tf.expand_dims(data, axis)
    return [data]


@op("Squeeze")
def _squeeze(node, x):
    axes = node.attr("axes")
    if axes is None and len(x) > 1 and x[1] is not None:
        axes = _ints(x[1], "Squeeze axes")
    return [tf.squeeze(x[0], axis=[a % x[0].shape.rank for a in axes] if axes is not None else None)]


def _clamp(v: int) -> int | None:
    return None if v >= _BIG or v <= -_BIG else v


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
    sizes = node.attr("split") or (_ints(sizes, "Split sizes") if sizes is not None else None)
    return list(tf.split(data, sizes or len(node.proto.output), axis=node.attr("axis", 0)))


@op("Expand")
def _expand(node, x):
    data, shape = x
    return [tf.broadcast_to(data, tf.broadcast_dynamic_shape(tf.shape(data, tf.int64), tf.cast(shape, tf.int64)))]


@op("Tile")
def _tile(node, x):
    return [tf.tile(x[0], x[1])]


@op("Where")
def _where(node, x):
    return [tf.where(*x)]


@op("Cast")
def _cast(node, x):
    dtype = _DTYPES[node.attr("to")]
    return [tf.cast(x[0], node.float_dtype if dtype == tf.float32 else dtype)]


@op("Shape")
def _shape(node, x):
    start, end = node.attr("start", 0), node.attr("end")
    if x[0].shape.is_fully_defined():
        return [tf.constant(x[0].shape.as_list()[start:end], tf.int64)]
    return [tf.shape(x[0], tf.int64)[start:end]]


@op("Size")
def _size(node, x):
    return [tf.size(x[0], tf.int64)]


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

_REDUCE = {"ReduceMean": tf.reduce_mean, "ReduceSum": tf.reduce_sum, "ReduceMax": tf.reduce_max,
           "ReduceMin": tf.reduce_min, "ReduceProd": tf.reduce_prod}  # fmt: skip


@op(*_REDUCE)
def _reduce(node, x):
    axes = node.attr("axes")
    if axes is None and len(x) > 1 and x[1] is not None:
        axes = _ints(x[1], f"{node.op_type} axes")
    if not axes and node.attr("noop_with_empty_axes", 0):
        return [x[0]]
    return [_REDUCE[node.op_type](x[0], axis=list(axes) if axes else None, keepdims=bool(node.attr("keepdims", 1)))]


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


@op("Range")
def _range(node, x):
    if x[0].dtype == tf.float16:
        # TF 2.16 has no float16 Range: tf.range asserts on the dtype, and the raw op has no CPU kernel
        # ("No OpKernel was registered to support Op 'Range' ... Tidx=DT_HALF"); count in float32.
        return [tf.cast(tf.range(*(tf.cast(t, tf.float32) for t in x[:3])), tf.float16)]
    return [tf.range(x[0], x[1], x[2])]


@op("ConstantOfShape")
def _constant_of_shape(node, x):
    value = node.attr("value")
    fill = numpy_helper.to_array(value).reshape(-1)[0] if value is not None else np.float32(0)
    return [tf.fill(tf.cast(x[0], tf.int64), node.constant(np.asarray(fill)))]


@op("Constant")
def _constant(node, x):
    if "value" in node.attrs:
        return [node.constant(numpy_helper.to_array(node.proto.attribute[0].t))]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):  # fmt: skip
        if key in node.attrs:
            return [node.constant(np.array(node.attrs[key], dtype))]
    raise ValueError(f"Constant without a supported value attribute: {sorted(node.attrs)}")


def _embedding_concat(node, x):
    """``Concat(others[:at] + [table_k[ids[:, column_k]] for k] + others[at:])``: the ids split by one
    ``Unpack``, then one row gather per table and one concat.

    ONNX ``Gather`` semantics are kept: an id in ``[-rows, 0)`` counts from the table's end, one outside
    ``[-rows, rows)`` fails the call, as each table's own gather would. A table marked ``wrapped`` is stored
    twice over (``[table; table]``, see ``translator.fuse_embedding_lookups``) and read at ``id + rows``;
    any other table's ids are wrapped by a select.

    Measured on the taxi MLP's 13 tables (ms per call of the lookups + concat alone, batch 1 / 32 / 1024):
    as exported (2 gathers and 4 ops of id wrap per table) 0.180 / 0.190 / 0.535; fused 0.154 / 0.166 /
    0.546. One gather on the tables flattened end to end (element indices ``base + id * width + j``) was
    0.138 / 0.185 / 1.626, and on the tables padded to one width, then compacted by a column gather,
    0.136 / 0.159 / 1.050: TF gathers single elements one memcpy each, so both lose at batch 1024. Padded to
    one width and gathered at once with the padding folded into the next Gemm as zero weights (no
    compaction): 0.731 ms for the whole network at 1024 against 0.564 (the Gemm grows from 133 to 211 inputs).
    """
    count = len(node.attr("rows"))
    ids, tables, others = x[0], x[1 : 1 + count], x[1 + count :]
    columns, rows = (np.asarray(node.attr(k), np.int64) for k in ("columns", "rows"))
    wrapped = node.attr("wrapped", [0] * count)
    ids = tf.cast(ids, tf.int64)
    if ids.shape.rank != 2 or ids.shape[1] != len(columns) or list(columns) != list(range(len(columns))):
        ids = tf.gather(ids, columns, axis=1)
    lookups = []
    for table, column, size, doubled in zip(tables, tf.unstack(ids, axis=1), rows, wrapped, strict=True):
        # An id outside [-rows, rows) stays outside the rows gathered from and the gather refuses it.
        row = column + int(size) if doubled else tf.where(column < 0, column + int(size), column)
        lookups.append(tf.gather(table, row))
    at = node.attr("at")
    return [tf.concat([*others[:at], *lookups, *others[at:]], axis=node.attr("axis"))]


FUSED_OPS["EmbeddingConcat"] = _embedding_concat
