"""The TFMA EvalConfig: metrics, slices and the blessing gate, built in one place from the config."""

from __future__ import annotations

import tensorflow_model_analysis as tfma

from components.torch_trainer.convert import SERVING_SIGNATURE, TRANSFORM_SIGNATURE
from components.torch_trainer.features import PROBABILITIES_OUTPUT
from data.config import DatasetConfig

REPORTED_METRICS = ("ExampleCount", "AUCPrecisionRecall", "BinaryAccuracy", "Precision", "Recall", "Calibration")


def build_eval_config(dataset: DatasetConfig, auc_threshold: float) -> tfma.EvalConfig:
    """AUC, AUC-PR, accuracy, precision, recall, calibration and count, overall and per slice;
    the candidate is blessed only if its overall AUC is at least ``auc_threshold``."""
    # Gate on the overall slice only: tiny slices (a payment type seen 3 times) have no stable AUC.
    auc = tfma.MetricConfig(
        class_name="AUC",
        per_slice_thresholds=[
            tfma.PerSliceMetricThreshold(
                slicing_specs=[tfma.SlicingSpec()],
                threshold=tfma.MetricThreshold(
                    value_threshold=tfma.GenericValueThreshold(lower_bound={"value": auc_threshold})
                ),
            )
        ],
    )
    metrics = [auc] + [tfma.MetricConfig(class_name=name) for name in REPORTED_METRICS]
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name=SERVING_SIGNATURE,
                preprocessing_function_names=[TRANSFORM_SIGNATURE],
                label_key=dataset.label_key,
                prediction_key=PROBABILITIES_OUTPUT,
            )
        ],
        slicing_specs=[tfma.SlicingSpec()] + [tfma.SlicingSpec(feature_keys=list(s)) for s in dataset.slices],
        metrics_specs=[tfma.MetricsSpec(metrics=metrics)],
    )
