"""The TFMA EvalConfig: metrics, slices and the blessing gates, built in one place."""

from __future__ import annotations

import tensorflow_model_analysis as tfma

from torchtfx.components.torch_trainer.export.convert import SERVING_SIGNATURE, TRANSFORM_SIGNATURE
from torchtfx.components.torch_trainer.features import PROBABILITIES_OUTPUT
from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.data.config.gates import GateConfig

REPORTED_METRICS = ("ExampleCount", "AUCPrecisionRecall", "BinaryAccuracy", "Precision", "Recall", "CalibrationPlot")
OVERALL = tfma.SlicingSpec()


def _slicing_spec(text: str) -> tfma.SlicingSpec:
    """ "feature" slices by every value of a feature; "feature=value" is one slice."""
    if "=" in text:
        key, value = text.split("=", 1)
        return tfma.SlicingSpec(feature_values={key.strip(): value.strip()})
    return tfma.SlicingSpec(feature_keys=[text.strip()])


def _threshold(slicing: tfma.SlicingSpec, value=None, change=None) -> tfma.PerSliceMetricThreshold:
    return tfma.PerSliceMetricThreshold(
        slicing_specs=[slicing], threshold=tfma.MetricThreshold(value_threshold=value, change_threshold=change)
    )


def _auc_config(gates: GateConfig) -> tfma.MetricConfig:
    # The AUC floor is gated on the overall slice only: tiny slices have no stable AUC.
    def drop(limit: float) -> tfma.GenericChangeThreshold:
        return tfma.GenericChangeThreshold(absolute={"value": -limit}, direction=tfma.MetricDirection.HIGHER_IS_BETTER)

    thresholds = [
        _threshold(
            OVERALL, tfma.GenericValueThreshold(lower_bound={"value": gates.auc_floor}), drop(gates.max_auc_drop)
        )
    ]
    thresholds += [_threshold(_slicing_spec(s), change=drop(d)) for s, d in sorted(gates.slice_max_auc_drop.items())]
    return tfma.MetricConfig(class_name="AUC", per_slice_thresholds=thresholds)


def _value_bounded(name: str, low: float | None, high: float | None) -> tfma.MetricConfig:
    bounds = tfma.GenericValueThreshold()
    if low is not None:
        bounds.lower_bound.value = low
    if high is not None:
        bounds.upper_bound.value = high
    return tfma.MetricConfig(class_name=name, per_slice_thresholds=[_threshold(OVERALL, bounds)])


def build_metrics(gates: GateConfig) -> list[tfma.MetricConfig]:
    low, high = gates.calibration_band
    metrics = [_auc_config(gates), _value_bounded("Calibration", low, high)]
    # AUC and Calibration have gates of their own; GateConfig refuses extra bounds on them.
    for name in sorted(set(gates.value_floors) | set(gates.value_ceilings)):
        metrics.append(_value_bounded(name, gates.value_floors.get(name), gates.value_ceilings.get(name)))
    bounded = {m.class_name for m in metrics}
    return metrics + [tfma.MetricConfig(class_name=n) for n in REPORTED_METRICS if n not in bounded]


def build_eval_config(dataset: DatasetConfig, gates: GateConfig) -> tfma.EvalConfig:
    """AUC, AUC-PR, accuracy, precision, recall, calibration and count, overall and per slice.

    Blessing: every value threshold holds and, when a champion exists, no change threshold fails.
    TFX adds the champion as the ``baseline`` model; change thresholds are skipped on a first run.
    """
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name=SERVING_SIGNATURE,
                preprocessing_function_names=[TRANSFORM_SIGNATURE],
                label_key=dataset.label_key,
                prediction_key=PROBABILITIES_OUTPUT,
            )
        ],
        slicing_specs=[OVERALL] + [tfma.SlicingSpec(feature_keys=list(s)) for s in dataset.slices],
        metrics_specs=[tfma.MetricsSpec(metrics=build_metrics(gates))],
    )
