"""Recurrent (LSTM/GRU/RNN) and control-flow (If/Loop/Scan) translation against onnxruntime, traced once with
unknown batch and sequence dimensions and run at several sizes: cases ONNX's backend suite leaves out
(bidirectional, sequence_lens, clip, activations with alpha/beta, layout 1, shapes that change per iteration)."""

from __future__ import annotations

import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tensorflow as tf
import torch
from onnx import TensorProto, helper, numpy_helper

from torchtfx.components.converter.translator import OnnxGraphModule

F = TensorProto.FLOAT


def _vi(name: str, elem_type: int = F, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def _model(nodes, inputs, outputs, initializers=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _traced(model: onnx.ModelProto, specs: list[tf.TensorSpec], dtype: tf.DType = tf.float32):
    network = OnnxGraphModule(model, compute_dtype=dtype)
    return tf.function(lambda *a: network(*a), autograph=False).get_concrete_function(*specs)


def _session(model: onnx.ModelProto):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda feeds: session.run(None, feeds)


def _check(model, specs, feeds_list, dtype=tf.float32, rtol=1e-4, atol=1e-5, reference=None):
    fn = _traced(model, specs, dtype)
    reference = reference or _session(model)
    for feeds in feeds_list:
        expected = reference(feeds)
        got = fn(*(tf.constant(v) for v in feeds.values()))
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert g.shape == e.shape
            np.testing.assert_allclose(g.numpy(), e, rtol=rtol, atol=atol)


def _weights(rng, num_dir: int, gates: int, hidden: int, size: int, peepholes: bool = False) -> dict:
    w = {
        "W": rng.normal(size=(num_dir, gates * hidden, size)),
        "R": rng.normal(size=(num_dir, gates * hidden, hidden)),
        "B": rng.normal(size=(num_dir, 2 * gates * hidden)),
    }
    if peepholes:
        w["P"] = rng.normal(size=(num_dir, 3 * hidden))
    return {k: (0.5 * v).astype(np.float32) for k, v in w.items()}


def _recurrent_case(op_type, gates, layout, n_states, **attrs):
    """A model of one ``op_type`` node with sequence_lens and initial states as graph inputs; its input specs and
    feeds at two sequence lengths and batch sizes."""
    rng = np.random.default_rng(0)
    hidden, size = 5, 3
    num_dir = 2 if attrs.get("direction") == "bidirectional" else 1
    weights = _weights(rng, num_dir, gates, hidden, size, peepholes=op_type == "LSTM")
    state_names = ["initial_h", "initial_c"][:n_states]
    names = ["X", "W", "R", "B", "sequence_lens", *state_names] + (["P"] if op_type == "LSTM" else [])
    outputs = ["Y", "Y_h", "Y_c"][: 1 + n_states]
    node = helper.make_node(op_type, names, outputs, hidden_size=hidden, layout=layout, **attrs)
    inputs = [_vi("X"), _vi("sequence_lens", TensorProto.INT32, None)]
    inputs += [_vi(n) for n in state_names]
    model = _model([node], inputs, [_vi(o) for o in outputs], weights.items())
    specs = [tf.TensorSpec([None, None, size]), tf.TensorSpec([None], tf.int32)]
    specs += [tf.TensorSpec([num_dir, None, hidden] if not layout else [None, num_dir, hidden])] * n_states
    feeds_list = []
    for steps, batch in ((4, 3), (7, 1)):
        feeds = {
            "X": rng.normal(size=(steps, batch, size) if not layout else (batch, steps, size)).astype(np.float32),
            "sequence_lens": rng.integers(1, steps + 1, batch).astype(np.int32),
        }
        for n in state_names:
            feeds[n] = rng.normal(size=(num_dir, batch, hidden) if not layout else (batch, num_dir, hidden))
            feeds[n] = feeds[n].astype(np.float32)
        feeds_list.append(feeds)
    return model, specs, feeds_list


def _batch_major_reference(model: onnx.ModelProto):
    """onnxruntime refuses layout 1: the layout-0 node on transposed inputs, its outputs transposed back."""
    time_major = onnx.ModelProto()
    time_major.CopyFrom(model)
    next(a for a in time_major.graph.node[0].attribute if a.name == "layout").i = 0
    run = _session(time_major)

    def reference(feeds):
        swapped = {k: v if v.ndim == 1 else v.transpose(1, 0, 2) for k, v in feeds.items()}
        y, *states = run(swapped)
        return [y.transpose(2, 0, 1, 3), *(s.transpose(1, 0, 2) for s in states)]

    return reference


# activation_alpha/beta: consumed in order by the activations that take them; RNN's per direction.
_GRU_ACTIVATIONS = {
    "activations": ["HardSigmoid", "LeakyRelu"],
    "activation_alpha": [0.3, 0.2],
    "activation_beta": [0.4],
}
_RNN_ACTIVATIONS = {
    "activations": ["LeakyRelu", "ScaledTanh"],
    "activation_alpha": [0.2, 0.8],
    "activation_beta": [0, 1.3],
}


@pytest.mark.parametrize(
    ("op_type", "gates", "layout", "attrs"),
    [
        ("LSTM", 4, 0, {"direction": "bidirectional"}),
        ("LSTM", 4, 1, {"direction": "reverse", "clip": 0.7, "input_forget": 1}),
        ("GRU", 3, 0, {"direction": "bidirectional", "linear_before_reset": 1, "clip": 0.9}),
        ("GRU", 3, 1, {"direction": "reverse", **_GRU_ACTIVATIONS}),
        ("RNN", 1, 0, {"direction": "bidirectional", **_RNN_ACTIVATIONS}),
        ("RNN", 1, 1, {"activations": ["Softsign"]}),
    ],
)
def test_recurrent_matches_onnxruntime_with_unknown_batch_and_length(op_type, gates, layout, attrs):
    n_states = 2 if op_type == "LSTM" else 1
    model, specs, feeds_list = _recurrent_case(op_type, gates, layout, n_states, **attrs)
    _check(model, specs, feeds_list, reference=_batch_major_reference(model) if layout else None)


def test_lstm_float16_network_stays_close():
    model, specs, feeds_list = _recurrent_case("LSTM", 4, 0, 2, direction="forward")
    _check(model, specs, feeds_list, dtype=tf.float16, rtol=2e-2, atol=2e-2)


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning", "ignore:Exporting a model to ONNX with a batch_size")
@pytest.mark.parametrize("module", [torch.nn.LSTM, torch.nn.GRU])
def test_torch_exported_recurrent_layer(module):
    torch.manual_seed(0)
    layer = module(input_size=4, hidden_size=6, num_layers=2, batch_first=True, bidirectional=True).eval()
    buffer = io.BytesIO()
    torch.onnx.export(
        layer,
        (torch.randn(2, 5, 4),),
        buffer,
        input_names=["x"],
        output_names=["y", "h"],
        dynamic_axes={"x": {0: "batch", 1: "time"}, "y": {0: "batch", 1: "time"}, "h": {1: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    model = onnx.load_from_string(buffer.getvalue())
    assert module.__name__ in {n.op_type for n in model.graph.node}
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.normal(size=(b, t, 4)).astype(np.float32)} for b, t in ((3, 2), (1, 9))]
    _check(model, [tf.TensorSpec([None, None, 4])], feeds)


def test_if_with_a_computed_condition_and_branches_of_different_shapes():
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [], [_vi("t")])
    else_g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=1)], "else", [], [_vi("e")])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    model = _model(nodes, [_vi("x", F, ["N", 3])], [_vi("y")], [("zero", np.array(0, np.float32))])
    feeds = [{"x": np.full((n, 3), v, np.float32)} for n, v in ((2, 1.0), (4, -1.0))]
    _check(model, [tf.TensorSpec([None, 3])], feeds)


def test_loop_with_trip_count_condition_growing_state_and_scan_outputs():
    """for i < M while sum(acc) < limit: acc = concat(acc, x * i); scan out: i * x."""
    body_nodes = [
        helper.make_node("Cast", ["i"], ["fi"], to=F),
        helper.make_node("Mul", ["x", "fi"], ["xi"]),
        helper.make_node("Concat", ["acc_in", "xi"], ["acc_out"], axis=0),
        helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
        helper.make_node("Less", ["total", "limit"], ["cond_out"]),
        helper.make_node("Identity", ["xi"], ["scan"]),
    ]
    body = helper.make_graph(
        body_nodes,
        "body",
        [_vi("i", TensorProto.INT64, []), _vi("c", TensorProto.BOOL, []), _vi("acc_in")],
        [_vi(n, t) for n, t in (("cond_out", TensorProto.BOOL), ("acc_out", F), ("scan", F))],
    )
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc", "scans"], body=body)
    inputs = [_vi("M", TensorProto.INT64, []), _vi("x", F, ["N"]), _vi("limit", F, []), _vi("acc0", F, ["K"])]
    outputs = [_vi(n) for n in ("acc", "scans")]
    model = _model([node], inputs, outputs, opset=13)
    specs = [tf.TensorSpec([], tf.int64), tf.TensorSpec([None]), tf.TensorSpec([]), tf.TensorSpec([None])]
    feeds = [
        {
            "M": np.array(m, np.int64),
            "x": np.arange(1, n + 1, dtype=np.float32),
            "limit": np.array(lim, np.float32),
            "acc0": np.ones(k, np.float32),
        }
        for m, n, lim, k in ((5, 2, 100.0, 1), (4, 3, 1e9, 2))
    ]
    _check(model, specs, feeds)
    # A while loop: no trip count, the condition decides.
    model.graph.node[0].input[0] = ""
    model.graph.node[0].input[1] = "c0"
    model.graph.input[0].CopyFrom(_vi("c0", TensorProto.BOOL, []))
    feeds = [{**f, "M": np.array(True)} for f in feeds]
    feeds = [{("c0" if k == "M" else k): v for k, v in f.items()} for f in feeds]
    feeds[1]["limit"] = np.array(40.0, np.float32)
    _check(model, [tf.TensorSpec([], tf.bool), *specs[1:]], feeds)


def test_scan_with_axes_and_directions():
    """Running sums over axis 1 of x, read backwards; the scan outputs stacked on axis 1, one reversed."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["s_in", "e"], ["s_out"]),
            helper.make_node("Mul", ["s_out", "e"], ["p"]),
            helper.make_node("Identity", ["s_out"], ["q"]),
        ],
        "body",
        [_vi("s_in"), _vi("e")],
        [_vi(n) for n in ("s_out", "p", "q")],
    )
    node = helper.make_node(
        "Scan",
        ["s0", "x"],
        ["s", "ps", "qs"],
        body=body,
        num_scan_inputs=1,
        scan_input_axes=[1],
        scan_input_directions=[1],
        scan_output_axes=[1, -1],
        scan_output_directions=[0, 1],
    )
    inputs = [_vi("s0", F, ["N", 2]), _vi("x", F, ["N", "T", 2])]
    model = _model([node], inputs, [_vi(n) for n in ("s", "ps", "qs")])
    rng = np.random.default_rng(2)
    feeds = [
        {"s0": rng.normal(size=(n, 2)).astype(np.float32), "x": rng.normal(size=(n, t, 2)).astype(np.float32)}
        for n, t in ((2, 3), (1, 6))
    ]
    _check(model, [tf.TensorSpec([None, 2]), tf.TensorSpec([None, None, 2])], feeds)


def test_opset8_scan_with_batch_and_sequence_lens():
    """Opset 8's Scan: every input batched on axis 0, per-entry lengths; one scan input read backwards."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["s_in", "a"], ["s_mid"]),
            helper.make_node("Sub", ["s_mid", "b"], ["s_out"]),
            helper.make_node("Identity", ["s_out"], ["y"]),
        ],
        "body",
        [_vi(n, F, [2]) for n in ("s_in", "a", "b")],
        [_vi(n, F, [2]) for n in ("s_out", "y")],
    )
    node = helper.make_node(
        "Scan", ["lens", "s0", "a", "b"], ["s", "ys"], body=body, num_scan_inputs=2, directions=[0, 1]
    )
    inputs = [
        _vi("lens", TensorProto.INT64, ["N"]),
        _vi("s0", F, ["N", 2]),
        _vi("a", F, ["N", "T", 2]),
        _vi("b", F, ["N", "T", 2]),
    ]
    model = _model([node], inputs, [_vi(n) for n in ("s", "ys")], opset=8)
    rng = np.random.default_rng(3)
    feeds = [
        {
            "lens": np.array(lens, np.int64),
            "s0": rng.normal(size=(len(lens), 2)).astype(np.float32),
            "a": rng.normal(size=(len(lens), t, 2)).astype(np.float32),
            "b": rng.normal(size=(len(lens), t, 2)).astype(np.float32),
        }
        for lens, t in (([3, 1], 3), ([2], 4))
    ]
    specs = [tf.TensorSpec([None], tf.int64), tf.TensorSpec([None, 2]), *[tf.TensorSpec([None, None, 2])] * 2]
    _check(model, specs, feeds)
