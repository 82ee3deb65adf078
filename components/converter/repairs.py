"""Named repairs of the exported ONNX graph, each logged when it fires.

- ``batch_constants`` (at export, :func:`derive_batch_constants`): shape constants that the legacy
  exporter baked from the trace batch (``len(x)`` in a ``reshape``) become ``Shape(input)[0] * k``.
- before conversion, :data:`GRAPH_REPAIRS` (none today).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

logger = logging.getLogger(__name__)

BATCH_CONSTANTS = "batch_constants"
LENGTH_CONSTANTS = "length_constants"


@dataclasses.dataclass(frozen=True)
class Repair:
    name: str
    what: str
    apply: Callable[[onnx.ModelProto], int]  # rewrites the graph in place, returns how many nodes it rewrote


class _Names:
    """Fresh, unique value and node names for inserted nodes."""

    def __init__(self, graph: onnx.GraphProto, prefix: str) -> None:
        self._used = {v for n in graph.node for v in (*n.input, *n.output, n.name)}
        self._used |= {t.name for t in graph.initializer} | {i.name for i in graph.input}
        self._prefix, self._count = prefix, 0

    def __call__(self, hint: str) -> str:
        while True:
            self._count += 1
            name = f"{self._prefix}/{hint}_{self._count}"
            if name not in self._used:
                self._used.add(name)
                return name


def _const(names: _Names, nodes: list, value: np.ndarray, hint: str = "c") -> str:
    out = names(hint)
    nodes.append(helper.make_node("Constant", [], [out], name=names("Constant"), value=numpy_helper.from_array(value)))
    return out


def _node(names: _Names, nodes: list, op: str, inputs: list[str], output: str | None = None, **attrs) -> str:
    out = output or names(op)
    nodes.append(helper.make_node(op, inputs, [out], name=names(op), **attrs))
    return out


# -- batch_constants ------------------------------------------------------------------------------------------
def graph_constants(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return values


def _size_multiples(a: np.ndarray, b: np.ndarray, size_a: int, size_b: int) -> np.ndarray | None:
    """Per element the k where ``a == k * size_a + c`` and ``b == k * size_b + c`` for one integer c (0 where
    ``a == b``), else None: a constant that follows the traced size, offset included (a [CLS] token in front of
    the sequence makes the attention's reshape hold length + 1)."""
    if a.shape != b.shape or a.dtype != b.dtype or not np.issubdtype(a.dtype, np.integer) or np.array_equal(a, b):
        return None
    differs = a != b
    step = (a.astype(np.int64) - b.astype(np.int64)), size_a - size_b
    ok = step[0] % step[1] == 0
    if not np.all(ok[differs]):
        return None
    return np.where(differs, step[0] // step[1], 0).astype(a.dtype)


def derive_batch_constants(
    first: onnx.ModelProto,
    second: onnx.ModelProto,
    batch_first: int,
    batch_second: int,
    input_name: str | None = None,
    axis: int = 0,
) -> tuple[onnx.ModelProto, int]:
    """``first`` with every constant that follows the trace batch (compared with ``second``, traced at
    another batch) computed from the batch dimension of the first graph input instead. With ``input_name`` and
    ``axis`` (e.g. a token input's axis 1), any other dimension: the sequence length baked into the trace
    (repair ``length_constants``)."""
    repair = BATCH_CONSTANTS if input_name is None else LENGTH_CONSTANTS
    if [n.op_type for n in first.graph.node] != [n.op_type for n in second.graph.node]:
        logger.warning("repair %s: the two traces differ in structure; not applied", repair)
        return first, 0
    a_values, b_values = graph_constants(first), graph_constants(second)
    multiples = {}
    for name, a in a_values.items():
        k = _size_multiples(a, b_values[name], batch_first, batch_second) if name in b_values else None
        if k is not None:
            multiples[name] = k
    if not multiples:
        return first, 0
    model = onnx.ModelProto()
    model.CopyFrom(first)
    graph, names = model.graph, _Names(model.graph, repair)
    nodes: list = []
    source = input_name or graph.input[0].name
    shape = _node(names, nodes, "Shape", [source], start=axis, end=axis + 1)  # int64 [1]: the batch (or length)
    for name, k in multiples.items():
        base = (a_values[name] - k * batch_first).astype(k.dtype)  # the offset c (the whole value where k is 0)
        batch = (
            shape
            if k.dtype == np.int64
            else _node(names, nodes, "Cast", [shape], to=helper.np_dtype_to_tensor_dtype(k.dtype))
        )
        if k.ndim == 0:
            batch = _node(names, nodes, "Squeeze", [batch, _const(names, nodes, np.array([0], np.int64))])
        scaled = _node(names, nodes, "Mul", [batch, _const(names, nodes, k)])
        _node(names, nodes, "Add", [scaled, _const(names, nodes, base)], output=name)
        logger.info("repair %s: %s = %s[%s] * %s + %s", repair, name, source, axis, k.tolist(), base.tolist())
    kept_init = [t for t in graph.initializer if t.name not in multiples]
    kept_nodes = [n for n in graph.node if not (n.op_type == "Constant" and n.output[0] in multiples)]
    del graph.initializer[:], graph.node[:]
    graph.initializer.extend(kept_init)
    graph.node.extend(nodes + kept_nodes)
    kept_inputs = [i for i in graph.input if i.name not in multiples]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    return model, len(multiples)


# Repairs applied to every graph before conversion. Empty since the translator has GatherElements by ONNX's
# semantics (the former gather_elements rewrite into a flat Gather needed static trailing dimensions).
GRAPH_REPAIRS: tuple[Repair, ...] = ()


def apply_graph_repairs(model: onnx.ModelProto) -> tuple[onnx.ModelProto, tuple[str, ...]]:
    """A repaired copy of ``model`` and the names of the repairs that fired."""
    repaired = onnx.ModelProto()
    repaired.CopyFrom(model)
    fired = []
    for repair in GRAPH_REPAIRS:
        count = repair.apply(repaired)
        if count:
            logger.info("repair %s fired on %s node(s): %s", repair.name, count, repair.what)
            fired.append(repair.name)
    return repaired, tuple(fired)
