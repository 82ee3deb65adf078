"""The core of a network: matrix products, softmax, dropout, constants (normalization: :mod:`.normalization`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf
from onnx import TensorProto, numpy_helper

from torchtfx.components.converter.ops.registry import DTYPES, op, static


def _hardmax(x: tf.Tensor, axis: int) -> tf.Tensor:
    # tf.argmax picks the first of equal maxima, as ONNX's Hardmax does.
    return tf.one_hot(tf.argmax(x, axis), tf.shape(x)[axis], axis=axis, dtype=x.dtype)


_SOFTMAX: dict[str, Callable[[tf.Tensor, int], tf.Tensor]] = {
    "Softmax": lambda x, axis: tf.nn.softmax(x, axis=axis),
    "LogSoftmax": lambda x, axis: tf.nn.log_softmax(x, axis=axis),
    "Hardmax": _hardmax,
}


@op("Softmax", "LogSoftmax", "Hardmax")
def _softmax(node, x):
    data, fn = x[0], _SOFTMAX[node.op_type]
    rank = data.shape.rank
    axis = node.attr("axis", -1 if node.opset >= 13 else 1) % max(rank, 1)
    if node.opset >= 13 or axis == rank - 1:
        return [fn(data, axis)]
    # Before opset 13 the input is coerced to 2-D, [prod(shape[:axis]), prod(shape[axis:])], and the op runs
    # along its rows: over all of the axes from `axis` on at once.
    shape = tf.shape(data)
    rows = tf.reshape(data, tf.stack([tf.reduce_prod(shape[:axis]), tf.reduce_prod(shape[axis:])]))
    return [tf.reshape(fn(rows, 1), shape)]


@op("Gemm")
def _gemm(node, x):
    a, b, c = ([*x, None])[:3]
    y = tf.matmul(a, b, transpose_a=bool(node.attr("transA", 0)), transpose_b=bool(node.attr("transB", 0)))
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    y = y if alpha == 1.0 else alpha * y
    if c is None:
        return [y]
    if c.shape.rank == 2 and c.shape[0] == 1:
        # A [1, N] bias is a row vector: as [N] it broadcasts the same, and TF's remapper, which fuses
        # MatMul + Add into _FusedMatMul's BiasAdd, then does not fail with 'bias must be 1-dimensional'.
        c = tf.reshape(c, [-1])
    return [y + (c if beta == 1.0 else beta * c)]


@op("MatMul")
def _matmul(node, x):
    a, b = x
    if a.shape.rank == 1 and b.shape.rank == 1:
        return [tf.reduce_sum(a * b)]
    if a.shape.rank == 1:
        return [tf.squeeze(tf.matmul(a[None, :], b), -2)]
    if b.shape.rank == 1:
        return [tf.squeeze(tf.matmul(a, b[:, None]), -1)]
    if b.shape.rank == 2 and a.shape.rank is not None and a.shape.rank > 2:
        return [rows_matmul(a, b)]
    return [tf.matmul(a, b)]  # batch dims broadcast as numpy's


def rows_matmul(a: tf.Tensor, b: tf.Tensor, on_rows: Callable[[tf.Tensor], tf.Tensor] | None = None) -> tf.Tensor:
    """``a [..., k] @ b [k, n]`` as one 2-D product over ``a``'s rows. Measured on TF 2.16.2 with oneDNN, ten
    [1, 16, 384] @ [384, 384] layers: 1.29 ms as broadcast BatchMatMulV2, 0.78 ms as 2-D MatMul between reshapes
    (0.73 ms with the bias fused); 45.7 against 41.9 ms at [32, 128, 384]. A transformer's every linear layer
    exports to such a node: all-MiniLM-L6-v2 served at batch 1 x 16 tokens spent 8.7 of 15.6 ms of op time in
    BatchMatMulV2, most of it in these. ``on_rows``: what follows on the 2-D product before it is reshaped back (a
    fused linear layer's bias and activation, ``fused.py``)."""
    n = b.shape[1] if b.shape[1] is not None else tf.shape(b)[1]
    rows = tf.matmul(tf.reshape(a, tf.stack([-1, tf.shape(b)[0]])), b)
    rows = rows if on_rows is None else on_rows(rows)
    return tf.reshape(rows, tf.concat([tf.shape(a)[:-1], [n]], 0))


@op("Einsum")
def _einsum(node, x):
    """``tf.einsum`` with every ``...`` spelled out in letters of its own. Measured on TF 2.16.2 with oneDNN (the
    x86 default): ``tf.einsum("...a,ac->...c", x[2,3,4,8], w[8,5])`` is off by about 13 where the same
    equation with explicit letters, or oneDNN off, is exact (an einops einsum in tab-transformer-pytorch's
    residual streams exports to such a node)."""
    equation = node.attr("equation")
    equation = (equation.decode() if isinstance(equation, bytes) else equation).replace(" ", "")
    if "..." not in equation:
        return [tf.einsum(equation, *x)]
    equation, inputs = _explicit_ellipsis(equation, list(x))
    return [tf.einsum(equation, *inputs)]


def _explicit_ellipsis(equation: str, inputs: list) -> tuple[str, list]:
    """``equation`` with ``...`` replaced by unused letters (right-aligned, numpy's broadcasting), and the inputs
    with their ``...`` dimensions broadcast to one shape where several inputs have them."""
    lhs, _, rhs = equation.partition("->")
    terms = lhs.split(",")
    counts = [t.shape.rank - (len(term) - 3) if "..." in term else 0 for term, t in zip(terms, inputs, strict=True)]
    width = max(counts)
    letters = "".join(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in equation)[:width]
    carriers = [i for i, term in enumerate(terms) if "..." in term]
    if len(carriers) > 1:
        inputs = _broadcast_ellipsis(inputs, terms, counts, width, carriers)
        counts = [width if i in carriers else 0 for i in range(len(terms))]
    explicit = [term.replace("...", letters[width - n :]) for term, n in zip(terms, counts, strict=True)]
    if not _:  # implicit output: the ellipsis dims, then the letters used once, sorted (numpy's rule)
        once = sorted(c for c in set(lhs) if c.isalpha() and lhs.count(c) == 1)
        rhs = "..." + "".join(once)
    return ",".join(explicit) + "->" + rhs.replace("...", letters), inputs


def _broadcast_ellipsis(inputs: list, terms: list[str], counts: list[int], width: int, carriers: list[int]) -> list:
    """Each carrier's ``...`` dims given ``width`` leading entries (ones prepended) and broadcast to one shape."""
    shapes = []
    for i in carriers:
        start = terms[i].index("...")
        dims = tf.shape(inputs[i], tf.int64)
        shapes.append((start, tf.concat([tf.ones([width - counts[i]], tf.int64), dims[start : start + counts[i]]], 0)))
    common = shapes[0][1]
    for _, shape in shapes[1:]:
        common = tf.broadcast_dynamic_shape(common, shape)
    out = list(inputs)
    for i, (start, _) in zip(carriers, shapes, strict=True):
        dims = tf.shape(inputs[i], tf.int64)
        target = tf.concat([dims[:start], common, dims[start + counts[i] :]], 0)
        padded = tf.concat([dims[:start], tf.ones([width - counts[i]], tf.int64), dims[start:]], 0)
        out[i] = tf.broadcast_to(tf.reshape(inputs[i], padded), target)
    return out


@op("Dropout")
def _dropout(node, x):
    data = x[0]
    if node.opset < 10:  # the mask had the data's type before opset 10
        return [data, tf.ones_like(data)]
    ratio, training = ([*x, None, None])[1:3]
    known = static(training)
    if training is None or (known is not None and not known.any()):  # inference: the identity
        return [data, tf.ones_like(data, tf.bool)]
    ratio = node.constant(np.float32(0.5)) if ratio is None else ratio
    ratio = tf.cast(ratio, data.dtype)
    training = tf.cast(tf.reshape(training, []), tf.bool)
    seed = node.attr("seed")
    drawn = tf.random.uniform(tf.shape(data), dtype=data.dtype, seed=seed)
    mask = tf.logical_or(tf.logical_not(training), drawn >= ratio)
    scale = tf.where(training, 1 / (1 - ratio), tf.ones_like(ratio))
    return [tf.where(mask, data * scale, tf.zeros_like(data)), mask]


@op("RandomUniformLike", "RandomUniform")
def _random_uniform(node, x):
    """Draws in [low, high) of the input's shape (``RandomUniformLike``) or ``shape``, by the spec. ONNX's
    expected outputs are numpy draws no runtime reproduces; torchtfx's exporter writes this op only for a model
    whose eval output its determinism check proved independent of the draw (a ``uniform_`` on an ignored
    branch), so which numbers TF draws does not reach a served output."""
    dtype = node.attr("dtype")
    if x:
        shape, dtype = tf.shape(x[0]), DTYPES[dtype] if dtype is not None else x[0].dtype
    else:
        shape, dtype = list(node.attr("shape")), DTYPES[dtype if dtype is not None else TensorProto.FLOAT]
    dtype = node.float_dtype if dtype == tf.float32 else dtype
    seed = None if node.attr("seed") is None else int(node.attr("seed"))
    return [tf.random.uniform(shape, node.attr("low", 0.0), node.attr("high", 1.0), dtype=dtype, seed=seed)]


@op("ConstantOfShape")
def _constant_of_shape(node, x):
    value = node.attr("value")
    fill = numpy_helper.to_array(value).reshape(-1)[0] if value is not None else np.float32(0)
    return [tf.fill(tf.cast(x[0], tf.int64), node.constant(np.asarray(fill)))]


_LIST_VALUES = {
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_int": np.int64,
    "value_ints": np.int64,
    "value_string": np.object_,
    "value_strings": np.object_,
}


@op("Constant")
def _constant(node, x):
    if "value" in node.attrs:
        return [node.constant(numpy_helper.to_array(node.attrs["value"]))]
    if "sparse_value" in node.attrs:
        return [node.constant(_dense(node.attrs["sparse_value"]))]
    for key, dtype in _LIST_VALUES.items():
        if key in node.attrs:
            return [node.constant(np.array(node.attrs[key], dtype))]
    raise ValueError(f"Constant without a supported value attribute: {sorted(node.attrs)}")


def _dense(sparse) -> np.ndarray:
    """A SparseTensorProto as a numpy array: its indices are [NNZ] linear or [NNZ, rank] coordinates."""
    values, indices = numpy_helper.to_array(sparse.values), numpy_helper.to_array(sparse.indices)
    dense = np.zeros(tuple(sparse.dims), values.dtype)
    if indices.ndim == 1:
        dense.reshape(-1)[indices] = values
    else:
        dense[tuple(indices.T)] = values
    return dense
