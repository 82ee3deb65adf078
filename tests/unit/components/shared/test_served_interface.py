"""The served model's names: what TF Serving clients, TFMA configs and MLflow users call the SavedModel by. A
rename here breaks every caller outside this repository, so the values are pinned."""

from __future__ import annotations

import subprocess
import sys

from torchtfx.components.shared import served_interface as served
from torchtfx.data.config.task import BINARY, MULTICLASS, REGRESSION


def test_the_signature_is_tf_servings_default_and_takes_examples():
    import tensorflow as tf

    assert served.SERVING_SIGNATURE == tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY == "serving_default"
    assert (served.TRANSFORM_SIGNATURE, served.EXAMPLES_INPUT) == ("transform_features", "examples")


def test_each_task_is_scored_by_its_output():
    assert (served.PROBABILITIES_OUTPUT, served.CLASSES_OUTPUT, served.PREDICTIONS_OUTPUT) == (
        "probabilities",
        "classes",
        "predictions",
    )
    assert [served.prediction_output(t) for t in (BINARY, MULTICLASS, REGRESSION)] == [
        "probabilities",
        "probabilities",
        "predictions",
    ]


def test_importing_it_imports_no_framework():
    """The command line and the DDP workers import it: no TensorFlow, torch, TFX or Beam behind it."""
    probe = (
        "import sys, torchtfx.components.shared.served_interface\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'torch', 'tfx', 'apache_beam'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
