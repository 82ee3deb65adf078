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
from onnx import TensorProto, numpy_helper

from torchtfx.components.torch_trainer.export.tf_ops import OPS, Node

logger = logging.getLogger(__name__)

_VARIABLE_MIN_SIZE = 64  # smaller initializers (shape vectors, scalars) stay constants: TF folds them


class ConversionError(RuntimeError):
    """The ONNX graph could not be turned into a TensorFlow network."""


class UnsupportedOpsError(ConversionError):
    def __init__(self, unsupported: dict[str, list[str]]) -> None:
        self.unsupported = unsupported
        listed = "; ".join(f"{op} (nodes {', '.join(nodes[:5])}{', ...' if len(nodes) > 5 else ''})"
                           for op, nodes in sorted(unsupported.items()))  # fmt: skip
        super().__init__(f"ONNX ops outside the translator's op set: {listed}")


def unsupported_ops(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Op type -> names of the nodes the translator has no handler for."""
    found: dict[str, list[str]] = {}
    for node in model.graph.node:
        if node.op_type not in OPS or node.domain not in ("", "ai.onnx"):
            found.setdefault(node.op_type if not node.domain else f"{node.domain}.{node.op_type}", []).append(
                node.name or node.output[0]
            )
    return found


class OnnxGraphModule(tf.Module):
    """``module(dense, categorical) -> [outputs...]`` computing the ONNX graph, inputs in graph order.

    ``compute_dtype=tf.float16``: a reduced-precision network. Every float32 weight is stored as float16, float
    constants and ``Cast(to=FLOAT)`` are float16, float32 inputs are cast to float16 on entry and float32
    outputs back on exit, so callers still see float32; integer paths (ids, indices, shapes) are unchanged.
    """

    def __init__(self, model: onnx.ModelProto, compute_dtype: tf.DType = tf.float32) -> None:
        super().__init__(name="onnx_graph")
        unsupported = unsupported_ops(model)
        if unsupported:
            raise UnsupportedOpsError(unsupported)
        self._float = tf.as_dtype(compute_dtype)
        if self._float not in (tf.float32, tf.float16):
            raise ValueError(f"compute_dtype {self._float.name} is not float32 or float16")
        graph = model.graph
        self._nodes = [Node(n, self._float) for n in graph.node]
        initializers = {t.name: self._in_compute_dtype(numpy_helper.to_array(t)) for t in graph.initializer}
        self._inputs = [i.name for i in graph.input if i.name not in initializers]
        self._outputs = [o.name for o in graph.output]
        # Declared float32 in the graph: cast on entry and exit (a float16 network only).
        declared = [*graph.input, *graph.output]
        self._float_io = {v.name for v in declared if v.type.tensor_type.elem_type == TensorProto.FLOAT}
        self._constants, self._variable_index, variables = {}, {}, []
        for name, value in initializers.items():
            if value.size >= _VARIABLE_MIN_SIZE and value.dtype.kind == "f":
                self._variable_index[name] = len(variables)
                variables.append(tf.Variable(value, trainable=False, name=re.sub(r"[^A-Za-z0-9_.]", "_", name)))
            else:
                self._constants[name] = value
        self.weights = variables  # tracked by tf.Module: saved with the SavedModel
        logger.info(
            "Translated ONNX graph: %s nodes, %s op types, %s weight tensors, computing in %s",
            len(self._nodes), len({n.op_type for n in self._nodes}), len(variables), self._float.name,
        )  # fmt: skip

    def _in_compute_dtype(self, value: np.ndarray) -> np.ndarray:
        if self._float == tf.float32 or value.dtype != np.float32:
            return value
        half = value.astype(np.float16)
        overflow = int(np.count_nonzero(np.isinf(half) & np.isfinite(value)))
        if overflow:
            logger.warning("%s float32 weight values exceed float16's range (65504) and become inf", overflow)
        return half

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
        for node in self._nodes:
            args = [env[i] if i else None for i in node.proto.input]
            try:
                outputs = OPS[node.op_type](node, args)
            except Exception as err:
                raise ConversionError(
                    f"ONNX node {node.name or node.proto.output[0]!r} ({node.op_type}) could not be translated: "
                    f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
                ) from err
            for name, value in zip(node.proto.output, outputs, strict=False):
                if name:
                    env[name] = value
        if half:
            return [tf.cast(env[o], tf.float32) if o in self._float_io else env[o] for o in self._outputs]
        return [env[o] for o in self._outputs]
