"""What the translator's graph rewrites read of an ONNX graph: each tensor's producer and consumer count, the
constant values (initializers and ``Constant`` nodes), the ranks declared, a node's attributes."""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper


def attr(node: onnx.NodeProto, key: str, default):
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == key), default)


def graph_context(graph: onnx.GraphProto) -> dict:
    producer = {o: n for n in graph.node for o in n.output if o}
    consumers: dict[str, int] = {}  # graph outputs count as consumers
    users: dict[str, list[onnx.NodeProto]] = {}  # the nodes reading each tensor, once per node
    for node in graph.node:
        for name in node.input:
            consumers[name] = consumers.get(name, 0) + 1
        for name in dict.fromkeys(node.input):
            users.setdefault(name, []).append(node)
    for output in graph.output:
        consumers[output.name] = consumers.get(output.name, 0) + 1
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and not node.domain and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    ranks = {
        v.name: len(v.type.tensor_type.shape.dim)
        for v in [*graph.input, *graph.value_info]
        if v.type.tensor_type.HasField("shape")
    }
    initializers = {t.name: constants[t.name] for t in graph.initializer}
    return {
        "producer": producer,
        "consumers": consumers,
        "users": users,
        "constants": constants,
        "initializers": initializers,
        "ranks": ranks,
    }
