"""Small ONNX files that do not convert, as issue #41 found them, and models with external data."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _value(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _save(path, nodes, initializers=(), x_shape=(None, 2)) -> None:
    graph = helper.make_graph(nodes, "g", [_value("x", list(x_shape))], [_value("y", None)], list(initializers))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _nested_if(depth: int) -> onnx.GraphProto:
    """``depth`` Ifs, each one's then-branch holding the next (150 protobuf levels for 50)."""
    if depth == 0:
        return helper.make_graph([helper.make_node("Identity", ["x"], ["out0"])], "b0", [], [_value("out0", None)])
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], [f"e{depth}"])], "e", [], [_value(f"e{depth}", None)])
    nodes = [
        helper.make_node("Constant", [], [f"c{depth}"], value=numpy_helper.from_array(np.array(True))),
        helper.make_node("If", [f"c{depth}"], [f"out{depth}"], then_branch=_nested_if(depth - 1), else_branch=leaf),
    ]
    return helper.make_graph(nodes, f"b{depth}", [], [_value(f"out{depth}", None)])


def _shape(values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), "shape")


def unconvertible(path, kind: str) -> None:
    """Files that do not convert, as issue #41 found them (each printed a traceback and exited 1); "" is a
    model that converts (``y = relu(x)``)."""
    if kind == "":
        _save(path, [helper.make_node("Relu", ["x"], ["y"])])
    elif kind in ("truncated", "empty", "garbage"):
        _save(path, [helper.make_node("Relu", ["x"], ["y"])])
        data = path.read_bytes()
        path.write_bytes({"truncated": data[: len(data) // 2], "empty": b"", "garbage": b"\x8f\xff" * 150}[kind])
    elif kind == "50-deep If":
        _save(path, [*_nested_if(50).node, helper.make_node("Identity", ["out50"], ["y"])])
    elif kind == "impossible Reshape":  # runs at no batch size; only a run can tell, the shape being dynamic
        _save(path, [helper.make_node("Reshape", ["x", "shape"], ["y"])], [_shape([5, 7])], (None, None))
    else:  # onnxruntime cannot allocate [10^6, batch, 10^6] floats (12 TB at batch 3): a real allocation failure
        _save(path, [helper.make_node("Expand", ["x", "shape"], ["y"])], [_shape([10**6, 1, 10**6])], (None, 1))


UNCONVERTIBLE = {
    "truncated": "cannot be read as an ONNX model",
    "empty": "is empty, not an ONNX model",
    "garbage": "cannot be read as an ONNX model",
    "50-deep If": "deeper than protobuf's limit",
    "impossible Reshape": r"running onnxruntime on inputs x\[3, 3\] failed: RuntimeException: .*cannot be reshaped",
    "allocation failure": r"running onnxruntime on inputs x\[3, 1\] failed: .*allocate memory",
}


def external_model(folder, location: str) -> None:
    """``y = x + w`` with ``w`` (2 floats) stored in the external file ``location``."""
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2], data_location=TensorProto.EXTERNAL)
    for key, value in {"location": location, "offset": "0", "length": "8"}.items():
        weight.external_data.add(key=key, value=value)
    folder.mkdir(exist_ok=True)
    _save(folder / "m.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [weight])
