"""Named repairs of the exported ONNX graph, each logged when it fires.

- ``batch_constants`` (at export, :func:`derive_batch_constants`): shape constants that the legacy
  exporter baked from the trace batch (``len(x)`` in a ``reshape``) become ``Shape(input)[0] * k``.
- ``gather_elements`` (before conversion, :data:`GRAPH_REPAIRS`): ``GatherElements`` (``torch.gather``)
  becomes a ``Gather`` on the flattened data with computed flat indices, ops the translator has.
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
GATHER_ELEMENTS = "gather_elements"


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
def _constants(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return values


def _batch_multiples(a: np.ndarray, b: np.ndarray, batch_a: int, batch_b: int) -> np.ndarray | None:
    """Per element k where ``a == k * batch_a`` and ``b == k * batch_b`` (0 where equal), else None."""
    if a.shape != b.shape or a.dtype != b.dtype or not np.issubdtype(a.dtype, np.integer) or np.array_equal(a, b):
        return None
    differs = a != b
    k_a, k_b = a // batch_a, b // batch_b
    ok = (a % batch_a == 0) & (b % batch_b == 0) & (k_a == k_b) & (k_a != 0)
    if not np.all(ok[differs]):
        return None
    return np.where(differs, k_a, 0).astype(a.dtype)


def derive_batch_constants(
    first: onnx.ModelProto, second: onnx.ModelProto, batch_first: int, batch_second: int
) -> tuple[onnx.ModelProto, int]:
    """``first`` with every constant that follows the trace batch (compared with ``second``, traced at
    another batch) computed from the batch dimension of the first graph input instead."""
    if [n.op_type for n in first.graph.node] != [n.op_type for n in second.graph.node]:
        logger.warning("repair %s: the two traces differ in structure; not applied", BATCH_CONSTANTS)
        return first, 0
    a_values, b_values = _constants(first), _constants(second)
    multiples = {}
    for name, a in a_values.items():
        k = _batch_multiples(a, b_values[name], batch_first, batch_second) if name in b_values else None
        if k is not None:
            multiples[name] = k
    if not multiples:
        return first, 0
    model = onnx.ModelProto()
    model.CopyFrom(first)
    graph, names = model.graph, _Names(model.graph, BATCH_CONSTANTS)
    nodes: list = []
    shape = _node(names, nodes, "Shape", [graph.input[0].name], start=0, end=1)  # int64 [1]: the batch
    for name, k in multiples.items():
        base = np.where(k != 0, 0, a_values[name]).astype(k.dtype)
        batch = (
            shape
            if k.dtype == np.int64
            else _node(names, nodes, "Cast", [shape], to=helper.np_dtype_to_tensor_dtype(k.dtype))
        )
        if k.ndim == 0:
            batch = _node(names, nodes, "Squeeze", [batch, _const(names, nodes, np.array([0], np.int64))])
        scaled = _node(names, nodes, "Mul", [batch, _const(names, nodes, k)])
        _node(names, nodes, "Add", [scaled, _const(names, nodes, base)], output=name)
        logger.info("repair %s: %s = batch * %s + %s", BATCH_CONSTANTS, name, k.tolist(), base.tolist())
    kept_init = [t for t in graph.initializer if t.name not in multiples]
    kept_nodes = [n for n in graph.node if not (n.op_type == "Constant" and n.output[0] in multiples)]
    del graph.initializer[:], graph.node[:]
    graph.initializer.extend(kept_init)
    graph.node.extend(nodes + kept_nodes)
    kept_inputs = [i for i in graph.input if i.name not in multiples]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    return model, len(multiples)


# -- gather_elements ------------------------------------------------------------------------------------------
def _static_shape(model: onnx.ModelProto, name: str) -> list[int | None] | None:
    for info in (*model.graph.value_info, *model.graph.input, *model.graph.output):
        if info.name == name and info.type.tensor_type.HasField("shape"):
            return [d.dim_value if d.HasField("dim_value") else None for d in info.type.tensor_type.shape.dim]
    return None


def _gather_elements_nodes(names: _Names, node, data_shape: list[int | None], index_rank: int) -> list:
    """GatherElements(data, indices, axis) as Gather(flatten(data), sum_d coord_d * stride_d)."""
    data, indices = node.input
    rank = len(data_shape)
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0) % rank
    nodes: list = []
    i64 = lambda v: _const(names, nodes, np.array(v, np.int64))  # noqa: E731
    index_shape = _node(names, nodes, "Shape", [indices])
    # Negative indices count from the end of the gathered axis, as in GatherElements.
    axis_size = (
        i64(data_shape[axis])
        if data_shape[axis]
        else _node(names, nodes, "Gather", [_node(names, nodes, "Shape", [data]), i64(axis)])
    )
    wrapped = _node(names, nodes, "Add", [indices, axis_size])
    negative = _node(names, nodes, "Less", [indices, i64(0)])
    flat = None
    for d in range(rank):
        if d == axis:
            coord = _node(names, nodes, "Where", [negative, wrapped, indices])
        else:
            size = _node(names, nodes, "Gather", [index_shape, i64(d)])
            steps = _node(names, nodes, "Range", [i64(0), size, i64(1)])
            coord = _node(names, nodes, "Reshape", [steps, i64([-1 if j == d else 1 for j in range(index_rank)])])
        stride = int(np.prod(data_shape[d + 1 :], dtype=np.int64))
        term = coord if stride == 1 else _node(names, nodes, "Mul", [coord, i64(stride)])
        flat = term if flat is None else _node(names, nodes, "Add", [flat, term])
    flat_data = _node(names, nodes, "Reshape", [data, i64([-1])])
    _node(names, nodes, "Gather", [flat_data, flat], output=node.output[0], axis=0)
    return nodes


def rewrite_gather_elements(model: onnx.ModelProto) -> int:
    targets = [n for n in model.graph.node if n.op_type == "GatherElements"]
    if not targets:
        return 0
    inferred = onnx.shape_inference.infer_shapes(model)
    names, rewritten, new_nodes = _Names(model.graph, GATHER_ELEMENTS), 0, []
    for node in model.graph.node:
        data_shape = _static_shape(inferred, node.input[0]) if node.op_type == "GatherElements" else None
        # The strides need the data's trailing dimensions; a leading (batch) dimension may be dynamic.
        if node.op_type != "GatherElements" or data_shape is None or None in data_shape[1:]:
            new_nodes.append(node)
            continue
        new_nodes += _gather_elements_nodes(names, node, data_shape, len(data_shape))
        rewritten += 1
        logger.info("repair %s: node %s rewritten into Gather on flat indices", GATHER_ELEMENTS, node.name)
    del model.graph.node[:]
    model.graph.node.extend(new_nodes)
    return rewritten


GRAPH_REPAIRS = (
    Repair(GATHER_ELEMENTS, "GatherElements (torch.gather) into Gather on flattened data", rewrite_gather_elements),
)


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
