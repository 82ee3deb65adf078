"""The translator's operator registry: ONNX op type -> handler, and what every handler shares.

Each handler takes the node (for its attributes and the model's opset) and its inputs as tensors (``None`` for
an omitted optional input) and returns the node's outputs in order. Handlers live in this package's modules,
one per operator family; importing :mod:`torchtfx.components.converter.ops` registers them all.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf
from onnx import TensorProto, helper, numpy_helper

Handler = Callable[["Node", list], list]
OPS: dict[str, Handler] = {}
# The translator's own fused nodes (translator.fuse_embedding_lookups), never in a user's graph.
FUSED_DOMAIN = "torchtfx"
FUSED_OPS: dict[str, Handler] = {}
BIG = 2**31 - 1

# ONNX element type -> TF dtype, for the types the translator computes in.
DTYPES: dict[int, tf.DType] = {
    TensorProto.FLOAT: tf.float32,
    TensorProto.UINT8: tf.uint8,
    TensorProto.INT8: tf.int8,
    TensorProto.UINT16: tf.uint16,
    TensorProto.INT16: tf.int16,
    TensorProto.INT32: tf.int32,
    TensorProto.INT64: tf.int64,
    TensorProto.BOOL: tf.bool,
    TensorProto.FLOAT16: tf.float16,
    TensorProto.DOUBLE: tf.float64,
    TensorProto.UINT32: tf.uint32,
    TensorProto.UINT64: tf.uint64,
}


class Node:
    """An ONNX node. ``float_dtype`` is what the graph's float32 computes in (float16: a reduced-precision
    network, whose constants and ``Cast(to=FLOAT)`` results are float16 too); ``opset`` is the model's
    default-domain opset, for semantics that changed between opsets; ``scope`` the tensors computed so far, which
    a control-flow node's subgraphs may read (:func:`run_subgraph`)."""

    def __init__(self, proto, float_dtype: tf.DType = tf.float32, opset: int = 17) -> None:
        self.proto, self.name, self.op_type = proto, proto.name, proto.op_type
        self.attrs = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
        self.float_dtype = float_dtype
        self.opset = opset
        self.scope: dict[str, tf.Tensor] = {}

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


def ints(t, what: str) -> list[int]:
    value = static(t)
    if value is None:
        raise ValueError(f"{what} must be a constant")
    return [int(v) for v in np.atleast_1d(value)]


def unary(fn):
    return lambda node, x: [fn(x[0])]


class NodeError(RuntimeError):
    """A node's handler failed: names the node and its op type."""


def evaluate(nodes: list[Node], env: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """Run ``nodes`` in order over ``env`` (names -> tensors), adding each node's outputs to it."""
    for node in nodes:
        args = [env[i] if i else None for i in node.proto.input]
        node.scope = env
        try:
            outputs = (FUSED_OPS if node.proto.domain == FUSED_DOMAIN else OPS)[node.op_type](node, args)
        except NodeError:
            raise
        except Exception as err:
            first = str(err).splitlines()[0] if str(err) else ""
            raise NodeError(
                f"ONNX node {node.name or node.proto.output[0]!r} ({node.op_type}) could not be "
                f"translated: {type(err).__name__}: {first}"
            ) from err
        for name, value in zip(node.proto.output, outputs, strict=False):
            if name:
                env[name] = value
    return env


def run_subgraph(node: Node, graph, inputs: list[tf.Tensor]) -> list[tf.Tensor]:
    """The outputs of ``graph`` (an ``If``/``Loop``/``Scan`` body) on ``inputs``, the outer scope visible."""
    env = dict(node.scope)
    env.update({t.name: node.constant(numpy_helper.to_array(t)) for t in graph.initializer})
    env.update(zip((i.name for i in graph.input), inputs, strict=False))
    nodes = [Node(n, node.float_dtype, node.opset) for n in graph.node]
    env = evaluate(nodes, env)
    return [env[o.name] for o in graph.output]
