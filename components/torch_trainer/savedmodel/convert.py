"""ONNX -> TensorFlow (repairs, then the op-by-op translator; onnx2tf as fallback), then one SavedModel that
serves raw tf.Examples.

Signatures of the SavedModel (their names, input and outputs: components/shared/served_interface.py):
- ``serving_default(examples)``: parse (no label needed) -> TFT transform layer -> converted network -> the
  task's outputs.
- ``transform_features(examples) -> transformed features``: what TFMA uses to get the label.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import re
import types
from pathlib import Path

import onnx
import tensorflow as tf

from torchtfx.components.converter import repairs
from torchtfx.components.converter.row_shards import shard_rows
from torchtfx.components.converter.translator import (
    ConversionError,
    OnnxGraphModule,
    UnsupportedOpsError,
    unsupported_ops,
)
from torchtfx.components.shared.served_interface import (
    CLASSES_OUTPUT,
    EXAMPLES_INPUT,
    PREDICTIONS_OUTPUT,
    PROBABILITIES_OUTPUT,
    SERVING_SIGNATURE,
    TRANSFORM_SIGNATURE,
)
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout
from torchtfx.components.torch_trainer.modeling.spec import MULTICLASS, PADDING_ID, REGRESSION
from torchtfx.data.config.dataset import DatasetConfig

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Conversion:
    network: tf.Module  # network(dense, categorical, *token_ids) -> [outputs...]
    strategy: str  # "translator" or "onnx2tf"
    repairs: tuple[str, ...]


class _KerasNetwork(tf.Module):
    """onnx2tf's Keras model behind the translator's calling convention; outputs read by position, since
    onnx2tf renames them between versions."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model

    def __call__(self, *inputs: tf.Tensor) -> list[tf.Tensor]:
        outputs = self.model(list(inputs))
        if isinstance(outputs, dict):
            outputs = list(outputs.values())
        return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


def run_onnx2tf(onnx_path: Path, work_dir: Path) -> tf.Module:
    """onnx2tf, with its ``sys.exit`` on failure turned into a :class:`ConversionError` that quotes it."""
    import onnx2tf

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            model = onnx2tf.convert(
                input_onnx_file_path=str(onnx_path),
                output_folder_path=str(work_dir),
                non_verbose=True,
                # Only the Keras model is needed: by default onnx2tf also saves its own SavedModel and
                # converts float32 and float16 TFLite files, which took 57 of its 65 s on the taxi model.
                disable_model_save=True,
                not_use_onnxsim=True,  # onnxsim is not installed
            )
    except SystemExit as stop:  # onnx2tf calls sys.exit(1) when a node fails
        raise ConversionError(onnx2tf_exit_message(stop.code, printed.getvalue(), onnx_path)) from None
    except Exception as err:
        raise ConversionError(f"onnx2tf failed: {type(err).__name__}: {str(err)[:600]}") from err
    expected = len(onnx.load(str(onnx_path), load_external_data=False).graph.input)
    if len(model.inputs) != expected:
        raise ConversionError(f"onnx2tf built {len(model.inputs)} inputs, the ONNX graph has {expected}")
    return _KerasNetwork(model)


# What onnx2tf prints before its sys.exit: "<Op> OP is not yet implemented." for an op it lacks; for a node
# whose conversion raised, the traceback, then "onnx_op_name: <node>", then four lines of generic advice
# (so the last lines of its output never name the node).
_NOT_IMPLEMENTED = re.compile(r"(\S+) OP is not yet implemented")
_NODE_NAME = re.compile(r"onnx_op_name: (.+)")
_EXCEPTION_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")


def onnx2tf_exit_message(code: object, printed: str, onnx_path: Path) -> str:
    """onnx2tf's ``sys.exit`` as a message naming the failing node, its op type and the error it raised."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", printed)  # onnx2tf colors its messages
    missing = _NOT_IMPLEMENTED.search(text)
    if missing:
        return f"onnx2tf stopped (exit code {code}): it has no conversion for op {missing.group(1)}"
    named = _NODE_NAME.findall(text)
    if named:
        node = named[-1].strip()
        errors = [m for m in map(_EXCEPTION_LINE.match, text.splitlines()) if m]
        reason = f"{errors[-1].group(1)}: {errors[-1].group(2)[:400]}" if errors else "see its output above"
        return f"onnx2tf stopped (exit code {code}) at node {node} (op {_op_type(onnx_path, node)}): {reason}"
    tail = " | ".join(text.strip().splitlines()[-3:])
    return f"onnx2tf stopped (exit code {code}): {tail[-600:]}"


def _op_type(onnx_path: Path, node_name: str) -> str:
    try:
        graph = onnx.load(str(onnx_path), load_external_data=False).graph
    except Exception:  # the message must not hide the conversion error behind a second one
        return "unknown"
    found = [n for n in graph.node if n.name == node_name]
    return f"{found[0].domain + '.' if found[0].domain else ''}{found[0].op_type}" if found else "unknown"


def convert_onnx(onnx_path: Path, work_dir: Path) -> Conversion:
    """The ONNX graph as a TF network: repaired, then translated op by op; onnx2tf only for graphs with ops
    outside the translator's set; split by rows for large batches where its rows are independent
    (``row_shards``). The parity gate judges the result either way."""
    model, fired = repairs.apply_graph_repairs(onnx.load(str(onnx_path)))
    missing = unsupported_ops(model)
    if not missing:
        return Conversion(shard_rows(OnnxGraphModule(model), model), "translator", fired)
    logger.warning("%s; trying onnx2tf", UnsupportedOpsError(missing))
    repaired_path = work_dir / "repaired.onnx"
    work_dir.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(repaired_path))
    try:
        return Conversion(shard_rows(run_onnx2tf(repaired_path, work_dir), model), "onnx2tf", fired)
    except ConversionError as err:
        tried = f" Repairs: {', '.join(fired)}." if fired else ""
        raise ConversionError(
            f"the model could not be converted to TensorFlow. {UnsupportedOpsError(missing)}.{tried} "
            f"Fallback {err}. Rewrite those parts of the model with supported ops "
            "(components/converter/README.md lists them; components/torch_trainer/README.md: The ONNX bridge)."
        ) from None


class ServingModule(tf.Module):
    """The two signatures. ``autograph=False``: they hold no Python control flow on tensors, and autograph
    would otherwise convert every layer's ``call`` while tracing (7 of the 16.5 s of onnx2tf's conversion)."""

    def __init__(self, network, tft_output, layout: FeatureLayout, serving_spec: dict, transform_spec: dict) -> None:
        super().__init__()
        self.network = network
        layer = tft_output.transform_features_layer()
        # The TFT layer is a tf_keras Model: tracked as an attribute, tf.saved_model.save serializes it as one,
        # tracing its call again with autograph for Keras's own signature (6.0 of the 7.7 s of this save on
        # taxi). Only the transform graph it loaded (tables, vocabulary assets) must be saved, which is what
        # TFT's layer itself tracks: the loader's attributes. The layer is kept out of the tracked graph.
        self._untracked = types.SimpleNamespace(tft_layer=layer)
        self.tft_graph = layer._saved_model_loader_tracked_dict
        self._layout = layout
        self._serving_spec = serving_spec
        self._transform_spec = transform_spec

    def network_inputs(self, transformed: dict) -> tuple[tf.Tensor, ...]:
        """The network's arguments from Transform's output: dense and categorical columns stacked, and each text
        feature's token ids cut to the request's longest text (:func:`trim_padding`)."""
        batch = tf.shape(next(iter(transformed.values())))[0]
        dense = (
            tf.stack([tf.cast(tf.reshape(transformed[k], [-1]), tf.float32) for k in self._layout.dense], axis=1)
            if self._layout.dense
            else tf.zeros([batch, 0], tf.float32)
        )
        categorical = (
            tf.stack([tf.cast(tf.reshape(transformed[k], [-1]), tf.int64) for k in self._layout.embedded], axis=1)
            if self._layout.embedded
            else tf.zeros([batch, 0], tf.int64)
        )
        return (dense, categorical, *(trim_padding(tf.cast(transformed[k], tf.int64)) for k in self._layout.sequences))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)], autograph=False)
    def serve(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(examples, self._serving_spec)
        transformed = inlined_transform(self._untracked.tft_layer, parsed)
        return self.task_outputs(self.network(*self.network_inputs(transformed))[0])

    def task_outputs(self, network_output: tf.Tensor) -> dict[str, tf.Tensor]:
        """The network's first output, named and shaped for the task (see the module docstring)."""
        layout = self._layout
        if layout.task == REGRESSION:
            return {PREDICTIONS_OUTPUT: tf.reshape(network_output, [-1])}
        if layout.task != MULTICLASS:
            return {PROBABILITIES_OUTPUT: tf.reshape(network_output, [-1])}
        probabilities = tf.reshape(network_output, [-1, len(layout.classes)])
        classes = tf.tile(tf.constant(layout.classes, tf.string)[None, :], [tf.shape(probabilities)[0], 1])
        return {PROBABILITIES_OUTPUT: probabilities, CLASSES_OUTPUT: classes}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)], autograph=False)
    def transform_features(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._untracked.tft_layer(tf.io.parse_example(examples, self._transform_spec))


def inlined_transform(layer, features: dict) -> dict:
    """What ``layer(features)`` returns (TFT's ``TransformFeaturesLayer``), with Transform's graph traced into
    the calling function as its own ops rather than called as TFT's function.

    TFT's function is pruned from Transform's SavedModel without its control outputs, so TF's graph optimizer
    cannot inline it ("Can't guarantee execution of a side-effectful node": its table lookups): TF Serving
    then runs it through a function call of its own, and optimizes it apart from the parse and the network.
    Imported into the traced ``serve``, its lookups get that function's automatic control dependencies and
    the whole signature is inlined into one graph. The same ops, the same captured tables and constants, the
    same missing inputs supplied (the label columns): the same outputs bit for bit. A transform graph that TFT
    runs some other way (exported by TF1) is called as TFT calls it."""
    try:
        return _imported_transform(layer._saved_model_loader, features)
    except (AttributeError, TypeError) as err:  # TFT's loader changed, or runs this graph another way
        logger.warning(
            "Transform's graph is called as TFT's function, not inlined (%s: %s): same outputs, slower at batch 1",
            type(err).__name__,
            err,
        )
        return layer(features)


def _imported_transform(loader, features: dict) -> dict:
    """Transform's function graph imported into the current one (TFT 1.16's ``SavedModelLoader`` internals)."""
    wrapped = loader._wrapped_function
    if loader.load_v2_in_compat or getattr(loader, "_is_finalized", False):
        raise TypeError("a TF1-exported transform graph")
    # TFT's SavedModelLoader._apply_v2_transform_model, up to its call of the wrapped function.
    unfed = loader._get_unfed_input_keys(features.keys())
    fetched = loader._get_fetches_keys(loader._get_feeds(unfed))
    inputs = loader._format_input_map_as_tensors(features)
    if unfed:
        first = next(iter(features.values()))
        batch = first.bounding_shape(axis=0) if isinstance(first, tf.RaggedTensor) else tf.shape(first)[0]
        inputs.update(loader._get_missing_inputs(unfed, batch))
    flat = tf.nest.flatten(inputs, expand_composites=True)
    graph = tf.compat.v1.get_default_graph()
    captured = [graph.capture(t) for t in wrapped.captured_inputs]
    if len(wrapped.inputs) != len(flat) + len(captured):
        raise TypeError(f"{len(wrapped.inputs)} inputs, {len(flat) + len(captured)} given")
    outputs = tf.graph_util.import_graph_def(
        wrapped.graph.as_graph_def(),
        input_map={placeholder.name: value for placeholder, value in zip(wrapped.inputs, flat + captured, strict=True)},
        return_elements=[t.name for t in wrapped.outputs],
        name="transform",
    )
    for imported, original in zip(outputs, wrapped.outputs, strict=True):
        imported.set_shape(original.shape)
    every = tf.nest.pack_sequence_as(wrapped.structured_outputs, outputs, expand_composites=True)
    return {key: every[key] for key in fetched}


def trim_padding(ids: tf.Tensor) -> tf.Tensor:
    """Token ids [batch, max_length] without the padding columns that no row reaches, keeping at least one (the
    training batches' :func:`shards.trim_padding`): a request of short texts costs what short texts cost."""
    used = tf.reduce_any(tf.not_equal(ids, PADDING_ID), axis=0)
    positions = tf.range(1, tf.shape(ids, out_type=tf.int64)[1] + 1, dtype=tf.int64)
    length = tf.maximum(tf.reduce_max(tf.where(used, positions, tf.zeros_like(positions))), 1)
    return ids[:, :length]


def feature_specs(cfg: DatasetConfig, tft_output) -> tuple[dict, dict]:
    """(serving spec: model features only, transform spec: features + label columns)."""
    raw = tft_output.raw_feature_spec()
    missing = [k for k in cfg.raw_feature_columns + cfg.label.raw_columns if k not in raw]
    if missing:
        raise ValueError(f"raw schema lacks configured columns {missing}")
    serving = {k: raw[k] for k in cfg.raw_feature_columns}
    transform = {**serving, **{k: raw[k] for k in cfg.label.raw_columns}}
    return serving, transform


def build_serving_model(network, tft_output, cfg: DatasetConfig, layout: FeatureLayout, out_dir: Path) -> None:
    serving_spec, transform_spec = feature_specs(cfg, tft_output)
    module = ServingModule(network, tft_output, layout, serving_spec, transform_spec)
    signatures = {
        SERVING_SIGNATURE: module.serve.get_concrete_function(),
        TRANSFORM_SIGNATURE: module.transform_features.get_concrete_function(),
    }
    tf.saved_model.save(module, str(out_dir), signatures=signatures)
    logger.info("Saved serving model with signatures %s to %s", sorted(signatures), out_dir)
