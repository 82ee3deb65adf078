"""The FP16 drift gate: its arithmetic per task, the float16 translator (every float op, every zoo model), and
FP32 vs the float16 variant through real serving SavedModels on a real TFT graph."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
import tensorflow as tf
import torch
from onnx import TensorProto, helper
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import saved_model_pb2
from torch import nn

from tests.helpers import FLOAT32_RERUN_TOLERANCE
from tests.unit.components.torch_trainer.served_models import NearlyCancelling, export_and_serve, train_briefly
from tests.unit.components.torch_trainer.torch_to_onnx import bridge_models
from torchtfx.components.converter.ops import OPS, Node
from torchtfx.components.converter.translator import OnnxGraphModule
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.factory import TABULAR_ZOO, build_model
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.savedmodel import precision
from torchtfx.components.torch_trainer.savedmodel.precision import (
    PrecisionVariantError,
    build_reduced_precision_variant,
    drift_figures,
    measure_drift,
    reduced_precision_network,
)
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import export_onnx
from torchtfx.data.config.model import ModelConfig
from torchtfx.data.config.serving_precision import DriftLimits

LIMITS = DriftLimits()

# --- the drift arithmetic (values exact in binary, so that "at the limit" is exact) ---


def test_binary_flips_at_the_threshold_and_the_limits_are_inclusive():
    ref, var = np.array([0.375, 0.625, 0.25, 0.75]), np.array([0.5, 0.625, 0.25, 0.8125])
    report = drift_figures(ref, var, "binary", LIMITS, "float16 network (CPU)")
    assert (report.examples, report.flips, report.flip_rate) == (4, 1, 0.25)
    assert (report.max_abs_diff, report.mean_abs_diff) == (0.125, 0.046875)
    assert report.violations == (
        "max |Δ probability| 0.125 (limit 0.01)",
        "1 of 4 decisions flip at p >= 0.5 (25.00%, limit 0.10%)",
    )
    assert not report.passed and "refused (2 over the limit)" in report.summary()
    at_limits = drift_figures(ref, var, "binary", LIMITS.replace(max_abs_diff=0.125, max_flip_rate=0.25), "m")
    assert at_limits.passed and at_limits.summary().endswith("within the limits")
    over = drift_figures(ref, var, "binary", LIMITS.replace(max_abs_diff=0.125, max_flip_rate=0.24), "m")
    assert over.violations == ("1 of 4 decisions flip at p >= 0.5 (25.00%, limit 24.00%)",)
    # The threshold is the config's: the first row crosses 0.45, the last crosses 0.8, no row crosses 0.3 or 0.6.
    flips = {
        t: drift_figures(ref, var, "binary", LIMITS.replace(decision_threshold=t), "m").flips
        for t in (0.3, 0.45, 0.6, 0.8)
    }
    assert flips == {0.3: 0, 0.45: 1, 0.6: 0, 0.8: 1}


def test_multiclass_counts_top1_changes_and_every_probability():
    ref = np.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.125, 0.125, 0.75]])
    var = np.array([[0.375, 0.5, 0.125], [0.25, 0.5, 0.25], [0.125, 0.125, 0.75]])
    report = drift_figures(ref, var, "multiclass", LIMITS, "m")
    assert (report.examples, report.top1_changes, report.flips) == (3, 1, 0)
    assert report.top1_change_rate == pytest.approx(1 / 3) and report.max_abs_diff == 0.25
    assert report.violations == (
        "max |Δ probability| 0.25 (limit 0.01)",
        "1 of 3 rows change their top class (33.33%, limit 0.10%)",
    )
    same_top = drift_figures(ref, ref + 0.0078125, "multiclass", LIMITS, "m")
    assert same_top.passed and same_top.top1_changes == 0
    assert drift_figures(
        ref, var, "multiclass", LIMITS.replace(max_abs_diff=0.25, max_top1_change_rate=0.34), "m"
    ).passed


def test_regression_is_judged_relative_to_the_scale_of_the_predictions():
    ref, var = np.array([100.0, 1.0, -2.0, 0.0]), np.array([101.0, 1.0, -2.0, 0.5])
    report = drift_figures(ref, var, "regression", LIMITS, "m")
    # |Δ| / max(|y|, mean |y| = 25.75): 1/100 for the first row, 0.5/25.75 for the last (near zero).
    assert report.max_relative_error == pytest.approx(0.5 / 25.75)
    assert report.max_abs_diff == 1.0  # far above max_abs_diff, which regression is not judged on
    assert report.violations == ("max relative error 0.0194 (limit 0.01)",)
    assert drift_figures(ref[:3], var[:3], "regression", LIMITS, "m").passed  # exactly 0.01 for the first row
    assert not drift_figures(ref[:3], var[:3] * 1.001, "regression", LIMITS, "m").passed


def test_an_overflowed_variant_output_is_refused_not_ignored():
    ref = np.array([0.25, 0.5, 1000.0, 70000.0])
    report = drift_figures(ref, np.array([0.25, 0.5, 1000.0, np.inf]), "regression", LIMITS, "m")
    assert report.non_finite == 1 and report.max_relative_error == np.inf
    assert report.violations == ("max relative error inf (limit 0.01) (1 outputs not finite in fp16)",)
    nan = drift_figures(np.array([0.25, 0.75]), np.array([0.25, np.nan]), "binary", LIMITS, "m")
    assert nan.max_abs_diff == np.inf and nan.flips == 1 and not nan.passed


def test_report_metrics_json_and_bad_input():
    report = drift_figures(np.array([0.25, 0.75]), np.array([0.25, 0.7578125]), "binary", LIMITS, "float16 network")
    assert report.passed
    assert report.to_metrics() == {
        "fp16_examples": 2.0,
        "fp16_max_abs_diff": 0.0078125,
        "fp16_mean_abs_diff": 0.00390625,
        "fp16_non_finite": 0.0,
        "fp16_flips": 0.0,
        "fp16_flip_rate": 0.0,
        "fp16_passed": 1.0,
    }
    loaded = json.loads(report.to_json())
    assert (
        loaded["limits"]["max_flip_rate"] == 0.001
        and loaded["passed"] is True
        and loaded["method"] == "float16 network"
    )
    assert "fp16_max_relative_error" in drift_figures(np.ones(2), np.ones(2), "regression", LIMITS, "m").to_metrics()
    with pytest.raises(ValueError, match="equal, non-empty shapes"):
        drift_figures(np.ones(3), np.ones(4), "binary", LIMITS, "m")
    with pytest.raises(ValueError, match="unknown task"):
        drift_figures(np.ones(3), np.ones(3), "ranking", LIMITS, "m")


# --- every float op of the translator in float16, on TF's CPU kernels ---


def _f(*shape, positive=False) -> np.ndarray:
    values = np.random.default_rng(len(shape) + sum(shape)).normal(size=shape)
    return (np.abs(values) + 0.5 if positive else values).astype(np.float32)


def _i(*values) -> np.ndarray:
    return np.array(values, np.int64)


_UNARY = [
    "Identity",
    "Sqrt",
    "Erf",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Log",
    "Neg",
    "Abs",
    "Floor",
    "Ceil",
    "Reciprocal",
    "Softplus",
    "Sign",
    "Elu",
    "HardSigmoid",
    "Flatten",
]
_BINARY = [
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "Min",
    "Max",
    "Sum",
]
FLOAT_OPS = (
    [(op, {}, [_f(4, 3, positive=True)]) for op in _UNARY]
    + [(op, {}, [_f(4, 3, positive=True), _f(4, 3)]) for op in _BINARY]
    + [
        ("Dropout", {}, [_f(4, 3)]),
        ("LeakyRelu", {"alpha": 0.1}, [_f(4, 3)]),
        ("Gelu", {}, [_f(4, 3)]),
        ("Gelu", {"approximate": "tanh"}, [_f(4, 3)]),
        ("Softmax", {"axis": -1}, [_f(4, 3)]),
        ("LogSoftmax", {"axis": -1}, [_f(4, 3)]),
        ("Gemm", {"transB": 1, "alpha": 0.5, "beta": 2.0}, [_f(4, 3), _f(5, 3), _f(5)]),
        ("MatMul", {}, [_f(2, 4, 3), _f(3, 5)]),
        ("MatMul", {}, [_f(2, 2, 4, 3), _f(2, 2, 3, 5)]),
        ("MatMul", {}, [_f(3), _f(3, 5)]),
        ("Einsum", {"equation": "bnd,de,bme->bnm"}, [_f(2, 4, 3), _f(3, 3), _f(2, 4, 3)]),
        ("LayerNormalization", {"epsilon": 1e-5}, [_f(2, 4, 3), _f(3), _f(3)]),
        ("BatchNormalization", {}, [_f(4, 3), _f(3), _f(3), _f(3), _f(3, positive=True)]),
        ("Gather", {}, [_f(10, 3), _i(1, -1, 3)]),
        ("Concat", {"axis": 1}, [_f(4, 3), _f(4, 2)]),
        ("Reshape", {}, [_f(4, 3), _i(0, 3, 1)]),
        ("Transpose", {"perm": [1, 0]}, [_f(4, 3)]),
        ("Unsqueeze", {}, [_f(4, 3), _i(1)]),
        ("Squeeze", {}, [_f(4, 1), _i(1)]),
        ("Slice", {}, [_f(4, 3), _i(1), _i(3), _i(0), _i(1)]),
        ("Split", {"axis": 1}, [_f(4, 4), _i(2, 2)]),
        ("Expand", {}, [_f(1, 3), _i(4, 3)]),
        ("Tile", {}, [_f(2, 3), _i(2, 1)]),
        ("Where", {}, [np.array([[True, False, True]]), _f(4, 3), _f(4, 3)]),
        ("Cast", {"to": TensorProto.FLOAT}, [_i(1, 2, 3)]),
        ("Clip", {}, [_f(4, 3), np.float32(-0.5), np.float32(0.5)]),
        *[
            (op, {"axes": [1]}, [_f(4, 3, positive=True)])
            for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd")
        ],
        ("ReduceSum", {}, [_f(4, 3), _i(1)]),
        ("ArgMax", {"axis": 1}, [_f(4, 3)]),
        ("TopK", {"axis": 0, "largest": 0}, [_f(4, 5), _i(2)]),
        ("Range", {}, [np.float32(0.5), np.float32(3.0), np.float32(0.5)]),
        ("ConstantOfShape", {"value": helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5])}, [_i(2, 3)]),
        ("Constant", {"value_floats": [0.25, 3.0]}, []),
        ("Constant", {"value": helper.make_tensor("v", TensorProto.FLOAT, [2], [0.5, 2.0])}, []),
    ]
)


def _run_op(op: str, attrs: dict, inputs: list, dtype: tf.DType) -> list[np.ndarray]:
    """The op's handler inside a tf.function: float inputs fed as arguments (cast to ``dtype``), integer
    ones (axes, shapes, indices) captured as constants, as the translator's static values are."""
    proto = helper.make_node(op, [f"in{i}" for i in range(len(inputs))], ["out0", "out1", "out2"], **attrs)
    node = Node(proto, dtype)
    floats = [np.asarray(v).dtype == np.float32 for v in inputs]

    def call(*fed):
        fed = iter(fed)
        pairs = zip(inputs, floats, strict=True)
        args = [tf.cast(next(fed), dtype) if is_float else tf.constant(v) for v, is_float in pairs]
        return OPS[op](node, args)

    fed = [tf.constant(v) for v, is_float in zip(inputs, floats, strict=True) if is_float]
    return [t.numpy() for t in tf.function(call, autograph=False)(*fed)]


@pytest.mark.parametrize(("op", "attrs", "inputs"), FLOAT_OPS, ids=[f"{c[0]}-{i}" for i, c in enumerate(FLOAT_OPS)])
def test_every_float_op_runs_in_float16_on_cpu_and_stays_close(op, attrs, inputs):
    full, half = _run_op(op, attrs, inputs, tf.float32), _run_op(op, attrs, inputs, tf.float16)
    for want, got in zip(full, half, strict=True):
        assert got.dtype == (np.float16 if want.dtype == np.float32 else want.dtype)  # computed in float16
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got.astype(np.float32), want, rtol=4e-3, atol=4e-3)
        elif got.dtype != bool:  # comparisons may flip on values rounded to float16; indices and shapes may not
            np.testing.assert_array_equal(got, want)


# Every other operator's float16 path runs on ONNX's own tests: tests/unit/components/converter/test_conformance.py
# (conformance --float16).


# --- the float16 translator on every zoo model ---

SPEC = ModelSpec(("a", "b", "c", "d"), ("x", "y"), (11, 40))


def _split(spec: ModelSpec, n: int = 500) -> ArraySplit:
    rng = np.random.default_rng(0)
    categorical = np.stack([rng.integers(0, c, n) for c in spec.cardinalities], axis=1).astype(np.int64)
    dense = rng.normal(size=(n, len(spec.dense_features))).astype(np.float32)
    return ArraySplit(dense, categorical, np.zeros(n, np.float32))


def _outputs(network: tf.Module, split: ArraySplit) -> np.ndarray:
    specs = [tf.TensorSpec([None, split.dense.shape[1]], tf.float32), tf.TensorSpec([None, 2], tf.int64)]
    fn = tf.function(lambda d, c: network(d, c)[0], input_signature=specs, autograph=False)
    return fn(split.dense, split.categorical).numpy()


@pytest.mark.parametrize("name", TABULAR_ZOO)  # the text models' float16 routing: test_routing.py
def test_the_float16_network_of_each_zoo_model_runs_and_stays_close_to_fp32(tmp_path, name):
    torch.manual_seed(0)
    split = _split(SPEC)
    export_onnx(ExportHead(build_model(ModelConfig(factory=name), SPEC), "binary"), split, tmp_path / "m.onnx")
    full = _outputs(OnnxGraphModule(onnx.load(str(tmp_path / "m.onnx"))), split)
    network, method = reduced_precision_network(tmp_path / "m.onnx")
    assert method == "float16 network (CPU)" and network.weight_dtypes == {tf.float16}
    half = _outputs(network, split)
    diff = np.abs(half.astype(np.float64) - full)
    print(f"{name}: fp16 vs fp32 max |Δ| {diff.max():.3g}, mean {diff.mean():.3g}")
    assert half.dtype == np.float32 and half.shape == full.shape
    assert 0 < diff.max() <= 3e-3  # measured 4.5e-4 (dcn) to 7.2e-4 (ft_transformer); 0 would mean float32


def test_a_multiclass_float16_network_keeps_its_softmax_rows(tmp_path):
    spec = ModelSpec(SPEC.dense_features, SPEC.categorical_features, SPEC.cardinalities, "multiclass", 4)
    torch.manual_seed(0)
    split = _split(spec)
    export_onnx(
        ExportHead(build_model(ModelConfig(factory="ft_transformer"), spec), "multiclass"), split, tmp_path / "m.onnx"
    )
    full = _outputs(OnnxGraphModule(onnx.load(str(tmp_path / "m.onnx"))), split)
    half = _outputs(reduced_precision_network(tmp_path / "m.onnx")[0], split)
    report = drift_figures(full, half, "multiclass", LIMITS, "m")
    assert half.shape == (500, 4) and np.allclose(half.sum(axis=1), 1.0, atol=3e-3)
    assert 0 < report.max_abs_diff <= 3e-3 and report.top1_changes <= 2


def test_a_graph_that_needs_onnx2tf_has_no_float16_variant(tmp_path, monkeypatch):
    monkeypatch.delitem(OPS, "CumSum")  # an op outside the translator's set
    spec = ModelSpec(("a", "b", "c"), ("x", "y"), (11, 40))
    export_onnx(ExportHead(bridge_models.cumulative_sum(spec), "binary"), _split(spec), tmp_path / "m.onnx")
    with pytest.raises(PrecisionVariantError, match=r"needs the onnx2tf fallback.*CumSum"):
        reduced_precision_network(tmp_path / "m.onnx")


# --- FP32 vs the float16 variant through the serving SavedModels ---


def _trained_mlp(tiny_taxi) -> nn.Module:
    """The default model (zoo mlp, default hyperparameters), trained for a few steps."""
    torch.manual_seed(0)
    return train_briefly(build_model(ModelConfig(), tiny_taxi.layout.model_spec()), tiny_taxi)


def _fp32_serving(tiny_taxi, model: nn.Module, root):
    export_and_serve(tiny_taxi, model, root / "model.onnx", root / "fp32")
    return root


def _matmul_dtypes(saved_dir) -> set[int]:
    """The dtypes of every MatMul in a SavedModel's functions (its weights are graph constants)."""
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((saved_dir / "saved_model.pb").read_bytes())
    library = saved.meta_graphs[0].graph_def.library
    return {node.attr["T"].type for f in library.function for node in f.node_def if node.op == "MatMul"}


def _variant(tiny_taxi, root) -> str:
    t = tiny_taxi
    return build_reduced_precision_variant(root / "model.onnx", t.tft_output, t.cfg, t.layout, root / "fp16")


def _drift(tiny_taxi, root, variant: str, method: str):
    return measure_drift(str(root / "fp32"), str(root / variant), str(tiny_taxi.examples_dir), "binary", LIMITS, method)


@pytest.fixture(scope="module")
def default_mlp(tmp_path_factory, tiny_taxi):
    return _fp32_serving(tiny_taxi, _trained_mlp(tiny_taxi), tmp_path_factory.mktemp("default_mlp"))


def test_the_fp16_variant_of_the_default_mlp_passes_the_gate(default_mlp, tiny_taxi):
    method = _variant(tiny_taxi, default_mlp)
    assert method == "float16 network (CPU)"
    variant = tf.saved_model.load(str(default_mlp / "fp16"))
    assert set(variant.signatures) == {"serving_default", "transform_features"}
    assert _matmul_dtypes(default_mlp / "fp16") == {types_pb2.DT_HALF}
    report = _drift(tiny_taxi, default_mlp, "fp16", method)
    print(report.summary())
    assert report.examples == 800 and report.passed, report.summary()
    assert 0 < report.max_abs_diff < 2e-3  # measured 5.4e-4, mean 3.6e-5, no flips


def test_a_precision_sensitive_model_is_refused_with_its_flip_count(tmp_path, tiny_taxi):
    torch.manual_seed(0)
    model = NearlyCancelling(tiny_taxi.layout.model_spec()).eval()
    report = _drift(tiny_taxi, _fp32_serving(tiny_taxi, model, tmp_path), "fp16", _variant(tiny_taxi, tmp_path))
    print(report.summary())
    with torch.no_grad():
        a = tiny_taxi.arrays
        below = int((model(torch.from_numpy(a.dense), torch.from_numpy(a.categorical)) < 0).sum())
    assert report.flips == below > 100  # every negative decision turns positive at p = 0.5 (measured 631)
    assert not report.passed
    assert f"{below} of 800 decisions flip at p >= 0.5 (" in report.violations[1]


def test_the_tf_trt_path_saves_and_serves_a_converted_network(default_mlp, tiny_taxi):
    """TF-TRT cannot run without a GPU; the rest of its path (network-only SavedModel, converted, loaded back
    under the serving signatures) runs here with a converter that copies the network unchanged."""
    t = tiny_taxi
    precision._tf_trt_variant(
        default_mlp / "model.onnx", t.tft_output, t.cfg, t.layout, default_mlp / "copied", convert=shutil.copytree
    )
    assert set(tf.saved_model.load(str(default_mlp / "copied")).signatures) == {"serving_default", "transform_features"}
    # The same network in a SavedModel rebuilt around it (see FLOAT32_RERUN_TOLERANCE); a float16 network,
    # what this path must not be confused with, is 5e-4 off.
    assert _drift(tiny_taxi, default_mlp, "copied", "copy").max_abs_diff <= FLOAT32_RERUN_TOLERANCE
    if not tf.config.list_physical_devices("GPU"):
        assert not precision.tf_trt_available()  # so build_reduced_precision_variant builds the float16 network
