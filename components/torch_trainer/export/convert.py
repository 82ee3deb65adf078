"""ONNX -> TensorFlow with onnx2tf, then one SavedModel that serves raw tf.Examples.

Signatures of the SavedModel:
- ``serving_default(examples: string[batch]) -> {"probabilities": float32[batch]}``: parse (no label
  needed) -> TFT transform layer -> converted network.
- ``transform_features(examples) -> transformed features``: what TFMA uses to get the label.
"""

from __future__ import annotations

import logging
from pathlib import Path

import tensorflow as tf

from torchtfx.components.torch_trainer.features import PROBABILITIES_OUTPUT, FeatureLayout
from torchtfx.data.config.dataset import DatasetConfig

logger = logging.getLogger(__name__)

SERVING_SIGNATURE = "serving_default"
TRANSFORM_SIGNATURE = "transform_features"
EXAMPLES_INPUT = "examples"


def convert_onnx(onnx_path: Path, work_dir: Path):
    """The ONNX graph as a tf_keras functional model (inputs in ONNX order: dense, categorical)."""
    import onnx2tf

    model = onnx2tf.convert(
        input_onnx_file_path=str(onnx_path),
        output_folder_path=str(work_dir),
        non_verbose=True,
        # We only need the Keras model it builds: by default onnx2tf also saves its own SavedModel and
        # converts float32 and float16 TFLite files, which took 57 of its 65 s on the taxi model.
        disable_model_save=True,
        # onnxsim is not installed (and the exporter's graph is already simple); skip the attempt.
        not_use_onnxsim=True,
    )
    if len(model.inputs) != 2:
        raise ValueError(f"converted model has {len(model.inputs)} inputs, expected 2 (dense, categorical)")
    return model


def first_output(outputs) -> tf.Tensor:
    """onnx2tf renames outputs between versions: read them by position."""
    if isinstance(outputs, dict):
        outputs = list(outputs.values())
    if isinstance(outputs, (list, tuple)):
        outputs = outputs[0]
    return outputs


class ServingModule(tf.Module):
    """The two signatures. ``autograph=False``: they hold no Python control flow on tensors, and autograph
    would otherwise convert every onnx2tf layer's ``call`` while tracing (7 of the 16.5 s of conversion)."""

    def __init__(self, network, tft_output, layout: FeatureLayout, serving_spec: dict, transform_spec: dict) -> None:
        super().__init__()
        self.network = network
        self.tft_layer = tft_output.transform_features_layer()
        self._layout = layout
        self._serving_spec = serving_spec
        self._transform_spec = transform_spec

    def network_inputs(self, transformed: dict) -> tuple[tf.Tensor, tf.Tensor]:
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
        return dense, categorical

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)], autograph=False)
    def serve(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(examples, self._serving_spec)
        dense, categorical = self.network_inputs(self.tft_layer(parsed))
        probabilities = first_output(self.network([dense, categorical]))
        return {PROBABILITIES_OUTPUT: tf.reshape(probabilities, [-1])}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)], autograph=False)
    def transform_features(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        return self.tft_layer(tf.io.parse_example(examples, self._transform_spec))


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
