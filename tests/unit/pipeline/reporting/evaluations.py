"""Evaluator outputs per task, written in TFMA's own formats (``metrics``, ``plots`` and ``validations``
TFRecord files of MetricsForSlice / PlotsForSlice / ValidationResult protos) with the metric keys TFMA 0.47
produces for each task's EvalConfig (checked against real TFMA runs in tests/unit/pipeline/evaluation/test_config.py):
per-class values carry ``sub_key.class_id``, the averaged AUCs ``aggregation_type``."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.proto import metrics_for_slice_pb2, validation_result_pb2

OVERALL = metrics_for_slice_pb2.SliceKey()
CANDIDATE, CHAMPION = "candidate", "baseline"


def slice_key(column: str, value: str) -> metrics_for_slice_pb2.SliceKey:
    return metrics_for_slice_pb2.SliceKey(
        single_slice_keys=[metrics_for_slice_pb2.SingleSliceKey(column=column, bytes_value=value.encode())]
    )


def metric_key(name: str, model: str = CANDIDATE, class_id=None, aggregation=None, is_diff=False):
    key = metrics_for_slice_pb2.MetricKey(name=name, model_name=model, is_diff=is_diff)
    if class_id is not None:
        key.sub_key.class_id.value = class_id
    if aggregation == "macro":
        key.aggregation_type.macro_average = True
    elif aggregation == "micro":
        key.aggregation_type.micro_average = True
    return key


def failure(key, threshold: tfma.MetricThreshold) -> validation_result_pb2.ValidationFailure:
    return validation_result_pb2.ValidationFailure(metric_key=key, metric_threshold=threshold)


def write(root: Path, values, failures=(), calibration_buckets=None) -> str:
    """``values``: (slice key, metric key, value); ``failures``: (slice key, ValidationFailure);
    ``calibration_buckets``: (lower threshold, weight, label sum, prediction sum) of the candidate, overall."""
    by_slice: dict[bytes, metrics_for_slice_pb2.MetricsForSlice] = {}
    for slice_, key, value in values:
        entry = by_slice.setdefault(slice_.SerializeToString(), metrics_for_slice_pb2.MetricsForSlice(slice_key=slice_))
        kv = entry.metric_keys_and_values.add(key=key)
        kv.value.double_value.value = value
    with tf.io.TFRecordWriter(str(root / "metrics.tfrecord")) as writer:
        for entry in by_slice.values():
            writer.write(entry.SerializeToString())
    if calibration_buckets:
        plots = metrics_for_slice_pb2.PlotsForSlice(slice_key=OVERALL)
        kv = plots.plot_keys_and_values.add()
        kv.key.model_name = CANDIDATE
        for low, weight, label, prediction in calibration_buckets:
            bucket = kv.value.calibration_histogram_buckets.buckets.add(lower_threshold_inclusive=low)
            bucket.num_weighted_examples.value = weight
            bucket.total_weighted_label.value = label
            bucket.total_weighted_refined_prediction.value = prediction
        with tf.io.TFRecordWriter(str(root / "plots.tfrecord")) as writer:
            writer.write(plots.SerializeToString())
    result = validation_result_pb2.ValidationResult(validation_ok=not failures)
    for slice_, fail in failures:
        result.metric_validations_per_slice.add(slice_key=slice_).failures.append(fail)
    with tf.io.TFRecordWriter(str(root / "validations.tfrecord")) as writer:
        writer.write(result.SerializeToString())
    return str(root)


def _both(slice_, name: str, candidate: float, champion: float | None, **sub):
    rows = [(slice_, metric_key(name, **sub), candidate)]
    if champion is not None:
        rows += [
            (slice_, metric_key(name, CHAMPION, **sub), champion),
            (slice_, metric_key(name, is_diff=True, **sub), candidate - champion),
        ]
    return rows


def binary(root: Path, champion: bool = True) -> str:
    """A rejected binary candidate: AUC 0.70 (champion 0.80) overall, 0.65 on payment_type=Cash."""
    cash = slice_key("payment_type", "Cash")
    overall = {
        "auc": (0.70, 0.80),
        "auc_precision_recall": (0.5, 0.6),
        "binary_accuracy": (0.8, 0.82),
        "precision": (0.6, 0.61),
        "recall": (0.4, 0.42),
        "calibration": (1.1, 1.0),
        "example_count": (100, 100),
    }
    values = [row for name, (c, b) in overall.items() for row in _both(OVERALL, name, c, b if champion else None)]
    values += _both(cash, "auc", 0.65, 0.60 if champion else None)
    drop = tfma.MetricThreshold(
        change_threshold=tfma.GenericChangeThreshold(
            absolute={"value": -0.01}, direction=tfma.MetricDirection.HIGHER_IS_BETTER
        )
    )
    failures = [(OVERALL, failure(metric_key("auc", is_diff=True), drop))] if champion else []
    buckets = [(0.1, 10.0, 1.0, 1.5), (0.5, 20.0, 10.0, 11.0), (0.9, 5.0, 4.5, 4.6)]
    return write(root, values, failures, calibration_buckets=buckets)


def multiclass(root: Path) -> str:
    """A candidate 0.02 less accurate than the champion (a 0.01 drop is allowed), three classes."""
    values = _both(OVERALL, "sparse_categorical_accuracy", 0.80, 0.82)
    values += _both(OVERALL, "auc", 0.90, 0.91, aggregation="macro")
    values += _both(OVERALL, "auc", 0.93, 0.93, aggregation="micro")
    for k, recall in enumerate((0.9, 0.7, 0.5)):
        values += _both(OVERALL, "recall", recall, recall, class_id=k)
        values += _both(OVERALL, "precision", 0.8, 0.8, class_id=k) + _both(OVERALL, "auc", 0.9, 0.9, class_id=k)
    values += _both(OVERALL, "example_count", 105, 105) + _both(OVERALL, "weighted_example_count", 100, 100)
    values += _both(slice_key("trip_start_hour", "7"), "sparse_categorical_accuracy", 0.75, 0.70)
    drop = tfma.MetricThreshold(
        change_threshold=tfma.GenericChangeThreshold(
            absolute={"value": -0.01}, direction=tfma.MetricDirection.HIGHER_IS_BETTER
        )
    )
    return write(root, values, [(OVERALL, failure(metric_key("sparse_categorical_accuracy", is_diff=True), drop))])


def regression(root: Path) -> str:
    """A candidate whose MSE is 10% above the champion's (5% allowed); better MAE."""
    values = _both(OVERALL, "mean_squared_error", 1.10, 1.00) + _both(OVERALL, "mean_absolute_error", 0.70, 0.75)
    values += _both(OVERALL, "root_mean_squared_error", 1.10**0.5, 1.0)
    values += _both(OVERALL, "squared_pearson_correlation", 0.40, 0.42)
    values += _both(OVERALL, "example_count", 105, 105) + _both(OVERALL, "weighted_example_count", 100, 100)
    values += _both(slice_key("payment_type", "Cash"), "mean_squared_error", 0.5, 0.6)
    worse = tfma.MetricThreshold(
        change_threshold=tfma.GenericChangeThreshold(
            relative={"value": 0.05}, direction=tfma.MetricDirection.LOWER_IS_BETTER
        )
    )
    return write(root, values, [(OVERALL, failure(metric_key("mean_squared_error", is_diff=True), worse))])


def analyzed(root: Path, task: str) -> str:
    """TFMA's own results (``tfma.analyze_raw_data``, the task's metric specs without gates) on 60 rows sliced by
    ``g``: binary slices ``neg`` (negatives only), ``pos`` (positives only) and ``mix``; multiclass slices ``one``
    (class 0 only) and ``mix``."""
    import numpy as np
    import pandas as pd

    from torchtfx.data.config.dataset import load_dataset_config
    from torchtfx.data.config.gates import GateConfig
    from torchtfx.pipeline.evaluation.config import build_metrics_specs

    rng = np.random.default_rng(0)
    dataset = load_dataset_config("taxi" if task == "binary" else "taxi_payment")
    if task == "binary":
        label = np.r_[np.zeros(20), np.ones(20), rng.random(20) < 0.5].astype(float)
        frame = pd.DataFrame(
            {"label": label, "prediction": rng.random(60), "g": ["neg"] * 20 + ["pos"] * 20 + ["mix"] * 20}
        )
    else:
        k = dataset.label.num_classes
        scores = rng.random((60, k))
        scores = scores / scores.sum(1, keepdims=True)
        label = np.r_[np.zeros(20, int), np.arange(40) % k]
        frame = pd.DataFrame({"label": label, "prediction": list(scores), "g": ["one"] * 20 + ["mix"] * 40})
    specs = build_metrics_specs(dataset, GateConfig())
    for metric in (m for spec in specs for m in spec.metrics):  # no champion here: TFMA refuses change thresholds
        del metric.per_slice_thresholds[:]
    config = tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(label_key="label", prediction_key="prediction")],
        slicing_specs=[tfma.SlicingSpec(), tfma.SlicingSpec(feature_keys=["g"])],
        metrics_specs=specs,
    )
    tfma.analyze_raw_data(frame, config, output_path=str(root))
    return str(root)
