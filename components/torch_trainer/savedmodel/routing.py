"""How often FP16 changes a mixture of experts' routing: the top-k expert choices, FP32 vs float16.

A routed model picks experts with ``torch.topk``, so its exported graph has TopK nodes whose ``Indices`` output
is the choice. FP16 rounds the router's scores; where two experts' scores are closer than float16's resolution
(about 1e-3 relative), the choice can change, and that token then goes through a different expert: the served
model computes another function for it, even where the final probability barely moves (a near-tie means both
experts were almost equally preferred, and the gate renormalization hides much of the change).

The figure is measured on the materialized eval split with a probe graph: the exported ONNX graph with each
TopK node's indices as an extra output, translated twice by torchtfx's converter (float32 and float16). On
GPUs, where the served variant is TF-TRT's, the figure is still measured with the float16 translation: TF-TRT
keeps no intermediate output to compare (its engines fuse the router), and it rounds the same float16 way.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator

import numpy as np
import onnx
import tensorflow as tf
from onnx import TensorProto, helper

from torchtfx.components.converter.savedmodel import input_specs
from torchtfx.components.converter.translator import OnnxGraphModule
from torchtfx.components.torch_trainer.handoff.shards import PADDING_ID, ArraySplit, eval_batch_size

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RoutingReport:
    """FP32 vs FP16 top-k choices over the eval split.

    A *decision* is one top-k selection the graph makes: one per routed token and TopK node (a token routed by
    two MoE layers makes two), padding positions included where the model routes them (the zoo ``text_moe``
    routes them with a uniform softmax, a tie resolved by index alike in both precisions, so they never change).
    A decision *changes* when the SET of its k chosen experts differs (the order of the k is not compared: the
    gates are renormalized over the set).
    """

    decisions: int
    changed: int
    rate: float
    nodes: int  # TopK nodes measured


def routing_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The main graph's TopK nodes (subgraphs of If/Loop are not searched)."""
    return [node for node in model.graph.node if node.op_type == "TopK" and len(node.output) > 1 and node.output[1]]


def probe_graph(model: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> onnx.ModelProto:
    """``model`` with each node's indices (int64) as an extra graph output, after its own outputs."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    declared = {o.name for o in probe.graph.output}
    for node in nodes:
        if node.output[1] not in declared:
            probe.graph.output.append(helper.make_tensor_value_info(node.output[1], TensorProto.INT64, None))
    return probe


def _indices_function(model: onnx.ModelProto, nodes: list[onnx.NodeProto], dtype: tf.DType):
    """``f(*inputs) -> [indices per node]`` of the probe graph translated in ``dtype``."""
    probe = probe_graph(model, nodes)
    network = OnnxGraphModule(probe, compute_dtype=dtype)
    where = [[o.name for o in probe.graph.output].index(n.output[1]) for n in nodes]

    def indices(*inputs: tf.Tensor) -> list[tf.Tensor]:
        outputs = network(*inputs)
        return [outputs[i] for i in where]

    return tf.function(indices, input_signature=input_specs(probe.graph, network.input_names), autograph=False)


def _batches(split: ArraySplit) -> Iterator[tuple[np.ndarray, ...]]:
    """``forward``'s arguments over the whole split, rows ordered by their token count so that a batch's padding
    (each batch is cut to its longest row) is its rows' own, not that of one long text among short ones."""
    size = eval_batch_size(split)
    if split.sequences:
        tokens = sum(np.count_nonzero(np.asarray(ids) != PADDING_ID, axis=1) for ids in split.sequences)
        order = np.argsort(tokens, kind="stable")
    else:
        order = np.arange(len(split))
    for start in range(0, len(split), size):
        yield split.model_inputs(np.sort(order[start : start + size]))


def _changed(fp32: np.ndarray, fp16: np.ndarray, axis: int) -> tuple[int, int]:
    """(decisions, decisions whose set of chosen indices differs) of one TopK output."""
    if fp32.shape != fp16.shape:
        raise ValueError(f"TopK indices of shape {fp32.shape} in float32 but {fp16.shape} in float16")
    full, half = (np.sort(np.moveaxis(x, axis % x.ndim, -1), axis=-1) for x in (fp32, fp16))
    differs = np.any(full != half, axis=-1)
    return differs.size, int(np.count_nonzero(differs))


def measure_routing(model: onnx.ModelProto, split: ArraySplit) -> RoutingReport | None:
    """FP32 vs float16 top-k choices of ``model`` (the translatable, repaired graph) on every row of ``split``;
    None when the graph has no TopK (no routing to compare)."""
    nodes = routing_nodes(model)
    if not nodes:
        return None
    full, half = (_indices_function(model, nodes, dtype) for dtype in (tf.float32, tf.float16))
    axes = [next((a.i for a in node.attribute if a.name == "axis"), -1) for node in nodes]
    counts = np.zeros((len(nodes), 2), np.int64)  # per node: decisions, changed
    for inputs in _batches(split):
        for i, (a, b) in enumerate(zip(full(*inputs), half(*inputs), strict=True)):
            counts[i] += _changed(a.numpy(), b.numpy(), axes[i])
    for node, (decisions, changed) in zip(nodes, counts, strict=True):
        logger.info(
            "FP16 routing at %s: %s of %s top-k choices change", node.name or node.output[1], changed, decisions
        )
    decisions, changed = (int(x) for x in counts.sum(axis=0))
    return RoutingReport(decisions, changed, changed / decisions if decisions else 0.0, len(nodes))
