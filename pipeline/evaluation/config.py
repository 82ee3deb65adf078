"""The TFMA EvalConfig: metrics, slices and the blessing gates per task, built from the metrics' declarations
(:mod:`torchtfx.data.config.metrics`: what each task computes, which gate field bounds which metric, and how) and
the gates' settings (:class:`~torchtfx.data.config.gates.GateConfig`).

- binary: AUC (floor, drop vs champion, per-slice drops), calibration band, AUC-PR, accuracy, precision,
  recall, calibration plot.
- multiclass: accuracy (optional floor, drop vs champion), one-vs-rest AUC macro-averaged (floor) and
  micro-averaged, and recall, precision and AUC per class (``class_id`` sub-keys; optional floors or
  ceilings on recall and precision hold for every class).
- regression: MSE (optional ceiling, relative increase vs champion), MAE, RMSE (lower is better; optional
  ceilings), and the squared Pearson correlation (floor).
Multiclass and regression weigh rows by the label weight: a refused label counts for nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import tensorflow_model_analysis as tfma

from torchtfx.components.shared.served_interface import SERVING_SIGNATURE, TRANSFORM_SIGNATURE, prediction_output
from torchtfx.data.config import metrics
from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.data.config.gates import GateConfig
from torchtfx.data.config.metrics import MACRO, Gate, Metric
from torchtfx.data.config.task import BINARY, MULTICLASS
from torchtfx.pipeline.evaluation import EVAL_METRICS_MODULE
from torchtfx.pipeline.evaluation.metrics import FROM_HISTOGRAM

OVERALL = tfma.SlicingSpec()
# TFMA's defaults are 10,000 thresholds for AUC and AUC-PR and 1,000 calibration buckets; every slice pays for
# them (make bench, evaluator: our taxi evaluation 7.59 -> 6.16 s with these). 1,000 thresholds are as exact:
# on taxi's eval split AUC 0.939693 (1,000) and 0.939828 (10,000) against 0.939623 computed from the ranks. The
# report regroups the calibration buckets into 10 bins. Declared with each metric (Metric.tfma_config).
METRIC_RESOLUTION = {metric.tfma_class: metric.tfma_config for metric in metrics.METRICS if metric.tfma_config}


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


def _metric_config(metric: Metric, thresholds: Sequence[tfma.PerSliceMetricThreshold] = ()) -> tfma.MetricConfig:
    config = tfma.MetricConfig(class_name=metric.tfma_class, per_slice_thresholds=list(thresholds))
    if metric.tfma_config:
        config.config = metric.tfma_config
    return config


def _value_threshold(low: float | None, high: float | None) -> tfma.GenericValueThreshold | None:
    if low is None and high is None:
        return None
    bounds = tfma.GenericValueThreshold()
    if low is not None:
        bounds.lower_bound.value = low
    if high is not None:
        bounds.upper_bound.value = high
    return bounds


def _change_threshold(metric: Metric, kind: str, limit: float) -> tfma.GenericChangeThreshold:
    """TFMA's diff is candidate - champion: a drop of ``limit`` at most is diff >= -limit where higher is better
    (<= limit where lower is; relative: diff / champion)."""
    if metric.lower_is_better:
        direction, bound = tfma.MetricDirection.LOWER_IS_BETTER, limit
    else:
        direction, bound = tfma.MetricDirection.HIGHER_IS_BETTER, -limit
    if kind == metrics.MAX_RELATIVE_INCREASE:
        return tfma.GenericChangeThreshold(relative={"value": bound}, direction=direction)
    return tfma.GenericChangeThreshold(absolute={"value": bound}, direction=direction)


def _gated(metric: Metric, own_gates: Iterable[Gate], gates: GateConfig) -> tfma.MetricConfig:
    """The metric with its gates' thresholds: value and change on the overall slice (an AUC floor is gated on the
    overall slice only: tiny slices have no stable AUC), then the per-slice changes. A gate set to None is off."""
    low = high = change = None
    per_slice: list[tfma.PerSliceMetricThreshold] = []
    for gate in own_gates:
        setting = getattr(gates, gate.field)
        if setting is None:
            continue
        if gate.kind == metrics.FLOOR:
            low = setting
        elif gate.kind == metrics.CEILING:
            high = setting
        elif gate.kind == metrics.BAND:
            low, high = setting
        elif gate.kind == metrics.SLICE_MAX_DROP:
            per_slice = [
                _threshold(_slicing_spec(s), change=_change_threshold(metric, metrics.MAX_DROP, limit))
                for s, limit in sorted(setting.items())
            ]
        else:
            change = _change_threshold(metric, gate.kind, setting)
    value = _value_threshold(low, high)
    overall = [] if value is None and change is None else [_threshold(OVERALL, value, change)]
    return _metric_config(metric, overall + per_slice)


def _gated_metrics(task: str, gates: GateConfig, average: str = "") -> list[tfma.MetricConfig]:
    """The task's metrics that have gates of their own (``metrics.GATES``), in the order of their first gate."""
    own: dict[Metric, list[Gate]] = {}
    for gate in metrics.GATES:
        if gate.task == task and gate.average == average:
            own.setdefault(gate.metric, []).append(gate)
    return [_gated(metric, metric_gates, gates) for metric, metric_gates in own.items()]


def _value_bounded(metric: Metric, gates: GateConfig) -> tfma.MetricConfig:
    """The metric with its value_floors / value_ceilings (keyed by TFMA class); error metrics take ceilings only."""
    low = None if metric.lower_is_better else gates.value_floors.get(metric.tfma_class)
    value = _value_threshold(low, gates.value_ceilings.get(metric.tfma_class))
    return _metric_config(metric, [] if value is None else [_threshold(OVERALL, value)])


def _overall_metrics(task: str, gates: GateConfig) -> list[tfma.MetricConfig]:
    """Gated metrics, then the value_floors / value_ceilings (but a multiclass task's: those hold per class), then
    the task's other reported metrics."""
    evaluated = metrics.EVALUATED[task]
    configs = _gated_metrics(task, gates)
    if not evaluated.per_class:
        bounded = sorted(set(gates.value_floors) | set(gates.value_ceilings))
        configs += [_value_bounded(metrics.BY_TFMA_CLASS[name], gates) for name in bounded]
    present = {config.class_name for config in configs}
    return configs + [_metric_config(m) for m in evaluated.reported if m.tfma_class not in present]


def _averaged_spec(metric: Metric, average: str, num_classes: int, gates: GateConfig) -> tfma.MetricsSpec:
    own = [g for g in metrics.GATES if g.task == MULTICLASS and g.metric == metric and g.average == average]
    if average == MACRO:
        # TFMA needs the classes' weights to average over them; every class counts alike in a macro average.
        # No ``binarize`` beside it: TFMA would apply the macro floor to every class's AUC as well.
        aggregate = tfma.AggregationOptions(macro_average=True, class_weights={k: 1.0 for k in range(num_classes)})
    else:
        aggregate = tfma.AggregationOptions(micro_average=True)
    return tfma.MetricsSpec(metrics=[_gated(metric, own, gates)], aggregate=aggregate)


def _multiclass_specs(num_classes: int, gates: GateConfig) -> list[tfma.MetricsSpec]:
    evaluated = metrics.EVALUATED[MULTICLASS]
    classes = tfma.BinarizationOptions(class_ids={"values": list(range(num_classes))})
    # A threshold in a binarized spec holds for every class: value_floors {recall: 0.5} is a per-class floor.
    per_class = [_value_bounded(metric, gates) for metric in evaluated.per_class]
    return [
        tfma.MetricsSpec(metrics=_overall_metrics(MULTICLASS, gates)),
        tfma.MetricsSpec(metrics=per_class, binarize=classes),
        *(_averaged_spec(metric, average, num_classes, gates) for metric, average in evaluated.averaged),
    ]


def build_metrics_specs(dataset: DatasetConfig, gates: GateConfig) -> list[tfma.MetricsSpec]:
    """The task's metrics and thresholds (independent of the model: the unit tests run them on raw data)."""
    if dataset.task == MULTICLASS:
        specs = _multiclass_specs(dataset.label.num_classes, gates)
    else:
        specs = [tfma.MetricsSpec(metrics=_overall_metrics(dataset.task, gates))]
    if dataset.task == BINARY:  # ours stand for TFMA's (pipeline/evaluation/metrics.py): same keys and values
        for metric in (m for spec in specs for m in spec.metrics if m.class_name in FROM_HISTOGRAM):
            metric.class_name, metric.module = FROM_HISTOGRAM[metric.class_name], EVAL_METRICS_MODULE
    return specs


def build_eval_config(dataset: DatasetConfig, gates: GateConfig) -> tfma.EvalConfig:
    """The task's metrics (module docstring), overall and per slice.

    Blessing: every value threshold holds and, when a champion exists, no change threshold fails.
    TFX adds the champion as the ``baseline`` model; change thresholds are skipped on a first run.
    """
    spec = tfma.ModelSpec(
        signature_name=SERVING_SIGNATURE,
        preprocessing_function_names=[TRANSFORM_SIGNATURE],
        label_key=dataset.eval_label_key,
        prediction_key=prediction_output(dataset.task),
    )
    if dataset.label_weight_key:
        spec.example_weight_key = dataset.label_weight_key
    return tfma.EvalConfig(
        model_specs=[spec],
        slicing_specs=[OVERALL] + [tfma.SlicingSpec(feature_keys=list(s)) for s in dataset.evaluation_slices],
        metrics_specs=build_metrics_specs(dataset, gates),
    )


def without_gates(config: tfma.EvalConfig) -> tfma.EvalConfig:
    """A copy of ``config`` whose metrics carry no thresholds (``build_eval_config`` puts them on the metrics
    alone): a model scored outside the pipeline, with no champion to compare with and nothing to bless."""
    ungated = tfma.EvalConfig()
    ungated.CopyFrom(config)
    for spec in ungated.metrics_specs:
        for metric in spec.metrics:
            metric.ClearField("threshold")
            metric.ClearField("per_slice_thresholds")
    return ungated
