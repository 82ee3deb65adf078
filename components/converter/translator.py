"""The ONNX graph as a ``tf.Module``: every node translated into TF ops by ONNX semantics.

Measured against onnx2tf on an FT-Transformer export: onnx2tf guesses NCHW -> NHWC layouts for the
3-D ``[batch, tokens, d]`` tensors and fails (``Dimensions must be equal``), then calls ``sys.exit``; a
direct translation of the same graph needs no layout at all, since ONNX and TF agree on row-major
tensors and numpy broadcasting. Weights become non-trainable ``tf.Variable``s (saved in the SavedModel's
variables, not as graph constants, which keeps the graph small and under protobuf's 2 GiB limit).
"""

from __future__ import annotations

import logging
import re

import numpy as np
import onnx
import tensorflow as tf
from onnx import TensorProto, helper, numpy_helper

from torchtfx.components.converter.graph_context import attr, graph_context
from torchtfx.components.converter.linear_fusion import fuse_linear_layers
from torchtfx.components.converter.ops import FUSED_DOMAIN, OPS, Node, NodeError, evaluate

logger = logging.getLogger(__name__)

# A fused lookup's table up to this size is stored twice over, which wraps negative ids for free (see
# fuse_embedding_lookups); a larger one keeps one copy and wraps its ids with a select.
_WRAPPED_TABLE_MAX_BYTES = 16 * 2**20
# A network whose float weights add up to at most this many bytes keeps them all as graph constants; a larger
# one keeps each float weight of 64 or more values in a tf.Variable (the SavedModel's variables), which keeps
# its graph under protobuf's 2 GiB limit. Measured on the taxi MLP (65k weights) through TF's C API, row
# sharded, ms per call at batch 1 / 32 / 1024: constants 0.074 / 0.090 / 0.392, variables 0.098 / 0.100 /
# 0.446. oneDNN caches constant weights in its own layout, and the row-shard cond's branches capture each
# variable through a Switch op. From Python the gain is hidden by the call's floor (0.452 against 0.480 ms at
# batch 1). Measured and not kept: Gemm weights stored pre-transposed (no transB) 0.486 / 1.396 from Python,
# Eigen instead of oneDNN (TF_ENABLE_ONEDNN_OPTS=0) slower still (matmuls 414 us against 342 at 1024).
_CONSTANT_WEIGHTS_MAX_BYTES = 64 * 2**20
_VARIABLE_MIN_SIZE = 64  # smaller initializers (shape vectors, scalars) stay constants: TF folds them


class ConversionError(RuntimeError):
    """The ONNX graph could not be turned into a TensorFlow network."""


class UnsupportedOpsError(ConversionError):
    def __init__(self, unsupported: dict[str, list[str]]) -> None:
        self.unsupported = unsupported
        listed = "; ".join(
            f"{op} (nodes {', '.join(nodes[:5])}{', ...' if len(nodes) > 5 else ''})"
            for op, nodes in sorted(unsupported.items())
        )
        super().__init__(f"ONNX ops outside the translator's op set: {listed}")


def unsupported_ops(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Op type -> names of the nodes the translator has no handler for, in subgraphs (If/Loop/Scan bodies) too."""
    found: dict[str, list[str]] = {}
    for node in _all_nodes(model.graph):
        if node.op_type not in OPS or node.domain not in ("", "ai.onnx"):
            found.setdefault(node.op_type if not node.domain else f"{node.domain}.{node.op_type}", []).append(
                node.name or node.output[0]
            )
    return found


def _all_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                yield from _all_nodes(sub)


def _static_scalar(name: str, constants: dict[str, np.ndarray]) -> int | None:
    value = constants.get(name)
    return int(value) if value is not None and value.ndim == 0 and value.dtype.kind in "iu" else None


def _lookup_of(concat_input: str, ctx: dict) -> tuple[str, int, str] | None:
    """``(ids, column, table)`` when ``concat_input`` is ``Gather(table, Gather(ids, column, axis=1))``: one
    feature's embedding lookup as torch exports ``nn.Embedding(ids[:, column])``, each node used once."""
    producer, consumers, constants, initializers, ranks = (
        ctx[k] for k in ("producer", "consumers", "constants", "initializers", "ranks")
    )
    outer = producer.get(concat_input)
    if outer is None or outer.op_type != "Gather" or outer.domain or len(outer.input) != 2:
        return None
    table, picked = outer.input
    if attr(outer, "axis", 0) != 0 or initializers.get(table) is None or initializers[table].ndim != 2:
        return None
    inner = producer.get(picked)
    if inner is None or inner.op_type != "Gather" or inner.domain or attr(inner, "axis", 0) not in (1, -1):
        return None
    ids, column = inner.input[0], _static_scalar(inner.input[1], constants)
    if column is None or ranks.get(ids) != 2 or column < 0:
        return None
    if consumers.get(picked) != 1 or consumers.get(concat_input) != 1:  # both nodes are dropped
        return None
    return ids, column, table


def fuse_embedding_lookups(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """Every run of per-feature embedding lookups that one ``Concat`` joins (``Gather(table_k, ids[:, k])``,
    torch's export of a list of ``nn.Embedding``) becomes one ``torchtfx.EmbeddingConcat`` node, translated by
    ``tf_ops._embedding_concat``: the ids of all tables range-checked and wrapped by one op each, split by
    one ``Unpack``, one row gather per table. The user's model and the ONNX file are unchanged: only the
    graph handed to the translator is rewritten. Returns (model, lookups fused).

    Measured on the taxi MLP's 13 tables: the traced TF graph fell from 288 to 85 ops; each lookup had been a
    column gather, 4 ops wrapping negative ids (ONNX semantics) and the table gather.

    Each table up to ``_WRAPPED_TABLE_MAX_BYTES`` is stored twice over (``[table; table]``, initializer
    ``<table>/wrapped``): its lookup is then ``gather(wrapped, id + rows)``, which reads row ``id mod rows``
    for every id in ``[-rows, rows)`` and refuses every other id, ONNX's semantics in one scalar add.
    Measured at batch 1024 through TF's C API (Session::Run, as TF Serving calls the graph): the network took
    0.635 ms with the ids wrapped by ``where(ids < 0, ids + rows, ids)`` on all ids at once, 0.564 ms with
    this, 0.537 ms with no wrap at all; onnxruntime 0.392 ms.
    """
    graph = model.graph
    ctx = graph_context(graph)
    nodes, fused, dropped = [], 0, set()
    for node in graph.node:
        # One run per Concat (the zoo's models have no more); any other run stays as it was.
        runs = _lookup_runs(node, ctx)[:1] if node.op_type == "Concat" and not node.domain else []
        if not runs:
            nodes.append(node)
            continue
        start, lookups = runs[0]
        nodes.append(_fused_concat(node, start, lookups, ctx))
        fused += len(lookups)
        for position in range(start, start + len(lookups)):
            outer = ctx["producer"][node.input[position]]
            dropped.update({id(outer), id(ctx["producer"][outer.input[1]])})
    if not fused:
        return model, 0
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(n for n in nodes if id(n) not in dropped)
    _store_wrapped_tables(out.graph, ctx["initializers"])
    return out, fused


def _store_wrapped_tables(graph: onnx.GraphProto, initializers: dict[str, np.ndarray]) -> None:
    """Point every fused node's small tables at their ``[table; table]`` copy (see
    :func:`fuse_embedding_lookups`), then drop the initializers no node reads any more."""
    added: set[str] = set()
    for node in graph.node:
        if node.domain != FUSED_DOMAIN or node.op_type != "EmbeddingConcat":
            continue
        wrapped = []
        for position in range(1, 1 + len(attr(node, "rows", []))):
            table = node.input[position]
            small = initializers[table].nbytes <= _WRAPPED_TABLE_MAX_BYTES
            if small and f"{table}/wrapped" not in added:
                graph.initializer.append(
                    numpy_helper.from_array(np.concatenate([initializers[table]] * 2), f"{table}/wrapped")
                )
                added.add(f"{table}/wrapped")
            if small:
                node.input[position] = f"{table}/wrapped"
            wrapped.append(int(small))
        node.attribute.append(helper.make_attribute("wrapped", wrapped))
    used = {name for node in graph.node for name in node.input} | {v.name for v in [*graph.output, *graph.input]}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)


def _lookup_runs(concat: onnx.NodeProto, ctx: dict) -> list[tuple[int, list[tuple[str, int, str]]]]:
    """(first position, lookups) of each run of 2 or more adjacent lookups on the same ids in ``concat``."""
    if attr(concat, "axis", None) not in (1, -1):
        return []
    runs: list[tuple[int, list]] = []
    for position, name in enumerate(concat.input):
        lookup = _lookup_of(name, ctx) if name else None
        if lookup and runs and runs[-1][0] + len(runs[-1][1]) == position and runs[-1][1][0][0] == lookup[0]:
            runs[-1][1].append(lookup)
        elif lookup:
            runs.append((position, [lookup]))
    return [(start, lookups) for start, lookups in runs if len(lookups) >= 2]


def _fused_concat(concat: onnx.NodeProto, start: int, lookups: list[tuple[str, int, str]], ctx: dict) -> onnx.NodeProto:
    """The ``EmbeddingConcat`` node that replaces ``concat``: inputs (ids, tables..., other concat inputs)."""
    tables = [table for _, _, table in lookups]
    inputs = [lookups[0][0], *tables, *concat.input[:start], *concat.input[start + len(lookups) :]]
    return helper.make_node(
        "EmbeddingConcat",
        inputs,
        list(concat.output),
        name=f"{concat.name or 'concat'}/fused_embeddings",
        domain=FUSED_DOMAIN,
        axis=1,
        at=start,
        columns=[c for _, c, _ in lookups],
        rows=[ctx["initializers"][t].shape[0] for t in tables],
    )


# Float inputs that are sizes, not data: (op, input position). They stay float32 in a float16 network, where a
# scale of 1/3 would round to 0.33325 and floor(3 * scale) give an output size of 0.
_SIZE_INPUTS = {("Resize", 2), ("Upsample", 1)}


def _exact_float_inputs(graph: onnx.GraphProto) -> set[str]:
    """Names of the constants and initializers a float16 network must keep in float32 (:data:`_SIZE_INPUTS`)."""
    return {
        name
        for node in graph.node
        for position, name in enumerate(node.input)
        if name and (node.op_type, position) in _SIZE_INPUTS
    }


class OnnxGraphModule(tf.Module):
    """``module(dense, categorical) -> [outputs...]`` computing the ONNX graph, inputs in graph order.

    ``compute_dtype=tf.float16``: a reduced-precision network. Every float32 weight is stored as float16, float
    constants and ``Cast(to=FLOAT)`` are float16, float32 inputs are cast to float16 on entry and float32
    outputs back on exit, so callers still see float32; integer paths (ids, indices, shapes) are unchanged.
    """

    def __init__(self, model: onnx.ModelProto, compute_dtype: tf.DType = tf.float32, fuse: bool = True) -> None:
        super().__init__(name="onnx_graph")
        unsupported = unsupported_ops(model)
        if unsupported:
            raise UnsupportedOpsError(unsupported)
        if fuse:
            model, fused = fuse_embedding_lookups(model)
            if fused:
                logger.info("Fused %s per-feature embedding lookups into one gather", fused)
            model, fused = fuse_linear_layers(model)
            if fused:
                logger.info("Fused %s linear layers into 2-D products with their bias", fused)
        self._float = tf.as_dtype(compute_dtype)
        if self._float not in (tf.float32, tf.float16):
            raise ValueError(f"compute_dtype {self._float.name} is not float32 or float16")
        graph = model.graph
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
        exact = _exact_float_inputs(graph)
        self._nodes = [Node(n, tf.float32 if set(n.output) & exact else self._float, opset) for n in graph.node]
        initializers = {
            t.name: numpy_helper.to_array(t) if t.name in exact else self._in_compute_dtype(numpy_helper.to_array(t))
            for t in graph.initializer
        }
        self._inputs = [i.name for i in graph.input if i.name not in initializers]
        self._outputs = [o.name for o in graph.output]
        # Declared float32 in the graph: cast on entry and exit (a float16 network only).
        declared = [*graph.input, *graph.output]
        self._float_io = {v.name for v in declared if v.type.tensor_type.elem_type == TensorProto.FLOAT}
        self._constants: dict[str, np.ndarray] = {}
        self._variable_index: dict[str, int] = {}
        variables: list[tf.Variable] = []
        float_bytes = sum(v.nbytes for v in initializers.values() if v.dtype.kind == "f")
        as_variables = float_bytes > _CONSTANT_WEIGHTS_MAX_BYTES
        for name, value in initializers.items():
            if as_variables and value.size >= _VARIABLE_MIN_SIZE and value.dtype.kind == "f":
                self._variable_index[name] = len(variables)
                variables.append(tf.Variable(value, trainable=False, name=re.sub(r"[^A-Za-z0-9_.]", "_", name)))
            else:
                self._constants[name] = value
        self.weights = variables  # tracked by tf.Module: saved with the SavedModel
        logger.info(
            "Translated ONNX graph: %s nodes, %s op types, %.1f MiB of weights as %s, computing in %s",
            len(self._nodes),
            len({n.op_type for n in self._nodes}),
            float_bytes / 2**20,
            "variables" if as_variables else "graph constants",
            self._float.name,
        )

    def _in_compute_dtype(self, value: np.ndarray) -> np.ndarray:
        if self._float == tf.float32 or value.dtype != np.float32:
            return value
        half = value.astype(np.float16)
        overflow = int(np.count_nonzero(np.isinf(half) & np.isfinite(value)))
        if overflow:
            logger.warning("%s float32 weight values exceed float16's range (65504) and become inf", overflow)
        return half

    @property
    def weight_dtypes(self) -> set[tf.DType]:
        """The dtypes of the float weights, variables and graph constants alike."""
        values = [*(v.dtype for v in self.weights), *(tf.as_dtype(c.dtype) for c in self._constants.values())]
        return {d for d in values if d.is_floating}

    @property
    def compute_dtype(self) -> tf.DType:
        return self._float

    @property
    def input_names(self) -> list[str]:
        return list(self._inputs)

    def __call__(self, *inputs: tf.Tensor) -> list[tf.Tensor]:
        env: dict[str, tf.Tensor] = dict(zip(self._inputs, inputs, strict=True))
        half = self._float != tf.float32
        if half:
            env.update({k: tf.cast(v, self._float) for k, v in env.items() if k in self._float_io})
        for name, index in self._variable_index.items():
            env[name] = self.weights[index]
        for name, value in self._constants.items():
            env[name] = tf.constant(value)
        try:
            env = evaluate(self._nodes, env)
        except NodeError as err:
            raise ConversionError(str(err)) from err
        if half:
            return [tf.cast(env[o], tf.float32) if o in self._float_io else env[o] for o in self._outputs]
        return [env[o] for o in self._outputs]
