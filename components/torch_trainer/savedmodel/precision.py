"""The reduced-precision (FP16) variant of the served network, and the drift gate that judges it.

Where a GPU and TensorRT are present the network is converted by TF-TRT at FP16; elsewhere the ONNX graph
is translated once more with every float in float16 (``OnnxGraphModule(compute_dtype=tf.float16)``), which
rounds the way FP16 serving does and runs on CPU, so the gate can be measured anywhere. Either way the
variant gets the FP32 model's signatures (:func:`convert.build_serving_model`); both SavedModels then run
on every raw example of the eval split, and the variant is served only when each figure is within its
:class:`DriftLimits`. A routed model (a mixture of experts: TopK nodes in the graph) is also judged on how often
its top-k expert choices change (:mod:`.routing`).

TF-TRT in this TF (2.16.2 pip wheel): ``tf.sysconfig.get_build_info()`` says ``is_tensorrt_build: True``
(linked against TensorRT 8.6.1) and ``tf.experimental.tensorrt.Converter`` exists, but TensorRT itself
(libnvinfer) is not part of the wheel: ``is_tensorrt_enabled()`` dlopens it and answers False without it,
and ``get_loaded_tensorrt_version()`` then aborts the process (``nvinfer_stub.cc:49] getInferLibVersion
symbol not found``), so nothing here goes past that check unless it passed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import tensorflow as tf

from torchtfx.components.converter import repairs
from torchtfx.components.converter.translator import (
    ConversionError,
    OnnxGraphModule,
    UnsupportedOpsError,
    unsupported_ops,
)
from torchtfx.components.shared.batching import rows_per_call
from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, SERVING_SIGNATURE, prediction_output
from torchtfx.components.torch_trainer.handoff.materialize import example_batches
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.features import CATEGORICAL_INPUT, DENSE_INPUT, FeatureLayout
from torchtfx.components.torch_trainer.modeling.spec import BINARY, MULTICLASS, REGRESSION
from torchtfx.components.torch_trainer.savedmodel.convert import build_serving_model
from torchtfx.components.torch_trainer.savedmodel.parity import relative_to_scale
from torchtfx.components.torch_trainer.savedmodel.routing import RoutingReport, measure_routing, routing_nodes
from torchtfx.data.config.serving_precision import DriftLimits

logger = logging.getLogger(__name__)

PRECISION = "fp16"
TF_TRT_METHOD = "TF-TRT FP16"
_BATCH = 4096


class PrecisionVariantError(RuntimeError):
    """No reduced-precision variant can be built for this network; the FP32 model is served."""


@dataclasses.dataclass(frozen=True)
class DriftReport:
    precision: str
    method: str
    task: str
    examples: int
    max_abs_diff: float
    mean_abs_diff: float
    flips: int  # binary: decisions that change at the threshold (0 for other tasks)
    flip_rate: float
    top1_changes: int  # multiclass: rows whose top class changes (0 for other tasks)
    top1_change_rate: float
    max_relative_error: float  # regression: max |Δ| / max(|y_fp32|, mean |y_fp32|) (0 for other tasks)
    non_finite: int  # variant outputs that are inf or NaN where FP32's are finite (float16 overflow)
    limits: DriftLimits
    # Routed models (TopK in the graph): top-k expert choices on the eval split, and those that change (0: no router)
    routing_decisions: int = 0
    routing_flips: int = 0
    routing_flip_rate: float = 0.0
    violations: tuple[str, ...] = ()  # one sentence per exceeded limit, naming figure and limit

    @property
    def passed(self) -> bool:
        return not self.violations

    def gated(self) -> list[tuple[bool, str]]:
        """(exceeded, sentence naming figure and limit) per figure the model is judged on: the task's, then the
        routing flip rate where the graph routes. Regression is judged relative to the predictions' scale only:
        an absolute limit in the target's units (a fare in dollars, a price in thousands) means nothing across
        datasets."""
        figures = self._task_gated()
        if self.routing_decisions:
            rate, limit = self.routing_flip_rate, self.limits.max_routing_flip_rate
            text = f"routing: {self.routing_flips} of {self.routing_decisions} top-k expert choices change"
            figures.append((rate > limit, f"{text} ({_pct(rate)}, limit {_pct(limit)})"))
        return figures

    def _task_gated(self) -> list[tuple[bool, str]]:
        lim, n = self.limits, self.examples
        overflow = f" ({self.non_finite} outputs not finite in {self.precision})" if self.non_finite else ""
        if self.task == REGRESSION:
            relative, limit = self.max_relative_error, lim.max_relative_error
            return [(relative > limit, f"max relative error {relative:.3g} (limit {limit:g}){overflow}")]
        if self.task == BINARY:
            rate, limit = self.flip_rate, lim.max_flip_rate
            text = f"{self.flips} of {n} decisions flip at p >= {lim.decision_threshold:g}"
        else:
            rate, limit = self.top1_change_rate, lim.max_top1_change_rate
            text = f"{self.top1_changes} of {n} rows change their top class"
        worst = self.max_abs_diff
        return [
            (worst > lim.max_abs_diff, f"max |Δ probability| {worst:.3g} (limit {lim.max_abs_diff:g}){overflow}"),
            (rate > limit, f"{text} ({_pct(rate)}, limit {_pct(limit)})"),
        ]

    def summary(self) -> str:
        figures = [f"mean |Δ| {self.mean_abs_diff:.3g}"] + [text for _, text in self.gated()]
        if self.task == REGRESSION:
            figures.insert(0, f"max |Δ| {self.max_abs_diff:.3g}")
        verdict = "within the limits" if self.passed else f"refused ({len(self.violations)} over the limit)"
        head = f"{self.precision} ({self.method}) vs fp32 on {self.examples} {self.task} examples"
        return f"{head}: {'; '.join(figures)}: {verdict}"

    def to_metrics(self) -> dict[str, float]:
        """The task's figures for MLflow, keys prefixed with the precision (``fp16_flip_rate``), and the routing
        ones (``fp16_routing_flip_rate``) where the graph routes."""
        names = ["examples", "max_abs_diff", "mean_abs_diff", "non_finite", *_TASK_FIGURES[self.task]]
        names += _ROUTING_FIGURES if self.routing_decisions else []
        metrics = {name: float(getattr(self, name)) for name in names}
        return {f"{self.precision}_{name}": value for name, value in {**metrics, "passed": self.passed}.items()}

    def to_json(self) -> str:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields.update(limits=self.limits.model_dump(), violations=list(self.violations), passed=self.passed)
        return json.dumps(fields, sort_keys=True)


_TASK_FIGURES = {
    BINARY: ["flips", "flip_rate"],
    MULTICLASS: ["top1_changes", "top1_change_rate"],
    REGRESSION: ["max_relative_error"],
}
_ROUTING_FIGURES = ["routing_decisions", "routing_flips", "routing_flip_rate"]


def _pct(rate: float) -> str:
    return f"{100 * rate:.2g}%" if 0 < rate < 1e-4 else f"{rate:.2%}"


def drift_figures(
    reference: np.ndarray,
    variant: np.ndarray,
    task: str,
    limits: DriftLimits,
    method: str,
    routing: RoutingReport | None = None,
) -> DriftReport:
    """The variant's drift from the FP32 reference, in float64: probabilities ``[n]`` (binary), ``[n, K]``
    (multiclass) or predictions ``[n]`` (regression). A non-finite variant output counts as an infinite
    difference. ``routing``: the top-k expert choices' figures (:func:`routing_drift`; None: no router)."""
    if task not in _TASK_FIGURES:
        raise ValueError(f"unknown task {task!r}")
    ref, var = np.asarray(reference, np.float64), np.asarray(variant, np.float64)
    if ref.shape != var.shape or ref.size == 0:
        raise ValueError(f"reference {ref.shape} and variant {var.shape} must be equal, non-empty shapes")
    if task == MULTICLASS:
        ref, var = ref.reshape(len(ref), -1), var.reshape(len(var), -1)
    examples = len(ref) if task == MULTICLASS else ref.size
    diff = np.abs(var - ref)
    diff[np.isnan(diff)] = np.inf
    threshold = limits.decision_threshold
    flips = int(np.count_nonzero((ref >= threshold) != (var >= threshold))) if task == BINARY else 0
    changes = int(np.count_nonzero(ref.argmax(axis=1) != var.argmax(axis=1))) if task == MULTICLASS else 0
    relative = 0.0
    if task == REGRESSION:
        relative = float(np.max(relative_to_scale(diff, ref)))
    report = DriftReport(
        PRECISION,
        method,
        task,
        examples,
        max_abs_diff=float(diff.max()),
        mean_abs_diff=float(diff.mean()),
        flips=flips,
        flip_rate=flips / examples,
        top1_changes=changes,
        top1_change_rate=changes / examples,
        max_relative_error=relative,
        non_finite=int(np.count_nonzero(~np.isfinite(var) & np.isfinite(ref))),
        limits=limits,
        routing_decisions=routing.decisions if routing else 0,
        routing_flips=routing.changed if routing else 0,
        routing_flip_rate=routing.rate if routing else 0.0,
    )
    return dataclasses.replace(report, violations=tuple(text for exceeded, text in report.gated() if exceeded))


def tf_trt_available() -> bool:
    """A GPU, a TensorRT build of TF and a loadable TensorRT (libnvinfer): what TF-TRT needs."""
    if not tf.sysconfig.get_build_info().get("is_tensorrt_build") or not tf.config.list_physical_devices("GPU"):
        return False
    try:
        from tensorflow.compiler.tf2tensorrt import _pywrap_py_utils
    except ImportError:
        return False
    return bool(_pywrap_py_utils.is_tensorrt_enabled())


def _translatable(onnx_path: Path | str) -> onnx.ModelProto:
    """The repaired graph, if the translator has every op of it (onnx2tf builds float32 networks only)."""
    model, _ = repairs.apply_graph_repairs(onnx.load(str(onnx_path)))
    missing = unsupported_ops(model)
    if missing:
        raise PrecisionVariantError(
            f"no {PRECISION} variant: the graph needs the onnx2tf fallback, which builds float32 networks only "
            f"({UnsupportedOpsError(missing)})"
        )
    return model


def reduced_precision_network(onnx_path: Path | str) -> tuple[tf.Module, str]:
    """The ONNX graph translated with float16 weights and arithmetic, and the method that names it."""
    device = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
    return OnnxGraphModule(_translatable(onnx_path), compute_dtype=tf.float16), f"float16 network ({device})"


class _SavedNetwork(tf.Module):
    """A network SavedModel (see :func:`_save_network`) behind the translator's calling convention."""

    def __init__(self, saved_dir: str, input_names: tuple[str, ...]) -> None:
        super().__init__()
        self.saved = tf.saved_model.load(saved_dir)
        self.input_names = input_names

    def __call__(self, *inputs: tf.Tensor) -> list[tf.Tensor]:
        signature = self.saved.signatures[SERVING_SIGNATURE]
        outputs = signature(**dict(zip(self.input_names, inputs, strict=True)))
        return [outputs[f"output_{i}"] for i in range(len(outputs))]


def _save_network(network: tf.Module, layout: FeatureLayout, out_dir: str) -> None:
    specs = [
        tf.TensorSpec([None, len(layout.dense)], tf.float32, name=DENSE_INPUT),
        tf.TensorSpec([None, len(layout.embedded)], tf.int64, name=CATEGORICAL_INPUT),
        *(tf.TensorSpec([None, None], tf.int64, name=name) for name in layout.sequences),
    ]
    call = tf.function(
        lambda *inputs: {f"output_{i}": t for i, t in enumerate(network(*inputs))},
        input_signature=specs,
        autograph=False,
    )
    tf.saved_model.save(network, out_dir, signatures={SERVING_SIGNATURE: call.get_concrete_function()})


def _tf_trt_fp16(network_dir: str, out_dir: str) -> None:
    converter = tf.experimental.tensorrt.Converter(input_saved_model_dir=network_dir, precision_mode="FP16")
    converter.convert()  # engines are built on the first calls (the drift measurement's)
    converter.save(out_dir)


def _tf_trt_variant(
    onnx_path: Path | str, tft_output, cfg, layout: FeatureLayout, out_dir: Path, convert: Callable = _tf_trt_fp16
) -> None:
    """TF-TRT converts the network alone: it cannot convert the whole serving SavedModel, whose TFT layer
    holds lookup tables (NVIDIA/TensorRT#2116, tensorflow#51944: the table initializers are lost)."""
    with tempfile.TemporaryDirectory() as tmp:
        _save_network(OnnxGraphModule(_translatable(onnx_path)), layout, f"{tmp}/fp32")
        convert(f"{tmp}/fp32", f"{tmp}/converted")
        build_serving_model(_SavedNetwork(f"{tmp}/converted", layout.input_names), tft_output, cfg, layout, out_dir)


def build_reduced_precision_variant(
    onnx_path: Path | str, tft_output, cfg, layout: FeatureLayout, out_dir: Path | str
) -> str:
    """The FP16 variant of the served network as a SavedModel in ``out_dir`` with the FP32 one's signatures:
    TF-TRT where it can run, else the float16 network. Returns the method."""
    out_dir = Path(out_dir)
    if tf_trt_available():
        try:
            _tf_trt_variant(onnx_path, tft_output, cfg, layout, out_dir)
            logger.info("Built the %s variant with TF-TRT in %s", PRECISION, out_dir)
            return TF_TRT_METHOD
        except PrecisionVariantError:
            raise
        except Exception as err:  # never run in CI (no GPU there): any failure falls back to float16
            logger.warning(
                "TF-TRT FP16 conversion failed (%s: %s); building a float16 network instead", type(err).__name__, err
            )
    else:
        logger.info("TF-TRT is not usable here (needs a GPU and TensorRT); building a float16 network")
    network, method = reduced_precision_network(onnx_path)
    try:
        build_serving_model(network, tft_output, cfg, layout, out_dir)
    except ConversionError as err:
        raise PrecisionVariantError(f"the network cannot be built in float16: {err}") from err
    logger.info("Built the %s variant (%s) in %s", PRECISION, method, out_dir)
    return method


def routes(onnx_path: Path | str) -> bool:
    """Whether the graph routes (has TopK nodes), so that :func:`routing_drift` has figures to measure."""
    return bool(routing_nodes(onnx.load(str(onnx_path))))


def routing_drift(onnx_path: Path | str, eval_dir: Path | str) -> RoutingReport | None:
    """FP32 vs float16 top-k expert choices of the graph on the materialized eval split in ``eval_dir``
    (:mod:`.routing`); None for a graph without TopK. Measured with the float16 translation whichever method
    built the variant (TF-TRT keeps no router output to compare)."""
    report = measure_routing(_translatable(onnx_path), ArraySplit.load(Path(eval_dir)))
    if report:
        logger.info(
            "FP16 routing: %s of %s top-k expert choices change over %s TopK node(s)",
            report.changed,
            report.decisions,
            report.nodes,
        )
    return report


def measure_drift(
    fp32_dir: str,
    variant_dir: str,
    raw_split_uri: str,
    task: str,
    limits: DriftLimits,
    method: str,
    routing: RoutingReport | None = None,
    tokens: int = 0,
) -> DriftReport:
    """Both SavedModels' ``serving_default`` on every raw example of the split (fewer rows per call for ``tokens``
    ids per row: ``shards.rows_per_call``), compared; ``routing`` (from :func:`routing_drift`) joins the figures."""
    models = [tf.saved_model.load(str(d)) for d in (fp32_dir, variant_dir)]  # kept alive for their signatures
    serves = [m.signatures[SERVING_SIGNATURE] for m in models]
    output, outputs = prediction_output(task), ([], [])
    for batch in example_batches(raw_split_uri, rows_per_call(tokens, _BATCH)):
        for serve, found in zip(serves, outputs, strict=True):
            found.append(serve(**{EXAMPLES_INPUT: batch})[output].numpy())
    if not outputs[0]:
        raise ValueError(f"no raw examples in {raw_split_uri} to measure the {PRECISION} drift on")
    report = drift_figures(np.concatenate(outputs[0]), np.concatenate(outputs[1]), task, limits, method, routing)
    logger.info("Precision drift gate: %s", report.summary())
    return report
