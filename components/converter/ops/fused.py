"""The translator's own fused nodes (``translator.fuse_embedding_lookups``), never in a user's graph."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from torchtfx.components.converter.ops.core import rows_matmul
from torchtfx.components.converter.ops.registry import FUSED_OPS


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


def _linear_rows(node, x):
    """``MatMul(a, w) + b`` (then torch's exact GELU when ``gelu``) over ``a``'s rows as one 2-D product with a
    ``BiasAdd``, TF's remapper's pattern (``converter/linear_fusion.py``); the GELU's ops in ONNX's order."""
    a, w, b = x
    gelu = bool(node.attr("gelu", 0))

    def bias_and_activation(rows: tf.Tensor) -> tf.Tensor:
        y = tf.nn.bias_add(rows, b)
        if gelu:
            one, half, root = (tf.constant(v, y.dtype) for v in (1.0, 0.5, np.sqrt(2.0)))
            y = (y * (tf.math.erf(y / root) + one)) * half
        return y

    return [rows_matmul(a, w, bias_and_activation)]


FUSED_OPS["LinearRows"] = _linear_rows
