"""The served model's interface, defined here and nowhere else: what TF Serving, TFMA, ``torchtfx predict``, the
MLflow Model and the benchmarks call the TorchTrainer's SavedModel by.

- ``serving_default(examples: string[batch])``: serialized tf.Examples in (no label needed); per task out:
  binary ``{probabilities: float32[batch]}``; multiclass ``{probabilities: float32[batch, K], classes:
  string[batch, K]}`` (column k of both is class k); regression ``{predictions: float32[batch]}``.
- ``transform_features(examples)``: the transformed features (TFMA reads the label from them).

Plain constants only (the task names come from ``data/config/task.py``): the command line and the DDP workers,
which never import TensorFlow, use it too. The converter keeps its own generic signature name: it is a library
that imports nothing of torchtfx.
"""

from __future__ import annotations

from torchtfx.data.config.task import REGRESSION

SERVING_SIGNATURE = "serving_default"
TRANSFORM_SIGNATURE = "transform_features"
EXAMPLES_INPUT = "examples"

PROBABILITIES_OUTPUT = "probabilities"
CLASSES_OUTPUT = "classes"
PREDICTIONS_OUTPUT = "predictions"


def prediction_output(task: str) -> str:
    """The output TFMA scores, the ONNX graph's output name, and what the drift and parity gates compare."""
    return PREDICTIONS_OUTPUT if task == REGRESSION else PROBABILITIES_OUTPUT
