"""An ONNX file read for conversion: refused in one line when it is not a model, and its external data read
only from inside the model's own folder.

Measured (onnx 1.17): ``onnx.load`` follows an external-data ``location`` that is a symlink to any file and
reads its bytes into the graph, so a model folder could make ``convert`` copy a file from anywhere on the
machine into ``saved_model.pb``. Every location is resolved (symlinks followed) and must stay inside the folder
that holds the model. ``onnx.load`` raises protobuf's bare ``DecodeError`` on a truncated or garbage file and on
graphs nested deeper than protobuf's recursion limit (100 messages: a 50-deep ``If`` is 150), and returns an
empty ``ModelProto`` for an empty file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import AttributeProto, GraphProto, TensorProto

from torchtfx.components.converter.translator import ConversionError

_FIX = "export the model again (torch.onnx.export / onnx.save) and check it with onnx.checker.check_model"


def load(path: Path) -> onnx.ModelProto:
    """The model in ``path`` with its external data loaded from its own folder; :class:`ConversionError` when
    it is not a readable ONNX model or its external data lies outside that folder."""
    if not path.is_file():
        raise ConversionError(f"{path} is not a file; name the ONNX model to convert")
    if path.stat().st_size == 0:
        raise ConversionError(f"{path} is empty, not an ONNX model. Fix: {_FIX}")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except DecodeError:
        raise ConversionError(
            f"{path} cannot be read as an ONNX model: the file is truncated, is not ONNX, or nests subgraphs (If/"
            f"Loop bodies) deeper than protobuf's limit of 100 levels. Fix: {_FIX}"
        ) from None
    if not model.HasField("graph") or not model.graph.output:
        raise ConversionError(f"{path} holds no ONNX graph with outputs (not an ONNX model). Fix: {_FIX}")
    _load_external_data(model, path)
    return model


def _load_external_data(model: onnx.ModelProto, path: Path) -> None:
    folder = path.resolve().parent
    for tensor in external_tensors(model):
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        resolved = (folder / location).resolve()
        if not location or not resolved.is_relative_to(folder):
            raise ConversionError(
                f"{path}: the external data of tensor {tensor.name!r} is at {location!r}, which resolves to "
                f"{resolved}, outside the model's folder {folder}; the converter reads external data only from "
                "that folder. Fix: copy the data file into the model's folder (not a symlink out of it) and name "
                "it by its relative path"
            )
        if not resolved.is_file():
            raise ConversionError(
                f"{path}: the external data file {location!r} of tensor {tensor.name!r} is "
                f"missing. Fix: put it beside the model, in {folder}"
            )
    try:
        onnx.load_external_data_for_model(model, str(folder))
    except (OSError, ValueError) as err:
        raise ConversionError(f"{path}: its external data cannot be read: {err}. Fix: {_FIX}") from None


def external_tensors(model: onnx.ModelProto) -> Iterator[TensorProto]:
    """Every tensor stored outside the file: initializers and constant attributes, in subgraphs and functions."""
    graphs = [model.graph]
    nodes = [node for function in model.functions for node in function.node]
    while graphs or nodes:
        if graphs:
            graph = graphs.pop()
            tensors = [*graph.initializer, *(s.values for s in graph.sparse_initializer)]
            yield from (t for t in tensors if t.data_location == TensorProto.EXTERNAL)
            nodes.extend(graph.node)
            continue
        for attribute in nodes.pop().attribute:
            yield from (t for t in _attribute_tensors(attribute) if t.data_location == TensorProto.EXTERNAL)
            graphs.extend(_attribute_graphs(attribute))


def _attribute_tensors(attribute: AttributeProto) -> list[TensorProto]:
    return [
        attribute.t,
        *attribute.tensors,
        attribute.sparse_tensor.values,
        *(s.values for s in attribute.sparse_tensors),
    ]


def _attribute_graphs(attribute: AttributeProto) -> list[GraphProto]:
    return [attribute.g, *attribute.graphs] if attribute.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) else []
