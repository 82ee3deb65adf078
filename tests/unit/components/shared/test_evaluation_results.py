"""Why a candidate was rejected, read from an Evaluator output written in TFMA's own formats (TFRecord files
``metrics`` and ``validations`` of MetricsForSlice / ValidationResult protos, as TFMA's writer lays them out)
and read back through TFMA's own loaders."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.proto import metrics_for_slice_pb2, validation_result_pb2

from torchtfx.components.shared import evaluation_results

PAYMENT_CASH = metrics_for_slice_pb2.SliceKey(
    single_slice_keys=[metrics_for_slice_pb2.SingleSliceKey(column="payment_type", bytes_value=b"Cash")]
)


def _value(slice_key, name: str, value: float, model: str = "candidate", is_diff: bool = False):
    kv = metrics_for_slice_pb2.MetricsForSlice.MetricKeyAndValue()
    kv.key.name, kv.key.model_name, kv.key.is_diff = name, model, is_diff
    kv.value.double_value.value = value
    return slice_key, kv


def _write_evaluation(root, values, failures) -> str:
    by_slice: dict[bytes, metrics_for_slice_pb2.MetricsForSlice] = {}
    for slice_key, kv in values:
        entry = by_slice.setdefault(slice_key.SerializeToString(), metrics_for_slice_pb2.MetricsForSlice())
        entry.slice_key.CopyFrom(slice_key)
        entry.metric_keys_and_values.append(kv)
    with tf.io.TFRecordWriter(str(root / "metrics.tfrecord")) as writer:
        for entry in by_slice.values():
            writer.write(entry.SerializeToString())
    result = validation_result_pb2.ValidationResult(validation_ok=not failures)
    for slice_key, failure in failures:
        per_slice = result.metric_validations_per_slice.add()
        per_slice.slice_key.CopyFrom(slice_key)
        per_slice.failures.append(failure)
    with tf.io.TFRecordWriter(str(root / "validations.tfrecord")) as writer:
        writer.write(result.SerializeToString())
    return str(root)


def _failure(name: str, threshold: tfma.MetricThreshold, is_diff: bool = False):
    failure = validation_result_pb2.ValidationFailure()
    failure.metric_key.name, failure.metric_key.model_name, failure.metric_key.is_diff = name, "candidate", is_diff
    failure.metric_threshold.CopyFrom(threshold)
    return failure


OVERALL = metrics_for_slice_pb2.SliceKey()


def test_failed_value_and_change_gates_name_metric_slice_values_and_threshold(tmp_path):
    floor = tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 0.75}))
    band = tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 0.75}, upper_bound={"value": 1.25})
    )
    drop = tfma.MetricThreshold(
        change_threshold=tfma.GenericChangeThreshold(
            absolute={"value": -0.01}, direction=tfma.MetricDirection.HIGHER_IS_BETTER
        )
    )
    uri = _write_evaluation(
        tmp_path,
        [
            _value(OVERALL, "auc", 0.6871),
            _value(OVERALL, "auc", 0.9308, model="baseline"),
            _value(OVERALL, "auc", -0.2437, is_diff=True),
            _value(OVERALL, "calibration", 1.8355),
            _value(PAYMENT_CASH, "auc", 0.61),
        ],
        [
            (OVERALL, _failure("auc", floor)),
            (OVERALL, _failure("calibration", band)),
            (OVERALL, _failure("auc", drop, is_diff=True)),
        ],
    )
    failures = evaluation_results.gate_failures(uri)
    assert [(f.metric, f.slice, f.is_change, f.threshold) for f in failures] == [
        ("auc", "Overall", False, ">= 0.75"),
        ("calibration", "Overall", False, "in [0.75, 1.25]"),
        ("auc", "Overall", True, "candidate - champion >= -0.01"),
    ]
    assert (failures[0].candidate, failures[0].champion) == (0.6871, 0.9308)
    assert failures[1].champion is None and "champion     n/a" in failures[1].line()
    text = evaluation_results.summary(failures)
    assert text.startswith("Candidate REJECTED: 3 gate(s) failed; the champion and serving directory are unchanged.")
    assert "candidate  0.6871  champion  0.9308  value gate: >= 0.75" in text


def test_slices_are_named_and_values_keyed_by_slice_model_and_diff(tmp_path):
    uri = _write_evaluation(
        tmp_path,
        [
            _value(PAYMENT_CASH, "auc", 0.61),
            _value(OVERALL, "auc", 0.93),
            _value(OVERALL, "auc", 0.95, "baseline"),
            _value(OVERALL, "auc", -0.02, is_diff=True),
        ],
        [],
    )
    values = evaluation_results.metric_values(uri)
    assert values[("payment_type=Cash", "auc", "candidate", False)] == 0.61
    assert values[("Overall", "auc", "candidate", False)] == 0.93
    assert evaluation_results.gate_failures(uri) == [] and evaluation_results.summary([]) == "All gates passed."
    # the candidate's own: not the champion's ("baseline"), not the differences
    assert evaluation_results.candidate_metrics(uri) == {"Overall": {"auc": 0.93}, "payment_type=Cash": {"auc": 0.61}}


def test_per_class_and_averaged_metrics_keep_their_own_values_and_a_relative_mse_gate_reads_right(tmp_path):
    def keyed(name: str, value: float, model: str = "candidate", class_id=None, macro=False):
        slice_key, kv = _value(OVERALL, name, value, model)
        if class_id is not None:
            kv.key.sub_key.class_id.value = class_id
        if macro:
            kv.key.aggregation_type.macro_average = True
        return slice_key, kv

    worse = tfma.MetricThreshold(
        change_threshold=tfma.GenericChangeThreshold(
            relative={"value": 0.05}, direction=tfma.MetricDirection.LOWER_IS_BETTER
        )
    )
    floor = tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 0.7}))
    macro_failure = _failure("auc", floor)
    macro_failure.metric_key.aggregation_type.macro_average = True
    values = [
        keyed("recall", 0.9, class_id=0),
        keyed("recall", 0.2, class_id=2),
        keyed("auc", 0.65, macro=True),
        keyed("auc", 0.8, model="baseline", macro=True),
        keyed("auc", 0.99, class_id=1),
        keyed("mean_squared_error", 1.30),
        keyed("mean_squared_error", 1.00, model="baseline"),
    ]
    uri = _write_evaluation(
        tmp_path, values, [(OVERALL, macro_failure), (OVERALL, _failure("mean_squared_error", worse, True))]
    )

    measured = evaluation_results.metric_values(uri)
    assert measured[("Overall", "recall[class_id=0]", "candidate", False)] == 0.9
    assert measured[("Overall", "recall[class_id=2]", "candidate", False)] == 0.2
    assert measured[("Overall", "auc(macro)", "candidate", False)] == 0.65
    auc, mse = evaluation_results.gate_failures(uri)
    assert (auc.metric, auc.candidate, auc.champion) == ("auc(macro)", 0.65, 0.8)
    assert (mse.metric, mse.candidate, mse.champion, mse.is_change) == ("mean_squared_error", 1.3, 1.0, True)
    assert mse.threshold == "candidate / champion - 1 <= 0.05"
    assert "mean_squared_error" in evaluation_results.summary([auc, mse])


def _change(direction, absolute=None, relative=None) -> tfma.MetricThreshold:
    change = tfma.GenericChangeThreshold(direction=direction)
    if absolute is not None:
        change.absolute.value = absolute
    if relative is not None:
        change.relative.value = relative
    return tfma.MetricThreshold(change_threshold=change)


def test_change_gates_read_in_tfma_s_own_terms_for_both_directions():
    """TFMA passes a change gate when diff = candidate - champion satisfies diff >= absolute (higher is better)
    or diff <= absolute (lower is better); relative compares diff / champion = candidate / champion - 1."""
    lower, higher = tfma.MetricDirection.LOWER_IS_BETTER, tfma.MetricDirection.HIGHER_IS_BETTER
    text = evaluation_results._threshold_text
    assert text(_change(lower, relative=0.05)) == "candidate / champion - 1 <= 0.05"
    assert text(_change(lower, absolute=0.5)) == "candidate - champion <= 0.5"
    assert text(_change(higher, absolute=-0.01)) == "candidate - champion >= -0.01"
    assert text(_change(higher, relative=-0.02)) == "candidate / champion - 1 >= -0.02"
    both = text(_change(lower, absolute=0.1, relative=0.05))
    assert both == "candidate - champion <= 0.1 and candidate / champion - 1 <= 0.05"
    ceiling = tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(upper_bound={"value": 4.0}))
    assert text(ceiling) == "<= 4"


def test_metric_labels_name_the_class_and_the_average():
    from tensorflow_model_analysis.proto import metrics_for_slice_pb2

    def key(**fields):
        return metrics_for_slice_pb2.MetricKey(name="auc", **fields)

    assert evaluation_results.metric_label(key()) == "auc"
    assert evaluation_results.metric_label(key(sub_key={"class_id": {"value": 2}})) == "auc[class_id=2]"
    assert evaluation_results.metric_label(key(aggregation_type={"macro_average": True})) == "auc(macro)"
    assert evaluation_results.metric_label(key(aggregation_type={"micro_average": True})) == "auc(micro)"
    assert evaluation_results.metric_label(key(sub_key={"top_k": {"value": 3}})) == "auc[top_k=3]"


def test_a_per_class_floor_failure_names_the_class(tmp_path):
    floor = tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 0.5}))
    failure = _failure("recall", floor)
    failure.metric_key.sub_key.class_id.value = 2
    slice_key, kv = _value(OVERALL, "recall", 0.25)
    kv.key.sub_key.class_id.value = 2
    uri = _write_evaluation(tmp_path, [(slice_key, kv), _value(OVERALL, "recall", 0.9)], [(OVERALL, failure)])
    (found,) = evaluation_results.gate_failures(uri)
    assert (found.metric, found.candidate, found.threshold) == ("recall[class_id=2]", 0.25, ">= 0.5")
    assert found.line().startswith("recall[class_id=2] Overall")
